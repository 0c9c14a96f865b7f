"""Every public name of ``banditkit`` resolves at runtime (loaded on first use) and is spelled out for type checkers:
``bk.compare``, ``bk.BayesOpt`` … are imported under ``TYPE_CHECKING`` in ``banditkit/__init__.py``, so a checker
sees their real types instead of the ``Any`` of a module ``__getattr__``."""

import ast
import pathlib

import banditkit

INIT = pathlib.Path(banditkit.__file__)


def _type_checking_names() -> set[str]:
    tree = ast.parse(INIT.read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    names |= {alias.asname or alias.name for alias in stmt.names}
    return names


def test_every_public_name_is_typed_and_resolves():
    typed = _type_checking_names()
    public = set(banditkit.__all__) - {"__version__"}
    assert public <= typed, f"in __all__ but not imported under TYPE_CHECKING: {sorted(public - typed)}"
    for name in sorted(public):
        assert getattr(banditkit, name) is not None
    assert banditkit.compare is banditkit.experiments.compare and banditkit.BayesOpt is banditkit.bo.BayesOpt
    assert banditkit.plot_regret is banditkit.plotting.plot_regret and banditkit.sweep is banditkit.experiments.sweep
