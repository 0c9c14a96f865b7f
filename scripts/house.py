"""The house drawing: banditkit's packages, their layers and every import between them, read from the source.

Each module of ``banditkit/`` is parsed (``ast``; imports inside functions count too) and mapped to its package
(``banditkit.cli.bandit`` -> ``cli``; a top-level module such as ``banditkit.debug`` is its own package).  Three rules
are checked (``tests/project/test_house.py`` asserts them):

1. **Imports point down**: a package imports only from its own layer or lower ones (:data:`LAYERS`, the drawing in
   ``../shared/DESIGN.md``).
2. **No cycles** between packages.
3. **The shell uses public API**: a module of a shell package (:data:`PUBLIC_ONLY`: ``cli``, ``serve``,
   ``integrations``) reads no private name of another package — ``from banditkit.x import _name``, an import of a
   private module (``banditkit.x._mod``), or ``mod._name`` on a banditkit module or object it imported.  Library
   packages may share the internal helpers ``banditkit._xla`` / ``_alias`` (they are the library's own kernels).

Usage::

    python scripts/house.py            # print the drawing and any rule that is broken (exit status 1 if one is)
    python scripts/house.py --write    # also refresh the drawing between the markers in docs/architecture.md
"""

from __future__ import annotations

import argparse
import ast
import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "banditkit"
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- house:begin (scripts/house.py --write) -->", "<!-- house:end -->"

#: Layer of every package, lowest first (DESIGN.md).  Layer 0 holds the dependency-free utilities.
LAYERS: dict[str, int] = {
    **dict.fromkeys(("_alias", "_version", "_xla", "validation", "rng", "convs", "memory", "threads", "runtime",
                     "gym_ids", "checkpoint", "debug"), 0),
    "datasets": 1,
    **dict.fromkeys(("posteriors", "likelihoods", "models"), 2),
    **dict.fromkeys(("policies", "environments"), 3),
    "agents": 4,
    **dict.fromkeys(("experiments", "offline", "plotting", "bo"), 5),
    "integrations": 6,
    **dict.fromkeys(("cli", "serve", "__main__", "__init__"), 7),
}
LAYER_NAMES = {0: "utilities", 1: "data", 2: "inference", 3: "decisions | environments", 4: "agents",
               5: "runs, logged data, plots, BO", 6: "integrations", 7: "shell"}
#: Packages that may use only other packages' public names.
PUBLIC_ONLY = ("cli", "serve", "integrations")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    """``banditkit/cli/bandit.py`` -> ``banditkit.cli.bandit`` (``__init__`` names its package)."""
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def package_of(module: str) -> str:
    """``banditkit.cli.bandit`` -> ``cli``; ``banditkit`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _private(segment: str) -> bool:
    return segment.startswith("_") and not (segment.startswith("__") and segment.endswith("__"))


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str | None:
    """The absolute module an ``ImportFrom`` reads (relative imports resolved), or ``None`` outside banditkit."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return target if target.split(".")[0] == "banditkit" else None


