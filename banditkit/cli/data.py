"""``banditkit data fetch [NAME ...] | list``: the dataset cache (:mod:`banditkit.datasets.__main__` does the work)."""

from __future__ import annotations

import argparse

from banditkit.cli.errors import CLIError


def cmd_data(args: argparse.Namespace) -> int:
    from banditkit.datasets.__main__ import main as data_main

    argv = [args.action]
    if args.action == "fetch":
        argv += list(args.names) + (["--force"] if args.force else []) + (["--quiet"] if args.quiet else [])
    elif args.names:
        raise CLIError("banditkit data list: error: list takes no dataset names")
    return data_main(argv)


def register(sub) -> None:
    """Add ``data`` to ``banditkit``'s sub-parsers."""
    dt = sub.add_parser(
        "data", help="fetch or list datasets", description="banditkit data fetch [NAME ...] | banditkit data list"
    )
    dt.add_argument("action", choices=["fetch", "list"], help="fetch: download + verify into the cache; list")
    dt.add_argument("names", nargs="*", help="dataset names (fetch; default: every fetchable one)")
    dt.add_argument("--force", action="store_true", help="re-download even if cached")
    dt.add_argument("--quiet", action="store_true", help="no progress lines")
    dt.set_defaults(func=cmd_data)
