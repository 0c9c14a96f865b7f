"""The house rules, read from the source by ``scripts/house.py``: imports point down, no cycles between packages, the
shell (cli, serve, integrations) reads no private name of another package, and the drawing in docs/architecture.md is
current.  The checker itself is tested on a small hand-made package with known answers."""

from __future__ import annotations

import collections
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("house", ROOT / "scripts" / "house.py")
house = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(house)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "banditkit"


def test_the_checker_finds_upward_imports_cycles_and_private_reads(tmp_path):
    package = _write(tmp_path, {
        "banditkit/__init__.py": "",
        "banditkit/posteriors/__init__.py": "from banditkit.agents import make_agent\n",  # up: agents is layer 4
        "banditkit/agents/__init__.py": "from banditkit.posteriors import hilofi\ndef make_agent(): ...\n",
        "banditkit/experiments/__init__.py": "",
        "banditkit/experiments/runner.py": "def _make_env(): ...\ndef make_env(): ...\n",
        "banditkit/cli/__init__.py": (
            "from banditkit.experiments import runner\n"
            "from banditkit.experiments.runner import make_env, _make_env\n"
            "from banditkit import agents\n"
            "def main():\n    return runner._make_env(), runner.make_env(), agents.make_agent()\n"),
    })
    edges, private = house.scan(package)
    assert edges[("cli", "experiments")] == 2 and edges[("cli", "agents")] == 1
    assert edges[("posteriors", "agents")] == 1 and edges[("agents", "posteriors")] == 1
    assert house.layer_violations(edges) == ["posteriors (layer 2) imports agents (layer 4): imports point down"]
    assert house.cycles(edges) == [["agents", "posteriors"]]
    assert private == [
        "banditkit/cli/__init__.py:2: imports _make_env from banditkit.experiments.runner",
        "banditkit/cli/__init__.py:5: reads runner._make_env (banditkit.experiments.runner)",
    ]


def test_cycles_on_a_known_graph():
    edges = collections.Counter({("a", "b"): 1, ("b", "c"): 1, ("c", "a"): 1, ("c", "d"): 1, ("d", "d"): 1})
    assert house.cycles(edges) == [["a", "b", "c"]]
    assert house.cycles(collections.Counter({("a", "b"): 1, ("b", "c"): 1})) == []


def test_banditkit_keeps_the_house_rules():
    edges, private = house.scan()
    assert house.layer_violations(edges) == []
    assert house.cycles(edges) == []
    assert private == [], "the shell reads private names of other packages:\n" + "\n".join(private)


def test_the_drawing_in_the_architecture_page_is_current():
    edges, _ = house.scan()
    doc = house.DOC.read_text()
    block = doc.split(house.BEGIN, 1)[1].split(house.END, 1)[0].strip()
    assert block == house.drawing(edges), "run `python scripts/house.py --write` and commit docs/architecture.md"
