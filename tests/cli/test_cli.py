"""The ``banditkit`` command line at tiny sizes: every command runs, writes its files, and bad input is one line."""

import os
import subprocess
import sys

import gymnasium
import jax
import pandas as pd
import pytest

from banditkit.agents import make_agent
from banditkit.cli import DEMO_AGENTS, build_parser, main
from banditkit.runtime import threads

COMMANDS = ["demo", "run", "compare", "bo", "data"]


@pytest.fixture(autouse=True)
def _blas_cap_recorded(monkeypatch):
    """``main`` caps BLAS threads for the whole process; here it records the call instead, so that the rest of
    the suite keeps the library's defaults."""
    calls = []

    def record(num_threads=1):
        calls.append(num_threads)
        threads._requested(num_threads)  # the environment is still checked (bad values are errors)
        return {}

    monkeypatch.setattr(threads, "limit_blas_threads", record)
    return calls


def test_every_command_caps_blas_threads_first(_blas_cap_recorded, capsys, monkeypatch):
    assert main(["data", "list"]) == 0
    assert _blas_cap_recorded == [1]
    monkeypatch.setenv(threads.ENV, "lots")
    _one_line_error(capsys, ["data", "list"], threads.ENV, "positive integer")


def _one_line_error(capsys, argv, *words):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, err
    return err


@pytest.mark.parametrize("cmd", [None, *COMMANDS])
def test_help_for_every_command(cmd, capsys):
    argv = ["--help"] if cmd is None else [cmd, "--help"]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage: banditkit" in out
    if cmd is None:
        assert all(c in out for c in COMMANDS)


def test_bad_arguments_print_one_line(capsys):
    _one_line_error(capsys, ["frobnicate"], "invalid choice", "frobnicate")
    _one_line_error(capsys, ["run", "--env", "nope", "--agent", "hilofi"], "unknown environment", "mushroom")
    _one_line_error(capsys, ["run", "--env", "mushroom"], "--agent")
    _one_line_error(capsys, ["compare", "--env", "mushroom", "--agents", "linear", "--steps", "0"], "positive")
    _one_line_error(capsys, ["bo", "--function", "nope"], "unknown BO function")
    _one_line_error(capsys, ["bo", "--acquisition", "magic"], "invalid choice")
    _one_line_error(capsys, ["run", "--env", "mushroom", "--agent", "nope", "--steps", "5", "--quiet"], "nope")


