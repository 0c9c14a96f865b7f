"""banditkit.runtime.threads: the BLAS thread cap the CLI applies (checked in subprocesses: a process-wide setting)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from banditkit.runtime import threads

_PROBE = textwrap.dedent(
    """
    import json, sys
    import banditkit.runtime.threads as t

    before = t.limit_blas_threads(int(sys.argv[1]))
    import jax.numpy as jnp  # the first LAPACK call below is when jaxlib looks its kernels up
    jnp.linalg.cholesky(jnp.eye(4) * 2.0).block_until_ready()
    jnp.linalg.eigh(jnp.eye(4)).eigenvalues.block_until_ready()
    print(json.dumps(dict(before=before, after=t.blas_threads())))
    """
)


def _probe(n: int, env: dict | None = None) -> dict:
    full_env = {k: v for k, v in os.environ.items() if k != threads.ENV}
    full_env.update(env or {})
    out = subprocess.run([sys.executable, "-c", _PROBE, str(n)], capture_output=True, text=True, check=True,
                         env=full_env)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_blas_library_jax_uses_is_capped():
    res = _probe(1)
    assert res["before"], "no BLAS library was found to cap"
    # jaxlib's LAPACK kernels loaded nothing that escaped the cap: every BLAS library in the process after the
    # Cholesky / eigh calls is one limit_blas_threads capped, now at one thread
    assert set(res["after"]) == set(res["before"])
    assert set(res["after"].values()) == {1}


def test_environment_overrides_and_opts_out():
    res = _probe(2, {threads.ENV: "1"})  # the environment's count wins over the argument
    assert set(res["after"].values()) == {1}
    res = _probe(1, {threads.ENV: "system"})  # nothing capped, nothing changed
    assert res["before"] == {}
    assert res["after"] and all(v >= 1 for v in res["after"].values())


@pytest.mark.parametrize("value", ["two", "0", "-3"])
def test_bad_environment_value_says_what_to_set(monkeypatch, value):
    monkeypatch.setenv(threads.ENV, value)
    with pytest.raises(ValueError, match=f"{threads.ENV}=.*(positive integer|>= 1)"):
        threads.limit_blas_threads()


@pytest.mark.parametrize("n", [0, -1, 1.5, True, "1"])
def test_bad_argument_is_refused(n):
    with pytest.raises(ValueError, match="num_threads must be an int >= 1"):
        threads.limit_blas_threads(n)


def test_benchmark_option_refuses_bad_values_and_system_changes_nothing():
    from benchmarks.harness import options, provenance

    before = threads.blas_threads()
    options.apply_blas_threads("system")
    assert threads.blas_threads() == before
    for bad in ("0", "many", "-2"):
        with pytest.raises(SystemExit, match="--blas-threads must be an integer >= 1 or 'system'"):
            options.apply_blas_threads(bad)
    assert threads.blas_threads() == before
    assert provenance.blas_note().startswith("BLAS threads ")
    args = options.parser("x", steps=10, seeds=3).parse_args([])
    assert args.blas_threads == "1"  # the benchmarks cap BLAS by default, as the banditkit command does


def test_every_benchmark_suite_and_study_takes_the_option(capsys):
    """A timing written by a suite that ignored the cap would not be comparable with the other result files."""
    import importlib
    import inspect

    from benchmarks import catalog

    entries = catalog.SUITES + catalog.STUDIES
    assert len(entries) >= 20
    missing = []
    for e in entries:
        module = importlib.import_module(e.module)
        if getattr(module, "RENDER_ONLY", False):  # only tabulates other runs' CSVs: times nothing, needs no cap
            src = inspect.getsource(module)
            assert not any(call in src for call in ("run_agents(", "run_or_render(", "play_thompson(", "jax")), e.name
            continue
        with pytest.raises(SystemExit):
            module.main(["--help"])
        if "--blas-threads" not in capsys.readouterr().out:
            missing.append(e.name)
    assert not missing, f"suites / studies without --blas-threads: {missing}"
