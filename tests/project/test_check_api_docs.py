"""scripts/check_api_docs.py, the check CI runs after building the reference (scripts/docs.sh): the contract's names
are parsed as the rules say, and a site that leaves a name out fails (on a hand-made site, no Sphinx needed)."""

from __future__ import annotations

import importlib.util
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_api_docs", ROOT / "scripts" / "check_api_docs.py")
check_api_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_api_docs)

CONTRACT = """# contract

## 1. Posterior backends — `bk.posteriors`

```python
post = bk.posteriors.hilofi(apply_fn, likelihood, rank=20)
state = post.init(params)
```
- `apply_fn(params, x) -> (C,)` for a single unbatched input.

| factory | method |
| --- | --- |
| `ekf` | full-covariance EKF |

## 4. Policies — `bk.policies`

`thompson()`, `ucb(beta=...)`.

## 6. Environments — `bk.environments` (Gymnasium)

`banditkit/Mushroom-v0`; `reset(seed=...) -> (obs, info)`, `step(action)`.

## 10. Command line

```
banditkit demo                     # the main job
banditkit data fetch [NAME ...]    # banditkit data list
```

## 13. Sweeps (planned)

`bk.sweep(agent_spec, env, grid={...})`;

```python
from banditkit.bo import space
sp = {"lr": space.Float(1e-4, 1.0, log=True)}
```
"""


def test_the_contract_parser_finds_each_kind_of_name():
    rows = check_api_docs.parse_contract(CONTRACT)
    assert rows == [
        ("python", "banditkit.posteriors", False),
        ("python", "banditkit.posteriors.hilofi", False),
        ("python", "banditkit.posteriors.Posterior.init", False),
        ("python", "banditkit.posteriors.ekf", False),
        ("python", "banditkit.policies", False),
        ("python", "banditkit.policies.thompson", False),
        ("python", "banditkit.policies.ucb", False),
        ("python", "banditkit.environments", False),
        ("env", "banditkit/Mushroom-v0", False),
        ("cli", "demo", False),
        ("cli", "data fetch", False),
        ("cli", "data list", False),
        ("python", "banditkit.sweep", True),
        ("python", "banditkit.bo.space", True),
        ("python", "banditkit.bo.space.Float", True),
    ]  # apply_fn, reset and step are the user's function and Gymnasium's methods, not banditkit names


def test_the_committed_name_list_reads_back():
    rows = check_api_docs.read_names()
    assert len(rows) > 60
    assert ("python", "banditkit.BayesOpt", False) in rows and ("cli", "data fetch", False) in rows


def _site(tmp_path: Path, documented: list[str]) -> Path:
    """A built site with ``documented`` in its objects.inv, the environments page and the CLI page."""
    (tmp_path / "api").mkdir()
    body = "".join(f"{name} py:function 1 api/x.html#$ -\n" for name in documented)
    (tmp_path / "objects.inv").write_bytes(
        b"# Sphinx inventory version 2\n# Project: t\n# Version: 0\n# The remainder of this file is compressed using "
        b"zlib.\n" + zlib.compress(body.encode()))
    (tmp_path / "api" / "environments.html").write_text("<td>banditkit/Mushroom-v0</td>")
    (tmp_path / "cli.html").write_text('<section id="cli-demo"><pre>usage</pre></section>'
                                       '<section id="cli-data"><pre>{fetch,list}</pre></section>')
    return tmp_path


def test_a_site_that_leaves_out_a_built_name_fails_and_a_planned_missing_one_is_listed(tmp_path):
    rows = [("python", "banditkit.experiments.compare", False), ("python", "banditkit.compare", False),
            ("python", "banditkit.policies.ucb", False), ("python", "banditkit.not_built_yet", True),
            ("python", "banditkit.misspelt", False), ("env", "banditkit/Mushroom-v0", False),
            ("env", "banditkit/Nowhere-v0", False), ("cli", "data fetch", False), ("cli", "data purge", False)]
    errors, pending = check_api_docs.check(_site(tmp_path, ["banditkit.experiments.compare"]), rows)
    # bk.compare is the same object as the documented banditkit.experiments.compare: covered
    assert errors == ["banditkit.policies.ucb: exists but the reference does not document it",
                      "banditkit.misspelt: not in banditkit",
                      "banditkit/Nowhere-v0: not on the environments page",
                      "banditkit data purge: no section on the command-line page"]
    assert pending == ["banditkit.not_built_yet: not in banditkit"]