def test_console_script_exit_status_and_one_line():
    """The real entry point (``python -m banditkit``): non-zero status, one stderr line, no traceback."""
    r = subprocess.run(
        [sys.executable, "-m", "banditkit", "run", "--env", "nope", "--agent", "hilofi"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "unknown environment" in r.stderr


def test_bo_command(tmp_path, capsys):
    out = tmp_path / "bo"
    argv = ["bo", "--evals", "7", "--seeds", "2", "--features", "8", "--rank", "2", "--candidates", "32"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    df = pd.read_csv(out / "bo.csv")
    assert {"agent", "seed", "step", "y", "best_y", "simple_regret"} <= set(df.columns)
    assert len(df) == 14 and sorted(df.seed.unique()) == [0, 1]
    assert (df.simple_regret >= -1e-9).all()
    assert (out / "bo_summary.md").read_text().startswith("| agent")
    assert (out / "bo_simple_regret.png").stat().st_size > 0
    assert "hilofi-thompson" in capsys.readouterr().out  # the summary table is printed
    out2 = tmp_path / "bo_lbfgs"
    argv = ["bo", "--evals", "7", "--seeds", "1", "--surrogate", "gp", "--acquisition", "ei", "--candidates", "32"]
    assert main([*argv, "--maximizer", "lbfgs", "--out", str(out2), "--quiet"]) == 0
    assert len(pd.read_csv(out2 / "bo.csv")) == 7
    out3 = tmp_path / "bo_tr"
    assert main([*argv, "--trust-region", "--out", str(out3), "--quiet"]) == 0
    assert set(pd.read_csv(out3 / "bo.csv").agent) == {"gp-ei-tr"}


def test_bo_set_reaches_the_surrogate(tmp_path, monkeypatch, capsys):
    import json

    import banditkit.bo as bo

    seen = []
    real = bo.optimize

    def recording(*a, **kw):
        seen.append(kw["surrogate_kwargs"])
        return real(*a, **kw)

    monkeypatch.setattr(bo, "optimize", recording)
    out = tmp_path / "bo"
    argv = ["bo", "--evals", "5", "--seeds", "1", "--features", "8", "--candidates", "16", "--out", str(out), "--quiet"]
    assert main([*argv, "--set", "rank=2", "--set", "dynamics_mode=gain", "--set", "dynamics_cov=1e-3"]) == 0
    assert seen == [{"rank": 2, "dynamics_mode": "gain", "dynamics_cov": 1e-3}]
    assert json.loads((out / "bo_run.json").read_text())["set"] == seen[0]
    assert len(pd.read_csv(out / "bo.csv")) == 5
    _one_line_error(capsys, [*argv, "--set", "frobnicate=1"], "--set", "frobnicate")
    _one_line_error(capsys, [*argv, "--rank", "3", "--set", "rank=2"], "not both")
    assert len(pd.read_csv(out / "bo.csv")) == 5  # the bad runs touched nothing
    _one_line_error(capsys, [*argv, "--resume"], "--set", "(now {})")


def test_run_and_compare_commands(tmp_path, capsys):
    out = str(tmp_path / "r")
    assert main(["run", "--env", "mushroom", "--agent", "hilofi", "--steps", "40", "--out", out, "--quiet"]) == 0
    df = pd.read_csv(os.path.join(out, "run.csv"))
    assert set(df.agent) == {"hilofi-thompson"} and len(df) == 40
    assert {"reward", "regret", "cumulative_regret"} <= set(df.columns)
    assert os.path.getsize(os.path.join(out, "run_regret.png")) > 0
    argv = ["compare", "--env", "mushroom", "--agents", "hilofi,hilofi-greedy", "--steps", "30", "--seeds", "2"]
    assert main([*argv, "--out", out, "--quiet"]) == 0
    df = pd.read_csv(os.path.join(out, "compare.csv"))
    assert set(df.agent) == {"hilofi-thompson", "hilofi-greedy"} and len(df) == 2 * 2 * 30
    md = open(os.path.join(out, "compare_summary.md")).read()
    assert "hilofi-thompson" in md and "hilofi-greedy" in md
    assert "hilofi-greedy" in capsys.readouterr().out


@pytest.fixture
def built_agents(monkeypatch) -> dict:
    """``{label: agent}`` of each agent the CLI hands to ``runner.run`` (which then runs it as usual)."""
    from banditkit.experiments import runner

    built = {}
    real_run = runner.run

    def recording_run(env, agent, *a, name=None, **kw):
        built[name] = agent
        return real_run(env, agent, *a, name=name, **kw)

    monkeypatch.setattr(runner, "run", recording_run)
    return built


def test_set_passes_hyper_parameters_to_the_agents_that_take_them(tmp_path, built_agents, capsys):
    """``--set KEY=VALUE`` reaches the posterior of every agent whose backend takes the key, is saved with the run
    (a resume must repeat it), and bad keys or values are one-line errors before anything runs."""
    import json

    built = built_agents
    out = str(tmp_path / "c")
    argv = ["compare", "--env", "mushroom", "--agents", "hilofi,linear", "--steps", "20", "--seeds", "1",
            "--set", "rank=3", "--set", "dynamics_cov=0.01", "--set", "dynamics_mode=gain", "--out", out, "--quiet"]
    assert main(argv) == 0
    hyper = built["hilofi-thompson"].posterior.hyper
    assert (hyper["rank"], hyper["dynamics_cov_hidden"], hyper["dynamics_mode"]) == (3, 0.01, "gain")
    lin = built["linear-thompson"].posterior.hyper  # linear takes dynamics_cov only
    assert lin["dynamics_cov"] == 0.01 and "rank" not in lin and "dynamics_mode" not in lin
    with open(os.path.join(out, "compare_run.json")) as fh:
        assert json.load(fh)["set"] == {"rank": 3, "dynamics_cov": 0.01, "dynamics_mode": "gain"}
    base = ["run", "--env", "mushroom", "--agent", "hilofi", "--steps", "5", "--quiet", "--out", str(tmp_path / "e")]
    _one_line_error(capsys, [*base, "--set", "rank"], "expected KEY=VALUE")
    _one_line_error(capsys, [*base, "--set", "rank={1, 2}"], "is not a number, string")
    _one_line_error(capsys, [*base, "--set", "frobnicate=1"], "no agent here takes it", "rank")
    _one_line_error(capsys, [*base, "--set", "dynamics_mode=pending"], "--set for hilofi-thompson", "'carry'")
    resume = ["compare", "--env", "mushroom", "--agents", "hilofi,linear", "--steps", "20", "--seeds", "1",
              "--out", out, "--resume", "--quiet"]
    _one_line_error(capsys, resume, "--set", "(now {})")


def test_demo_command_tiny(tmp_path):
    """The demo pipeline end to end on one of its agents (compiling all five is too slow for CI)."""
    out = tmp_path / "demo"
    assert main(["demo", "--agents", "HiLoFi-TS", "--steps", "20", "--seeds", "1", "--out", str(out), "--quiet"]) == 0
    df = pd.read_csv(out / "demo.csv")
    assert set(df.agent) == {"HiLoFi-TS"} and len(df) == 20
    assert (out / "demo_regret.png").exists() and (out / "demo_summary.md").exists()


@pytest.mark.parametrize("label", list(DEMO_AGENTS))
def test_demo_agents_build_on_mushroom(label):
    """Every default demo agent resolves and initialises on the shipped Mushroom data (no run: compile is slow)."""
    env = gymnasium.make("banditkit/Mushroom-v0")
    obs, _ = env.reset(seed=0)
    agent = make_agent(DEMO_AGENTS[label], env)
    state = agent.init(jax.random.PRNGKey(0), obs)
    assert jax.tree_util.tree_leaves(state)


def test_data_list_and_bad_fetch(capsys):
    assert main(["data", "list"]) == 0
    assert "mushroom" in capsys.readouterr().out
    assert main(["data", "fetch", "no_such_set"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no_such_set" in err


def test_parser_defaults():
    args = build_parser().parse_args(["demo"])
    assert args.env == "mushroom" and args.out == os.path.join("results", "demo")


def test_obs_noise_and_adaptive_noise_reach_the_agents(tmp_path, built_agents, capsys):
    """``--obs-noise`` sets every agent's likelihood variance; ``--adaptive-noise`` wraps the agents whose backend
    supports it (not neural-linear / linear, which learn theirs); both are saved with the run and checked on
    --resume."""
    import json

    built = built_agents
    out = str(tmp_path / "c")
    argv = ["compare", "--env", "mushroom", "--agents", "lofi,linear", "--steps", "20", "--seeds", "1"]
    assert main([*argv, "--obs-noise", "0.02", "--adaptive-noise", "--out", out]) == 0
    lofi, lin = built["lofi-thompson-adaptive_noise"], built["linear-thompson"]  # the rows say which learn it
    assert lofi.posterior_name == "adaptive_noise(lofi)" and lin.posterior_name == "linear"
    assert float(lofi.likelihood.obs_noise) == float(lin.likelihood.obs_noise) == 0.02
    assert "--obs-noise 0.02; the agents ending in -adaptive_noise learn the observation" in capsys.readouterr().out
    summary = open(os.path.join(out, "compare_summary.md")).read()
    assert "| lofi-thompson-adaptive_noise |" in summary and "| linear-thompson |" in summary
    with open(os.path.join(out, "compare_run.json")) as fh:
        saved = json.load(fh)
    assert (saved["obs_noise"], saved["adaptive_noise"]) == (0.02, True)
    assert len(pd.read_csv(os.path.join(out, "compare.csv"))) == 40
    assert main([*argv, "--obs-noise", "0.02", "--adaptive-noise", "--out", out, "--resume", "--quiet"]) == 0
    _one_line_error(capsys, [*argv, "--out", out, "--resume", "--quiet"], "--obs-noise 0.02 (now None)",
                    "--adaptive-noise True (now False)")
    base = ["run", "--env", "mushroom", "--agent", "linear", "--steps", "5", "--quiet", "--out", str(tmp_path / "e")]
    for bad in ["0", "-1", "nan", "inf", "small"]:
        _one_line_error(capsys, [*base, "--obs-noise", bad], "variance > 0")
    _one_line_error(capsys, [*base, "--adaptive-noise"], "--adaptive-noise", "hilofi", "learn theirs")


def test_fixed_and_learned_noise_side_by_side(tmp_path, built_agents, capsys):
    """A name ending in ``-adaptive_noise`` learns its variance while the same name without it keeps it fixed, in one
    comparison (``--policy`` goes before the suffix); naming both with ``--adaptive-noise``, or the suffix on a
    backend that cannot take it, is a one-line error before anything is written."""
    from banditkit.cli.bandit import agent_spec

    for name, policy, spec in [("hilofi", "ucb", "hilofi-ucb"),
                               ("hilofi-adaptive_noise", "ucb", "hilofi-ucb-adaptive_noise"),
                               ("lofi-ts-adaptive_noise", "ucb", "lofi-ts-adaptive_noise"),
                               ("diag-ekf", "ucb", "diag-ekf-ucb"), ("eps_greedy", "ucb", "eps_greedy"),
                               ("lofi-ucb", "thompson", "lofi-ucb")]:
        assert agent_spec(name, policy).label == spec, (name, policy)
    out = tmp_path / "c"
    argv = ["compare", "--env", "mushroom", "--agents", "lofi,lofi-adaptive_noise", "--steps", "20", "--seeds", "1",
            "--quiet"]
    assert main([*argv, "--out", str(out)]) == 0
    assert built_agents["lofi-thompson"].posterior_name == "lofi"  # a plain spec: the usual agent
    assert built_agents["lofi-thompson-adaptive_noise"].posterior_name == "adaptive_noise(lofi)"
    assert set(pd.read_csv(out / "compare.csv").agent) == {"lofi-thompson", "lofi-thompson-adaptive_noise"}
    _one_line_error(capsys, [*argv, "--adaptive-noise", "--out", str(tmp_path / "d")], "would run twice",
                    "lofi-thompson-adaptive_noise")
    _one_line_error(capsys, [*argv[:4], "linear-adaptive_noise", *argv[5:], "--out", str(tmp_path / "e")],
                    "linear-thompson-adaptive_noise:", "not a Gaussian filter")
    assert not (tmp_path / "e" / "compare_run.json").exists()


def test_bo_obs_noise_and_adaptive_noise(tmp_path, monkeypatch, capsys):
    import json

    import banditkit.bo as bo

    seen = []
    real = bo.optimize

    def recording(*a, **kw):
        seen.append(kw)
        return real(*a, **kw)

    monkeypatch.setattr(bo, "optimize", recording)
    out = tmp_path / "bo"
    argv = ["bo", "--evals", "5", "--seeds", "1", "--features", "8", "--rank", "2", "--candidates", "16", "--quiet"]
    assert main([*argv, "--obs-noise", "0.05", "--adaptive-noise", "--out", str(out)]) == 0
    assert seen[0]["obs_noise"] == 0.05 and seen[0]["surrogate"] == "hilofi-adaptive_noise"
    assert set(pd.read_csv(out / "bo.csv").agent) == {"hilofi-thompson-adaptive_noise"}
    saved = json.loads((out / "bo_run.json").read_text())
    assert (saved["obs_noise"], saved["adaptive_noise"]) == (0.05, True)
    _one_line_error(capsys, [*argv, "--out", str(out), "--resume"], "--obs-noise 0.05 (now None)")
    _one_line_error(capsys, [*argv, "--surrogate", "gp", "--adaptive-noise", "--out", str(tmp_path / "g")],
                    "--adaptive-noise", "marginal likelihood")
    # the suffix on --surrogate is the same run as --adaptive-noise: it resumes it, and the rows read alike
    assert main([*argv, "--obs-noise", "0.05", "--seeds", "2", "--surrogate", "hilofi-adaptive-noise",
                 "--out", str(out), "--resume"]) == 0
    assert seen[-1]["surrogate"] == "hilofi-adaptive_noise" and len(seen) == 2  # only seed 1 ran
    assert set(pd.read_csv(out / "bo.csv").agent) == {"hilofi-thompson-adaptive_noise"}
    _one_line_error(capsys, [*argv, "--surrogate", "neural_linear-adaptive_noise", "--out", str(tmp_path / "n")],
                    "--surrogate neural_linear-adaptive_noise", "not a Gaussian filter")
    _one_line_error(capsys, [*argv, "--surrogate", "gp-adaptive_noise", "--out", str(tmp_path / "g")],
                    "--surrogate gp-adaptive_noise", "marginal likelihood")
    assert not (tmp_path / "n").exists() and not (tmp_path / "g").exists()  # refused before any file was written


def test_bo_space_run_replaces_the_one_in_its_folder(tmp_path, monkeypatch):
    """``bo --space`` into a folder that holds an earlier run is refused without ``--overwrite`` (nothing touched);
    with it, it starts afresh (its rows are not appended to the old ones) and saves its options in bo_run.json, so
    that a ``--resume`` of a test function there is refused."""
    (tmp_path / "space.json").write_text('{"x": {"type": "float", "low": 0, "high": 1}}')
    (tmp_path / "sq.py").write_text("def f(p):\n    return p['x'] ** 2\n")
    monkeypatch.chdir(tmp_path)
    argv = ["bo", "--space", "space.json", "--objective", "sq:f", "--evals", "4", "--seeds", "1", "--features", "8",
            "--rank", "2", "--candidates", "16", "--out", "o", "--quiet"]
    assert main(argv) == 0
    before = (tmp_path / "o" / "bo.csv").read_text()
    assert main(argv) == 2 and (tmp_path / "o" / "bo.csv").read_text() == before
    for _ in range(2):
        assert main([*argv, "--overwrite"]) == 0
        df = pd.read_csv(tmp_path / "o" / "bo.csv")
        assert len(df) == 4 and list(df.step) == [1, 2, 3, 4]
    import json

    assert json.loads((tmp_path / "o" / "bo_run.json").read_text())["objective"] == "sq:f"
    assert main(["bo", "--evals", "4", "--seeds", "1", "--out", "o", "--resume", "--quiet"]) == 2
