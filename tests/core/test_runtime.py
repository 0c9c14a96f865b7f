"""``banditkit.runtime`` holds the process-wide settings and ``import banditkit`` does not import it; the old module
paths (``banditkit.memory``, ``threads``, ``convs``, ``rng``) are the new modules, with one DeprecationWarning.

Checked in fresh interpreters: which modules an import loads, and a warning given once per process, depend on
what the process imported before."""

import json
import subprocess
import sys
import textwrap

import pytest

OLD_TO_NEW = {
    "banditkit.memory": "banditkit.runtime.memory",
    "banditkit.threads": "banditkit.runtime.threads",
    "banditkit.convs": "banditkit._xla.conv",
    "banditkit.rng": "banditkit._xla.flat_random",
}


def _python(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


_IMPORT_BANDITKIT = """
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import banditkit
    for name in banditkit.__all__:  # the subpackages and shortcuts load on first use: load them all
        if name not in ("runtime", "__version__"):
            getattr(banditkit, name)
ours = [str(w.message) for w in caught if "banditkit" in str(w.message) and "deprecated" in str(w.message)]
print(json.dumps(dict(modules=sorted(m for m in sys.modules if m.startswith("banditkit")), warned=ours)))
"""


def test_import_banditkit_loads_no_runtime_setting():
    res = _python(_IMPORT_BANDITKIT)
    loaded = set(res["modules"])
    assert "banditkit.experiments.runner" in loaded  # the probe sees the package's imports
    assert not any(m == "banditkit.runtime" or m.startswith("banditkit.runtime.") for m in loaded)
    assert not loaded & {"banditkit.memory", "banditkit.threads"}
    assert not [m for m in res["warned"] if "banditkit.memory" in m or "banditkit.threads" in m]


def test_import_banditkit_uses_no_deprecated_name():
    res = _python(_IMPORT_BANDITKIT)
    assert not set(res["modules"]) & set(OLD_TO_NEW)
    assert res["warned"] == []


@pytest.mark.parametrize("old", sorted(OLD_TO_NEW))
def test_an_old_path_is_the_new_module_and_warns_once_at_the_importer(old):
    new = OLD_TO_NEW[old]
    res = _python(
        f"""
        import importlib, json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import {old} as first
            import {old} as again
            import banditkit as bk
            by_attribute = getattr(bk, "{old.split('.')[-1]}")
        new = importlib.import_module("{new}")
        dep = [w for w in caught if issubclass(w.category, DeprecationWarning) and "{old}" in str(w.message)]
        print(json.dumps(dict(same=first is new and again is new and by_attribute is new,
                              messages=[str(w.message) for w in dep], files=[w.filename for w in dep])))
        """
    )
    assert res["same"]
    assert res["messages"] == [f"{old} is deprecated and will be removed: import {new} instead"]
    assert res["files"] == ["<string>"]  # attributed to the import statement, so Python shows it by default


def test_the_runtime_package_exposes_the_settings():
    import banditkit.runtime as rt
    from banditkit.runtime import memory, threads

    assert rt.keep_freed_memory is memory.keep_freed_memory
    assert rt.limit_blas_threads is threads.limit_blas_threads and rt.blas_threads is threads.blas_threads
