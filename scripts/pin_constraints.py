"""Write .ci/constraints.txt: the installed version of every package in banditkit[test,data,docs]'s dependency closure
and of ``build`` (CI's wheel check).

Run in an environment where ``bash scripts/test.sh`` has just passed with ``BANDITKIT_UNPINNED=1`` (latest
versions), then commit the file: CI and ``scripts/test.sh`` install against exactly these versions, so a new
upstream release cannot change a test result between two runs of the same commit.
"""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

HEADER = (
    "# Versions the test suite is run against in CI (scripts/test.sh installs with -c this file).\n"
    "# The package itself only states lower bounds (pyproject.toml); refresh with: python scripts/pin_constraints.py\n"
)


def closure(root: str, extras: set[str]) -> dict[str, md.Distribution]:
    """Installed distributions reachable from ``root[extras]`` through their (marker-filtered) requirements."""
    dists = {canonicalize_name(d.metadata["Name"]): d for d in md.distributions()}
    found: dict[str, md.Distribution] = {}
    todo = [(canonicalize_name(root), frozenset(extras))]
    visited: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, want = todo.pop()
        if (name, want) in visited:
            continue
        visited.add((name, want))
        dist = dists.get(name)
        if dist is None:
            raise SystemExit(f"{name} is not installed: run `pip install -e '.[test,data,docs]' build` first")
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in (want or {""})):
                continue
            dep = canonicalize_name(req.name)
            if dep in dists:
                found[dep] = dists[dep]
            todo.append((dep, frozenset(req.extras)))
    found.pop(canonicalize_name(root), None)
    return found


def main() -> None:
    found = closure("banditkit", {"test", "data", "docs"})
    # build: scripts/wheel_check.sh builds the sdist and the wheel with it (CI)
    found.update(closure("build", set()))
    found[canonicalize_name("build")] = md.distribution("build")
    pins = sorted(f"{d.metadata['Name']}=={d.version}" for d in found.values())
    out = Path(__file__).resolve().parent.parent / ".ci" / "constraints.txt"
    out.write_text(HEADER + "\n".join(pins) + "\n")
    print(f"wrote {len(pins)} pins to {out}")


if __name__ == "__main__":
    main()
