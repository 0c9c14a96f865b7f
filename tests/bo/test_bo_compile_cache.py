"""``banditkit.bo.compile_cache`` (issue 71, item 2): BayesOpt turns JAX's persistent compilation cache on in a
per-user folder, respects a cache the user configured, and can be turned off.  Each case runs in a fresh process
(the setting is process-wide), without the test run's own ``JAX_COMPILATION_CACHE_DIR``."""

import json
import os
import subprocess
import sys

import pytest

from banditkit.bo import compile_cache

_PROBE = """
import json, os, sys
import jax
from banditkit.bo import compile_cache
first = compile_cache.enable()
if sys.argv[1] == "bayesopt":
    import banditkit as bk
    opt = bk.BayesOpt([(0.0, 1.0)] * 2, direction="minimize", n_initial=2, features=(8,), n_candidates=32,
                      surrogate_kwargs=dict(rank=2))
    for _ in range(3):
        x = opt.ask()
        opt.tell(x, float(sum(x)))
print(json.dumps(dict(enabled=first, again=compile_cache.enable(), dir=jax.config.jax_compilation_cache_dir,
                      min_s=jax.config.jax_persistent_cache_min_compile_time_secs,
                      default=compile_cache.default_dir())))
"""


def _probe(tmp_path, mode: str, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items()
            if k not in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                         "BANDITKIT_COMPILE_CACHE", "XDG_CACHE_HOME")}
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=300,
                         env={**base, "JAX_PLATFORMS": "cpu", "HOME": str(tmp_path / "home"), **env})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_default_folder_is_per_user_and_bayesopt_fills_it(tmp_path):
    """No cache configured: ``$XDG_CACHE_HOME/banditkit/jax``, every compilation kept (JAX's default keeps only
    those over 1 s); a BayesOpt run writes its programs there; ``enable`` decides once per process."""
    xdg = tmp_path / "xdg"
    r = _probe(tmp_path, "bayesopt", XDG_CACHE_HOME=str(xdg))
    assert r["enabled"] == r["again"] == r["dir"] == r["default"] == str(xdg / "banditkit" / "jax") and r["min_s"] == 0
    assert len(os.listdir(xdg / "banditkit" / "jax")) > 3  # the surrogate's and the acquisition's programs
    assert compile_cache.default_dir().endswith(os.path.join("banditkit", "jax"))


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """``compile_cache._enable`` in this process with JAX's cache settings and the environment as a fresh process
    has them (restored afterwards: the test run keeps its own cache)."""
    import jax

    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs", "jax_enable_compilation_cache")
    saved = {n: getattr(jax.config, n) for n in names}
    for k in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "BANDITKIT_COMPILE_CACHE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def run(env: dict | None = None, config: dict | None = None):
        jax.config.update("jax_compilation_cache_dir", None)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        jax.config.update("jax_enable_compilation_cache", True)
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        for k, v in (config or {}).items():
            jax.config.update(k, v)
        try:
            return compile_cache._enable(), jax.config.jax_compilation_cache_dir, \
                jax.config.jax_persistent_cache_min_compile_time_secs
        finally:
            for k in (env or {}):
                monkeypatch.delenv(k)

    yield run
    for n, v in saved.items():
        jax.config.update(n, v)


def test_a_configured_cache_is_respected_and_the_opt_out_changes_nothing(fresh, tmp_path):
    """A folder set by ``JAX_COMPILATION_CACHE_DIR`` or ``jax.config`` is kept (and the minimum compile time the
    user chose); ``BANDITKIT_COMPILE_CACHE=0`` / ``off`` and JAX's cache disabled change nothing;
    ``BANDITKIT_COMPILE_CACHE=PATH`` picks the folder."""
    mine = str(tmp_path / "mine")
    assert fresh() == (str(tmp_path / "xdg" / "banditkit" / "jax"), str(tmp_path / "xdg" / "banditkit" / "jax"), 0)
    assert fresh(config=dict(jax_compilation_cache_dir=mine)) == (mine, mine, 1.0)  # JAX's own default left alone
    assert fresh(env=dict(JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="2"))[2] == 1.0  # the user's choice: not ours
    for off in ("0", "off"):
        assert fresh(env=dict(BANDITKIT_COMPILE_CACHE=off)) == (None, None, 1.0)
    assert fresh(config=dict(jax_enable_compilation_cache=False)) == (None, None, 1.0)
    there = str(tmp_path / "there")
    assert fresh(env=dict(BANDITKIT_COMPILE_CACHE=there))[:2] == (there, there) and os.path.isdir(there)
    assert not (tmp_path / "home").exists()  # none of these touched the user's home
