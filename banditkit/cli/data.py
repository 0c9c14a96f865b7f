"""``banditkit data fetch [NAME ...] [--force] [--quiet] | list``: the dataset cache (:mod:`banditkit.datasets`).

``list`` prints the catalogue with what is cached; ``fetch`` downloads, verifies and converts the named data sets
(default: every fetchable one) into the cache and prints one line per data set.  Exit status 0, 1 when some data set
could not be fetched (every source failed), 2 for a bad name.
"""

from __future__ import annotations

import argparse
import sys

from banditkit.cli.errors import CLIError


def cmd_data(args: argparse.Namespace) -> int:
    from banditkit.datasets import FetchError, available, fetch

    if args.action == "list":
        if args.names:
            raise CLIError("banditkit data list: error: list takes no dataset names")
        table = available()[["name", "kind", "cached", "size", "licence", "source"]]
        print(table.to_string(index=False, max_colwidth=70))
        return 0
    try:
        res, code = fetch(args.names or None, force=args.force, progress=not args.quiet), 0
    except FetchError as e:  # some data set failed: say which, still list what each one did
        print(str(e), file=sys.stderr)
        res, code = e.results, 1
    for name, r in res.items():
        print(f"{name:14s} {r['status']:9s} {r.get('path') or r.get('source') or ''}")
    return code


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
