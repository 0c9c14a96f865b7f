"""The entry point: ``python -m benchmarks SUITE [options]``, ``... study NAME [options]``, ``... --list``.

Runs one suite's (or study's) ``main`` with the remaining arguments; its exit status is what ``main`` returns, or,
for the bandit suites, 1 where a ``--check`` found rows the code does not re-make.
"""

from __future__ import annotations

import importlib
import sys

from benchmarks import catalog

USAGE = """usage: python -m benchmarks SUITE [options]        run a suite (--help for its options)
       python -m benchmarks study NAME [options]   run a study
       python -m benchmarks --list                 what each suite and study reproduces and writes"""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE + "\n\n" + catalog.listing())
        return 0
    if argv[0] in ("--list", "-l", "list"):
        print(catalog.listing())
        return 0
    study = argv[0] == "study"
    if study:
        argv = argv[1:]
        if not argv:
            print(USAGE, file=sys.stderr)
            return 2
    name, rest = argv[0], argv[1:]
    entry = catalog.find(name, study=study)
    if entry is None:
        kind = "study" if study else "suite"
        names = [e.name for e in (catalog.STUDIES if study else catalog.SUITES)]
        print(f"{USAGE}\n\nno {kind} {name!r}; the {kind} names: {', '.join(names)} (python -m benchmarks --list)",
              file=sys.stderr)
        return 2
    from benchmarks.harness import merge
    from benchmarks.harness.provenance import PROG

    # the command as typed: argparse's usage line and every result file's command line read it from here
    sys.argv = [f"{PROG} {'study ' if study else ''}{name}", *rest]
    rc = importlib.import_module(entry.module).main(rest)
    return rc if isinstance(rc, int) else merge.check_exit_status()


if __name__ == "__main__":
    sys.exit(main())