def _is_module(name: str, package: Path = PACKAGE) -> bool:
    """Whether ``banditkit.a.b`` names a module or package file under ``banditkit/``."""
    path = package.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def scan(package: Path = PACKAGE) -> tuple[collections.Counter, list[str]]:
    """``(edges, private_reads)``: import counts between packages ``(from, to)``, and every private read by a
    :data:`PUBLIC_ONLY` package of another package, as ``"file:line: what"`` (``package``: the ``banditkit/``
    folder to read)."""
    edges: collections.Counter = collections.Counter()
    private: list[str] = []
    for path in sorted(package.rglob("*.py")):
        module = module_name(path, package)
        here = package_of(module)
        tree = ast.parse(path.read_text(), filename=str(path))
        bound: dict[str, str] = {}  # local name -> the banditkit module it came from (for mod._name reads)
        where = f"{path.relative_to(package.parent)}"
        for node in ast.walk(tree):
            targets: list[tuple[str, list[str]]] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "banditkit":
                        targets.append((alias.name, []))
                        bound[alias.asname or alias.name.split(".")[0]] = alias.name
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, node, path.name == "__init__.py")
                if target is not None:
                    plain = []
                    for alias in node.names:  # `from banditkit import likelihoods` reads the module likelihoods
                        full = f"{target}.{alias.name}"
                        if _is_module(full, package):
                            targets.append((full, []))
                        else:
                            plain.append(alias.name)
                        bound[alias.asname or alias.name] = full
                    if plain:
                        targets.append((target, plain))
            for target, names in targets:
                there = package_of(target)
                edges[(here, there)] += 1
                if here in PUBLIC_ONLY and there != here:
                    bad = [s for s in target.split(".")[1:] if _private(s)] + [n for n in names if _private(n)]
                    if bad:
                        private.append(f"{where}:{node.lineno}: imports {', '.join(bad)} from {target}")
        if here in PUBLIC_ONLY:
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name):
                    origin = bound.get(node.value.id)
                    if origin is not None and package_of(origin) != here:
                        private.append(f"{where}:{node.lineno}: reads {node.value.id}.{node.attr} ({origin})")
    return edges, private


def layer_violations(edges: collections.Counter) -> list[str]:
    """Imports from a higher layer, and packages missing from :data:`LAYERS`."""
    out = []
    for (a, b) in sorted(edges):
        if a == b:
            continue
        for p in (a, b):
            if p not in LAYERS:
                out.append(f"package {p!r} has no layer in scripts/house.py LAYERS")
        if a in LAYERS and b in LAYERS and LAYERS[b] > LAYERS[a]:
            out.append(f"{a} (layer {LAYERS[a]}) imports {b} (layer {LAYERS[b]}): imports point down")
    return sorted(set(out))


def cycles(edges: collections.Counter) -> list[list[str]]:
    """Strongly connected sets of two or more packages (Tarjan)."""
    graph: dict[str, set[str]] = collections.defaultdict(set)
    for (a, b) in edges:
        if a != b:
            graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(set(graph) | {b for (_, b) in edges}):
        if v not in index:
            visit(v)
    return found


def drawing(edges: collections.Counter) -> str:
    """The layers top to bottom, each package with the packages it imports (import statements in brackets)."""
    lines = ["```text"]
    by_layer: dict[int, list[str]] = collections.defaultdict(list)
    for p in sorted(({p for e in edges for p in e} | set(LAYERS)) - {"__main__", "__init__"}):
        by_layer[LAYERS.get(p, -1)].append(p)
    for layer in sorted(by_layer, reverse=True):
        lines.append(f"layer {layer}: {LAYER_NAMES.get(layer, '?')}")
        for p in by_layer[layer]:
            deps = sorted((b for (a, b) in edges if a == p and b != p), key=lambda b: (-LAYERS.get(b, -1), b))
            shown = ", ".join(f"{b} ({edges[(p, b)]})" for b in deps) or "-"
            lines.append(f"  {p:<13} -> {shown}")
    lines.append("```")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="refresh the drawing in docs/architecture.md")
    args = parser.parse_args(argv)
    edges, private = scan()
    text = drawing(edges)
    print(text)
    broken = layer_violations(edges) + [f"import cycle: {' <-> '.join(c)}" for c in cycles(edges)] + private
    for line in broken:
        print(f"RULE BROKEN: {line}")
    if args.write:
        doc = DOC.read_text()
        if BEGIN not in doc or END not in doc:
            print(f"{DOC}: markers {BEGIN} / {END} not found; add them where the drawing goes", file=sys.stderr)
            return 2
        head, rest = doc.split(BEGIN, 1)
        DOC.write_text(f"{head}{BEGIN}\n{text}\n{END}{rest.split(END, 1)[1]}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
