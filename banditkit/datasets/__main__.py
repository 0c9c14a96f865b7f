"""``python -m banditkit.datasets fetch [NAME ...] [--force] [--quiet]`` and ``python -m banditkit.datasets list``.

The same as ``banditkit data fetch`` / ``banditkit data list`` (the console script calls :func:`main` too).
"""

from __future__ import annotations

import argparse
import sys

from banditkit.datasets.fetching import FetchError, available, fetch


def main(argv: list[str] | None = None) -> int:
    """Run the ``fetch`` / ``list`` sub-commands; returns the exit status (0 ok, 1 some fetch failed)."""
    p = argparse.ArgumentParser(prog="banditkit data", description="Fetch and list banditkit datasets.")
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="download, verify and convert datasets into the cache")
    f.add_argument("names", nargs="*", help="dataset names (default: every fetchable one)")
    f.add_argument("--force", action="store_true", help="re-download even if cached")
    f.add_argument("--quiet", action="store_true", help="no progress lines")
    sub.add_parser("list", help="show the catalogue and what is cached")
    args = p.parse_args(argv)
    if args.cmd == "list":
        df = available()
        with_cols = df[["name", "kind", "cached", "size", "licence", "source"]]
        print(with_cols.to_string(index=False, max_colwidth=70))
        return 0
    try:
        res = fetch(args.names or None, force=args.force, progress=not args.quiet)
    except FetchError as e:
        print(str(e), file=sys.stderr)
        res, code = e.results, 1
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    else:
        code = 0
    for name, r in res.items():
        print(f"{name:14s} {r['status']:9s} {r.get('path') or r.get('source') or ''}")
    return code


if __name__ == "__main__":
    sys.exit(main())
