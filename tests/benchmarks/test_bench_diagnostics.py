"""benchmarks' agents, harness and studies: the full-feedback warm-up diagnostic agent picks its seed's labels, a
time-capped agent keeps the runner's non-finite flag, and each study runs at a tiny size."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pandas as pd
import pytest
from toys import ToyBandit

from banditkit.agents import BanditAgent
from banditkit.models import MLP
from benchmarks import agents as A
from benchmarks.harness import merge, options, provenance, run
from benchmarks.studies.subspace_warmup import warmup_rounds

TAU, STEPS = 6, 12


def test_full_feedback_warmup_uses_the_matching_seeds_targets():
    env = ToyBandit()
    factory = A.full_feedback_warmup("subspace_ekf-thompson", dict(init_cov=0.5, dim=3, sgd=dict(n_iters=20, skip=2)),
                                     [0, 1], STEPS, model=MLP(features=(4,), out=3), warmup_steps=TAU)
    agent = factory(env)
    assert isinstance(agent, A.FullFeedbackWarmup)
    key = jax.random.PRNGKey(3)
    fb1 = env.functional(1, STEPS)
    state, _ = warmup_rounds(agent, fb1, 1)  # the buffer the runner holds at round τ
    got = agent.warmup(key, state)
    want = BanditAgent.warmup(agent, key, state, fb1.rewards[:TAU])
    np.testing.assert_allclose(np.asarray(got.posterior.offset), np.asarray(want.posterior.offset), atol=1e-6)
    bandit = BanditAgent.warmup(agent, key, state)
    assert not np.allclose(np.asarray(got.posterior.offset), np.asarray(bandit.posterior.offset), atol=1e-4)
    # contexts of neither seed: NaN targets, so the (jitted) runner flags the state instead of fitting wrong labels;
    # an eager call says the data is at fault
    alien = state._replace(warmup=state.warmup._replace(contexts=state.warmup.contexts + 1.0))
    assert np.all(np.isnan(np.asarray(jax.jit(agent.warmup)(key, alien).posterior.offset)))
    with pytest.raises(FloatingPointError, match="contain NaN or inf"):
        agent.warmup(key, alien)


def test_seed002_diagnostics_stay_out_of_the_default_agent_set():
    agents = A.seed002_agents(num_actions=3, warmup_per_arm=2, full_feedback=([0], STEPS))
    assert {"ekf_sub_svd_fullwarm", "ekf_sub_svd_fullwarm_r1e-3", "ekf_sub_svd_r1e-3"} <= set(agents)
    default = options.select(agents, "")
    assert "ekf_sub_svd" in default and not any("fullwarm" in n or "r1e-3" in n for n in default)
    assert list(options.select(agents, "ekf_sub_svd_fullwarm")) == ["ekf_sub_svd_fullwarm"]
    # the clipped warm-up variants are opt-in too, and differ from the protocol agent only in the clip
    assert not any("clip" in n for n in default)
    env = ToyBandit()
    clipped, plain = agents["ekf_sub_svd_clip0.1"](env), agents["ekf_sub_svd"](env)
    sgd = clipped.posterior.hyper["sgd"]  # subspace_ekf's own warm-up fit options
    assert sgd == dict(plain.posterior.hyper["sgd"], clip_norm=0.1)
    assert dict(clipped.posterior.hyper, sgd=None) == dict(plain.posterior.hyper, sgd=None)
    assert agents["ekf_sub_svd_diag_clip0.1"](env).posterior.hyper["sgd"]["clip_norm"] == 0.1


SEED003_DIAGNOSTICS = ("_r1e-2", "_r1e-4", "_bern", "_sigm", "_pred", "_coord", "_auth")


def test_seed003_diagnostics_stay_out_of_the_default_agent_set():
    agents = A.seed003_agents(rank=2, rank_last=3, model=MLP(features=(4,), out=3))
    assert {"lrkf_ts_auth", "lrkf_ts_auth_q0", "lrkf_ts_coord_r1e-4", "lolofi_ts_auth", "lrkf_ts_pred"} <= set(agents)
    default = options.select(agents, "")
    assert {"hilofi_ts", "lolofi_ts", "lrkf_ts", "lofi_ts", "replay_sgd_eps"} <= set(default)
    assert not any(tag in n for n in default for tag in SEED003_DIAGNOSTICS)
    env = ToyBandit()
    assert agents["lrkf_ts_r1e-4"](env).likelihood.obs_noise == 1e-4
    assert agents["lrkf_ts_pred"](env).policy.hyper["variant"] == "predictive"
    assert agents["lrkf_ts"](env).policy.hyper["variant"] == "parameter"
    lik = agents["lrkf_ts_auth"](env).likelihood
    f = jnp.asarray([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(lik.mean(f), jax.nn.sigmoid(f), rtol=1e-6)
    np.testing.assert_allclose(lik.cov(f), 1e-4 * np.eye(3), rtol=1e-6)  # fixed, not σ(f)(1 − σ(f))
    np.testing.assert_allclose(agents["lrkf_ts_auth_v1e-2"](env).likelihood.cov(f), 1e-2 * np.eye(3), rtol=1e-6)
    assert agents["lrkf_ts_auth_d10"](env).posterior.hyper["rank"] == 10
    for base in ("hilofi_ts", "lrkf_ts", "lolofi_ts", "lofi_ts"):  # the observation-variance sweep, diag_obsnoise.py
        assert agents[base](env).likelihood.obs_noise == 0.1
        for tag, r in (("_r1e-2", 1e-2), ("_r1e-4", 1e-4)):
            agent = agents[base + tag](env)
            assert agent.likelihood.obs_noise == r
            assert agent.posterior.hyper == agents[base](env).posterior.hyper  # only the variance differs


def test_showdown_and_movielens_offer_the_low_rank_filters_only_when_named():
    import gymnasium as gym

    for agents_for, env_id in ((A.showdown_agents, "banditkit/Shuttle-v0"),
                               (A.movielens_agents, "banditkit/MovieLens-v0")):
        agents = agents_for(gym.make(env_id, max_steps=10))
        default = options.select(agents, "")
        assert "hilofi_ts" in default and "lrkf_ts" not in default and "lolofi_ts" not in default
        assert not any("_r1e-" in n for n in default if n.startswith(("hilofi", "lrkf", "lolofi")))
        named = options.select(agents, "lrkf_ts,lolofi_ts_r1e-2,hilofi_ts_r1e-4")
        assert list(named) == ["lrkf_ts", "lolofi_ts_r1e-2", "hilofi_ts_r1e-4"]


def test_showdown_overview_of_a_tagged_run_keeps_the_protocol_notes_out(tmp_path):
    from benchmarks.suites import showdown

    rows = [dict(agent="lrkf_ts", seed=s, cum_reward=100.0 + s, mean_reward=0.5, late_reward=0.5, final_regret=1.0,
                 steps=200, compile_s=1.0, run_s=2.0, per_step_s=0.01, wall_s=3.0, truncated=False,
                 nonfinite_by=None) for s in range(3)]
    pd.DataFrame(rows).to_csv(tmp_path / "diag_x_adult_seeds.csv", index=False)
    showdown.write_overview(str(tmp_path), "diag_x")
    md = (tmp_path / "diag_x.md").read_text()
    assert "| Adult | lrkf_ts | 3 | 200 | 101.0 ± 0.6 |" in md
    assert "`--tag diag_x`" in md and "neural_linear rows" not in md and not (tmp_path / "showdown.md").exists()


def test_diag_obsnoise_tabulates_each_variance_and_marks_the_best(tmp_path):
    from benchmarks.studies import obsnoise as diag_obsnoise

    rows = [dict(agent=a, seed=s, mean_reward=m + 0.01 * s, steps=100, nonfinite_by=None)
            for a, m in (("lrkf_ts", 0.3), ("lrkf_ts_r1e-2", 0.5), ("lrkf_ts_r1e-4", 0.4), ("lrkf_ts_vb", 0.45),
                         ("hilofi_ts", 0.7))
            for s in range(3)]
    pd.DataFrame(rows).to_csv(tmp_path / "diag_obsnoise_showdown_shuttle_seeds.csv", index=False)
    diag_obsnoise.main(["--results", str(tmp_path)])
    df = pd.read_csv(tmp_path / "diag_obsnoise.csv")
    assert len(df) == 5 and set(df["env"]) == {"Shuttle"}
    lrkf = df[df["backend"] == "lrkf_ts"].set_index("obs_noise")["mean_reward"]
    np.testing.assert_allclose(lrkf["0.01"], 0.51)  # mean over seeds 0.50, 0.51, 0.52
    np.testing.assert_allclose(lrkf["learned"], 0.46)
    md = (tmp_path / "diag_obsnoise.md").read_text()
    # the gains over 0.1 are paired by seed: every seed gains 0.2 (best) and 0.15 (learned) exactly, so s.e. 0
    assert ("| Shuttle | lrkf_ts | 3 × 100 | 0.3100 ± 0.0058 | **0.5100 ± 0.0058** | 0.4100 ± 0.0058 | "
            "0.4600 ± 0.0058 | 1e-2 | +0.2000 ± 0.0000 | +0.1500 ± 0.0000 |") in md
    assert "| Shuttle | hilofi_ts | 3 × 100 | **0.7100 ± 0.0058** | – | – | – | 0.1 | – | – |" in md
    with open(tmp_path / "diag_obsnoise.md", "a") as fh:  # a hand-written note survives a re-render
        fh.write("\n**Run note (by hand):** kept.\n")
    diag_obsnoise.main(["--results", str(tmp_path)])
    assert (tmp_path / "diag_obsnoise.md").read_text().count("**Run note (by hand):** kept.") == 1


def test_coordinate_init_puts_the_prior_on_the_first_coordinates_and_q_moves_the_rest():
    """The authors' initial factor ``c·[I_d | 0]``; with ``q = 0`` one update moves the mean on those ``d``
    coordinates only (``Kᵀ = S⁻¹HCᵀC``), with ``q > 0`` also outside them (the ``q Hᵀ S⁻¹ ε`` term)."""
    agents = A.seed003_agents(rank=2, rank_last=3, model=MLP(features=(4,), out=3))
    env = ToyBandit()
    ctx = np.ones((env.dim,), np.float32)
    x, y = (jnp.asarray(ctx), jax.nn.one_hot(1, 3)), jnp.asarray([1.0])
    moved = {}
    for name in ("lrkf_ts_auth", "lrkf_ts_auth_q0"):
        agent = agents[name](env)
        s0 = agent.init(jax.random.PRNGKey(0), ctx).posterior
        d, p = s0.cov.basis.shape
        np.testing.assert_array_equal(np.asarray(s0.cov.dense()), np.eye(d, p))
        np.testing.assert_array_equal(np.asarray(s0.gram), np.ones(d))
        post = agent.posterior
        s1 = jax.jit(lambda s, x, y, post=post: post.update(post.predict(s), x, y))(s0, x, y)
        moved[name] = np.abs(np.asarray(s1.mean - s0.mean)) > 0
    assert moved["lrkf_ts_auth_q0"][:2].any() and not moved["lrkf_ts_auth_q0"][2:].any()
    assert moved["lrkf_ts_auth"][2:].sum() > 10
    lolofi = agents["lolofi_ts_auth"](env).init(jax.random.PRNGKey(0), ctx).posterior  # loading 0.1: variance 0.01
    for c, g in ((lolofi.cov_hidden, lolofi.gram_hidden), (lolofi.cov_last, lolofi.gram_last)):
        np.testing.assert_allclose(np.asarray(c.dense()), 0.1 * np.eye(*c.basis.shape), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(g), 0.01 * np.ones(c.basis.shape[0]), rtol=1e-6)


def test_time_capped_agent_keeps_the_nonfinite_flag():
    def diverging(env):
        return BanditAgent(MLP(features=(8,), out=3), "replay_sgd", "greedy",
                           posterior_kwargs=dict(optimizer=optax.sgd(1e8), buffer_size=4, n_inner=5))

    res = run.run_agents(ToyBandit(), {"diverges": diverging}, 40, [0, 1], chunk=10, max_agent_s=0.0,
                            log=lambda s: None)
    t = res.timing["diverges"]
    assert t["truncated"] and t["steps"] < 40
    assert set(t["nonfinite"]) == {0, 1}


def test_a_run_stopped_after_one_chunk_does_not_claim_a_compile_time():
    """Stopped in its first chunk (a short --check), compilation cannot be told from running: compile_s is NaN and
    the log says so, instead of 0.0 s with the compilation inside run_s; after two chunks both are estimated."""
    def linear(env):
        return BanditAgent(MLP(features=(4,), out=3), "ekf", "thompson")

    lines: list[str] = []
    one = run.run_agents(ToyBandit(), {"a": linear}, 40, [0, 1], chunk=10, stop_after=5, log=lines.append)
    t = one.timing["a"]
    assert t["truncated"] and t["steps"] == 10 and np.isnan(t["compile_s"]) and t["run_s"] > 0
    assert "compile + run" in lines[-1] and "not separable" in lines[-1]
    two = run.run_agents(ToyBandit(), {"a": linear}, 40, [0, 1], chunk=10, stop_after=15, log=lines.append)
    assert two.timing["a"]["steps"] == 20 and np.isfinite(two.timing["a"]["compile_s"])
    assert "compile " in lines[-1] and "not separable" not in lines[-1]


def test_bench_arm_blocks_writes_the_paired_table(tmp_path):
    from benchmarks.suites import arm_blocks

    arm_blocks.main(["--envs", "mushroom", "--agents", "linear", "--steps", "4", "--seeds", "2", "--reps", "1",
                           "--out", str(tmp_path)])
    rows = (tmp_path / "arm_blocks.csv").read_text().splitlines()
    assert rows[0].startswith("env,agent,layout") and len(rows) == 3  # one dense and one blocks run
    table = (tmp_path / "arm_blocks.md").read_text()
    assert "| mushroom | linear | 4 × 2 |" in table
    with pytest.raises(SystemExit):
        arm_blocks.main(["--envs", "nowhere", "--out", str(tmp_path)])


def test_diag_linear_noise_reports_one_row_per_arm(tmp_path):
    from benchmarks.studies import linear_noise

    linear_noise.main(["--env", "mushroom", "--steps", "6", "--seeds", "1", "--out", str(tmp_path)])
    import pandas as pd

    df = pd.read_csv(tmp_path / "diag_linear_noise_mushroom.csv")
    assert sorted(df.agent.unique()) == ["linear", "linear_per_arm"] and len(df) == 4  # 2 agents × 2 arms
    shared = df[df.agent == "linear"]
    assert shared.e_sigma2.nunique() == 1  # one σ² for every arm
    assert (df.pulls.groupby(df.agent).sum() == 6).all()


def test_diag_nl_guard_counts_discarded_retrainings(tmp_path):
    from benchmarks.studies import nl_guard

    nl_guard.main(["--envs", "mushroom", "--agents", "neural_linear_lim", "--steps", "200", "--seeds", "2",
                        "--ratios", "2,inf", "--out", str(tmp_path)])
    import pandas as pd

    df = pd.read_csv(tmp_path / "diag_nl_guard.csv")
    assert len(df) == 4 and set(df.rule) == {"ratio 2 (default)", "non-finite only"}  # 2 rules × 2 seeds
    assert (df.retrainings == 2).all() and (df.rejected >= 0).all() and (df.rejected <= 2).all() and df.finite.all()
    assert "| mushroom | neural_linear_lim | ratio 2 (default) | 2 |" in (tmp_path / "diag_nl_guard.md").read_text()
    with pytest.raises(SystemExit):
        nl_guard.main(["--ratios", "two", "--out", str(tmp_path)])


def test_diag_bo_highdim_runs_any_bench_task(tmp_path):
    from benchmarks.studies import bo_highdim

    bo_highdim.main(["--task", "branin", "--methods", "hilofi_ts_tr", "--seeds", "1", "--budget", "3",
                          "--kwargs", "{}", "--kwargs", '{"obs_noise": 0.001}', "--out", str(tmp_path), "--tag", "t"])
    import pandas as pd

    both = pd.read_csv(tmp_path / "t.csv")
    assert list(both.method.unique()) == ["hilofi_ts_tr", 'hilofi_ts_tr {"obs_noise": 0.001}']  # a labelled variant
    df = both[both.method == "hilofi_ts_tr"]
    assert len(df) == 3 and (df.task == "branin").all()
    u = df[["u0", "u1"]].to_numpy()
    from banditkit.environments.bo_functions import make_function

    f = make_function("branin")
    np.testing.assert_allclose(df.value, f.value(u), rtol=1e-6)  # the recorded query is the evaluated one
    np.testing.assert_allclose(df.regret, np.minimum.accumulate(df.regret))  # best so far never gets worse
    assert (df.regret >= -1e-9).all() and (df.dist <= np.sqrt(2)).all()
    assert "# Where the BO methods look on branin" in (tmp_path / "t.md").read_text()
    final = pd.read_csv(tmp_path / "t_final.csv").iloc[0]
    assert 0.0 <= final.draws_prefer_opt <= 1.0 and final.sd_opt > 0 and final.sd_best > 0
    best, warm = df.loc[df.value.idxmin()], np.random.default_rng(0).random((2, 2))  # seed 0's warm-up
    incumbent = (best.u0, best.u1) if best.value <= f.value(warm).min() else warm[np.argmin(f.value(warm))]
    assert final.best_u == f"{incumbent[0]:.3f} {incumbent[1]:.3f}"
    assert final.true_z_opt >= final.true_z_best  # on the maximised scale the minimiser beats any incumbent
    with pytest.raises(SystemExit, match="unknown task"):
        bo_highdim.main(["--task", "rosenbrock", "--out", str(tmp_path)])


def test_bench_compile_checks_the_values_and_writes_the_table(tmp_path):
    from benchmarks.suites import compile as compile_suite

    compile_suite.main(["--only", "uniform", "--reps", "1", "--out", str(tmp_path)])
    import pandas as pd

    df = pd.read_csv(tmp_path / "compile.csv")
    assert list(df.case) == ["uniform (1000, 6)"] and bool(df.bit_identical.iloc[0])
    assert (df.jax_random_s > 0).all() and (df.bk_rng_s > 0).all()
    assert "| uniform (1000, 6) |" in (tmp_path / "compile.md").read_text()
    with pytest.raises(SystemExit, match="no case"):
        compile_suite.main(["--only", "nothing-like-this", "--out", str(tmp_path)])


def test_showdown_check_re_makes_its_own_table_and_flags_a_changed_row(tmp_path, capsys):
    """The showdown suite's --check end to end: a table just written is re-made (exit status 0, no file touched);
    after its committed curve is altered, the same check reports the agent and exit status 1."""
    from benchmarks.suites import showdown

    base = ["--datasets", "Mushroom", "--steps", "40", "--seeds", "3", "--agents", "linear", "--chunk", "10",
            "--out", str(tmp_path)]
    showdown.main(base)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    showdown.main([*base, "--check", "15"])
    assert "[check showdown_mushroom] linear: re-made:" in capsys.readouterr().out
    assert merge.check_exit_status() == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before

    cur = pd.read_csv(tmp_path / "showdown_mushroom_curve.csv")
    cur.loc[cur["step"] == 10, "cum_reward"] += 5.0
    cur.to_csv(tmp_path / "showdown_mushroom_curve.csv", index=False)
    showdown.main([*base, "--check", "15"])
    assert "linear: DIFFERS from round 11" in capsys.readouterr().out
    assert merge.check_exit_status() == 1


def test_machine_line_says_when_the_process_is_pinned_to_fewer_cores(monkeypatch):
    """XLA:CPU's rounding depends on the cores a process may use, so a pinned run's machine line says so."""
    monkeypatch.setattr(provenance.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(provenance.os, "sched_getaffinity", lambda pid: {1}, raising=False)
    assert provenance.cores_note() == ", process on 1 of them"
    assert "2 cores shared with other users, process on 1 of them" in provenance.machine(load=False)
    monkeypatch.setattr(provenance.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert provenance.cores_note() == ""
    assert "2 cores shared with other users;" in provenance.machine(load=False)


def test_machine_line_names_the_cpu_model_and_its_vector_extension():
    """XLA:CPU compiles for the CPU it runs on, so a result's line says which one."""
    text = "processor\t: 0\nmodel name\t: AMD EPYC 9654\nflags\t\t: fpu sse2 avx avx2 avx512f\n\n" \
        "processor\t: 1\nmodel name\t: AMD EPYC 9654\nflags\t\t: fpu sse2 avx avx2 avx512f\n"
    assert provenance.cpu_note(text) == " (AMD EPYC 9654, AVX-512)"
    assert provenance.cpu_note("model name : Some CPU\nflags : sse2 avx avx2\n") == " (Some CPU, AVX2)"
    assert provenance.cpu_note("flags : sse2\n") == " (SSE2)" and provenance.cpu_note("") == ""
    assert f" CPU{provenance.cpu_note()}, " in provenance.machine(load=False)


def test_diag_dynamics_pairs_each_q_setting_with_make_agents_default(tmp_path):
    import gymnasium as gym
    import pandas as pd

    from benchmarks.studies import dynamics as diag_dynamics

    env = gym.make("banditkit/Mushroom-v0", max_steps=10)
    default = diag_dynamics.agent_factory("lrkf", "q0")(env).posterior.hyper
    gain = diag_dynamics.agent_factory("lrkf", "q1e-4_gain")(env).posterior.hyper
    assert default["dynamics_cov"] == 0.0 and default["dynamics_mode"] == "carry"
    assert gain["dynamics_cov"] == 1e-4 and gain["dynamics_mode"] == "gain"
    assert {k: v for k, v in gain.items() if not k.startswith("dynamics")} == \
        {k: v for k, v in default.items() if not k.startswith("dynamics")}  # only q and the mode differ
    argv = ["--envs", "mushroom", "--filters", "lrkf", "--variants", "q0,q1e-2", "--steps", "8", "--seeds", "2",
            "--chunk", "4", "--out", str(tmp_path)]
    diag_dynamics.main(argv)
    df = pd.read_csv(tmp_path / "diag_dynamics.csv")
    assert len(df) == 4 and set(df.variant) == {"q0", "q1e-2"} and set(df.seed) == {0, 1}
    diag_dynamics.main(argv)  # rows already there are not run again
    assert len(pd.read_csv(tmp_path / "diag_dynamics.csv")) == 4
    table = (tmp_path / "diag_dynamics.md").read_text()
    assert "| mushroom | lrkf | 8 × 2 |" in table and table.count("**") >= 2  # the best setting is bold
    with pytest.raises(SystemExit, match="--variants: unknown"):
        diag_dynamics.main(["--variants", "q5", "--out", str(tmp_path)])


def test_diag_starvation_merges_an_arms_consecutive_starved_blocks_and_tabulates_the_probe(tmp_path):
    from benchmarks.studies import starvation as ds

    assert ds._arms("[]") == [] and ds._arms("[3 9]") == [3, 9]
    meta = dict(agent="lrkf_ts_auth", seed=3, mean_reward=0.75, wall_s=1.0, command="cmd", machine="m", load=0.5)
    starved = ["[9]", "[6 9]", "[9]", "[]"]  # arm 9 in blocks 0-2 (one stretch), arm 6 in block 1
    rows = pd.DataFrame([dict(meta, block_start=100 * i, rounds=100, reward=0.8, min_share=0.0, starved=s)
                         for i, s in enumerate(starved)])
    assert ds._runs_of(rows) == "6: 0.1k–0.2k, 9: 0k–0.3k"
    probe = pd.DataFrame([dict(agent="lrkf_ts_auth", seed=3, probe=200, digit=d, p_pick=0.0 if d == 9 else 0.9,
                               logit_true=-1900.0 if d == 9 else 300.0, logit_sd=25.0, logit_other=-50.0)
                          for d in range(10)])
    probe.to_csv(tmp_path / "t_probe.csv", index=False)
    ds.render(rows, str(tmp_path), "t")
    line = next(x for x in (tmp_path / "t.md").read_text().splitlines() if x.startswith("| lrkf_ts_auth | 3 |"))
    # 4 starved arm-blocks × 100 rounds; only digit 9 is rarely picked; median |logit| of the true arms 300
    assert "| 400 |" in line and "| 9: -1900.0 ± 25.00 |" in line and line.endswith("| 300.0 |")


def test_diag_starvation_lowrank_probe_matches_the_dense_covariance_of_an_lrkf_posterior():
    """The probe's linearised logit sd is √(hᵀ(CᵀC + q̄I)h) of the dense covariance, its capture the share of ‖h‖ in
    the factor's row space; the spectrum is diag(CCᵀ) largest first; other posteriors get ``None``."""
    from banditkit.posteriors import diag_ekf, lrkf
    from benchmarks.studies import starvation as ds

    model = MLP(features=(3,), out=2)
    x = jnp.linspace(-1.0, 1.0, 4)
    params = model.init(jax.random.PRNGKey(0), x)
    post = lrkf(model.apply, rank=3, init_cov=0.5, dynamics_cov=0.01)
    s = post.predict(post.update(post.init(params), x, jnp.array([1.0, -1.0])))  # q̄ = 0.01 pending after predict
    assert float(s.q) > 0
    h = jax.jacrev(lambda th: model.apply(post.mean(s._replace(mean=th)), x))(s.mean)  # (2, P)
    c = s.cov.dense()
    sigma = c.T @ c + s.q * jnp.eye(s.mean.size)
    sd, factor, capture, norm = np.asarray(ds._lowrank_probe(post, s, model.apply)(x))
    np.testing.assert_allclose(sd, np.sqrt(np.einsum("kp,pq,kq->k", h, sigma, h)), rtol=1e-4)
    np.testing.assert_allclose(factor, np.sqrt(np.einsum("kp,pq,kq->k", h, c.T @ c, h)), rtol=1e-4)
    q_rows, _ = np.linalg.qr(np.asarray(c).T)  # an orthonormal basis of the row space
    np.testing.assert_allclose(capture, np.linalg.norm(h @ q_rows, axis=1) / np.linalg.norm(h, axis=1), rtol=1e-4)
    np.testing.assert_allclose(norm, np.linalg.norm(h, axis=1), rtol=1e-5)
    assert 0 < capture.max() <= 1 + 1e-6
    np.testing.assert_allclose(ds.spectrum(s), np.sort(np.sum(np.asarray(c) ** 2, axis=1))[::-1], rtol=1e-5)
    other = diag_ekf(model.apply).init(params)
    assert ds._lowrank_probe(None, other, model.apply) is None and ds.spectrum(other) is None


def test_diag_starvation_spread_table_splits_a_draws_variance_into_the_isotropic_and_the_factor_part(tmp_path):
    from benchmarks.studies import starvation as ds

    assert ds._spread_table(pd.DataFrame(dict(digit=[0])), str(tmp_path / "none.csv")) == []  # an older probe
    # ‖h‖ = 50, q̄ = 1e-6: the isotropic part 0.05; the factor's 0.0375 gives 0.0625 in all, a 36 % share
    probe = pd.DataFrame([dict(agent="lrkf_ts_auth", seed=3, digit=d, logit_sd=0.06, logit_sd_lin=0.0625,
                               logit_sd_factor=0.0375, capture=0.002, grad_norm=50.0, q_pending=1e-6)
                          for d in range(10)])
    pd.DataFrame(dict(agent="lrkf_ts_auth", seed=3, probe=200, i=range(4), variance=[1.02, 1.01, 0.5, 1e-3])).to_csv(
        tmp_path / "s.csv", index=False)
    line = ds._spread_table(probe, str(tmp_path / "s.csv"))[-1]
    assert line == ("| lrkf_ts_auth | 3 | 1e-06 | 0.060 | 0.050 | 0.037 | 36.0% | 0.20% | 50 | 1.02 / 0.755 / 0.001 | "
                    "2 of 4 |")


def test_diag_starvation_lowrank_probe_sums_lolofis_hidden_and_last_blocks():
    """LoLoFi: the linearised sd is √(Σ_i h_iᵀ(C_iᵀC_i + q̄_i I)h_i) over the hidden and last blocks; HiLoFi's full last
    layer is not probed."""
    from banditkit.posteriors import hilofi, lolofi
    from benchmarks.studies import starvation as ds

    model = MLP(features=(3,), out=2)
    x = jnp.linspace(-1.0, 1.0, 4)
    params = model.init(jax.random.PRNGKey(0), x)
    post = lolofi(model.apply, rank=2, rank_last=3, init_cov_hidden=0.5, init_cov_last=0.3, dynamics_cov=0.01)
    s = post.predict(post.update(post.init(params), x, jnp.array([1.0, -1.0])))
    fields = ("mean_hidden", "mean_last")
    jh, jl = jax.jacrev(lambda ms: model.apply(post.mean(s._replace(**dict(zip(fields, ms, strict=True)))), x))(
        (s.mean_hidden, s.mean_last))
    ch, cl = s.cov_hidden.dense(), s.cov_last.dense()
    var = (np.einsum("kp,pq,kq->k", jh, ch.T @ ch + s.q_hidden * jnp.eye(jh.shape[1]), jh)
           + np.einsum("kp,pq,kq->k", jl, cl.T @ cl + s.q_last * jnp.eye(jl.shape[1]), jl))
    sd, factor, capture, norm = np.asarray(ds._lowrank_probe(post, s, model.apply)(x))
    np.testing.assert_allclose(sd, np.sqrt(var), rtol=1e-4)
    assert np.all(factor < sd) and np.all((capture > 0) & (capture <= 1 + 1e-6))
    np.testing.assert_allclose(norm, np.sqrt(np.sum(jh**2, 1) + np.sum(jl**2, 1)), rtol=1e-5)
    assert ds.spectrum(s) is None  # the spectrum is LRKF's one factor only
    assert ds._lowrank_probe(None, hilofi(model.apply, rank=2).init(params), model.apply) is None


def test_scaled_draws_widens_only_the_thompson_draws_isotropic_part():
    """A.scaled_draws: the draws' pending variance is ``scale·q̄`` (sd ×10 for scale 100 off the factor's row
    space); the filter's update and its ``q̄`` are untouched; probes read the scale from ``hyper``."""
    from jax.flatten_util import ravel_pytree

    from banditkit.posteriors import lrkf

    model = MLP(features=(3,), out=2)
    x = jnp.linspace(-1.0, 1.0, 4)
    params = model.init(jax.random.PRNGKey(0), x)

    class Agent:  # what the factory returns: an object with a ``posterior``
        posterior = lrkf(model.apply, rank=1, init_cov=1e-8, dynamics_cov=1e-2)

    def factory(env):
        return Agent()

    factory.spec, factory.hyper = "lrkf-thompson", {}
    base = Agent.posterior
    wide = A.scaled_draws(factory, 100.0)(None).posterior
    assert wide.hyper["draw_q_scale"] == 100.0 and wide.update is base.update and wide.predict is base.predict
    s = base.predict(base.init(params))  # q̄ = 1e-2, the factor ~0
    keys = jax.random.split(jax.random.PRNGKey(1), 400)
    sd_base = np.std(np.stack([ravel_pytree(base.sample(k, s))[0] for k in keys[:200]]), axis=0).mean()
    sd_wide = np.std(np.stack([ravel_pytree(wide.sample(k, s))[0] for k in keys[200:]]), axis=0).mean()
    assert 0.085 < sd_base < 0.115 and 0.85 < sd_wide < 1.15  # √1e-2 and √1


def test_diag_obsnoise_reads_a_source_of_several_tables_and_names_each_variances_seeds(tmp_path):
    from benchmarks.studies import obsnoise as diag_obsnoise

    def rows(agent, mean, seeds):
        return [dict(agent=agent, seed=s, mean_reward=mean + 0.01 * s, steps=400, nonfinite_by=None) for s in seeds]

    files = {"mnist_seed003_seeds.csv": rows("hilofi_ts", 0.8, range(5)),
             "mnist_seed003_more_seeds.csv": rows("lrkf_ts", 0.5, range(5)),
             "diag_lowrank_mnist_40k_seeds.csv": rows("hilofi_ts_r1e-2", 0.9, range(3)),
             "diag_obsnoise_mnist_40k_seeds.csv": rows("lrkf_ts_r1e-4", 0.7, range(3))}
    for name, r in files.items():
        pd.DataFrame(r).to_csv(tmp_path / name, index=False)
    diag_obsnoise.main(["--results", str(tmp_path)])
    md = (tmp_path / "diag_obsnoise.md").read_text()
    # 0.1 pools seeds 0-4 (mean 0.52), 1e-4 seeds 0-2 (0.71); the gain is paired over seeds 0-2: 0.2 on each
    assert ("| MNIST (LeNet5), 40k rounds | lrkf_ts | 5 / – / 3 / – × 400 | 0.5200 ± 0.0071 | – | "
            "**0.7100 ± 0.0058** | – | 1e-4 | +0.2000 ± 0.0000 | – |") in md
    assert "| MNIST (LeNet5), 40k rounds | hilofi_ts | 5 / 3 / – / – × 400 |" in md
    # an agent in two of a source's tables is an error, not a silent pick of one
    pd.DataFrame(rows("lrkf_ts", 0.6, range(3))).to_csv(tmp_path / "diag_obsnoise_mnist_40k_seeds.csv", index=False)
    with pytest.raises(SystemExit, match=r"\['lrkf_ts'\] are in more than one"):
        diag_obsnoise.main(["--results", str(tmp_path)])


def test_diag_noise_cost_times_both_variants_and_writes_the_table(tmp_path):
    from benchmarks.studies import noise_cost as diag_noise_cost

    assert diag_noise_cost.main(["--models", "mlp_shuttle", "--backends", "lrkf", "--rounds", "2", "--window", "3",
                                 "--out", str(tmp_path)]) == 0
    row = pd.read_csv(tmp_path / "noise_cost.csv").iloc[0]
    assert (row.model, row.backend, row.arms, row["rank"], bool(row.finite)) == ("mlp_shuttle", "lrkf", 7, 10, True)
    assert row.ratio_min == pytest.approx(row.learned_ms_min / row.fixed_ms_min) and row.fixed_ms_min > 0
    assert "| mlp_shuttle | 3,407 | 7 | lrkf | 10 |" in (tmp_path / "noise_cost.md").read_text()
    with pytest.raises(SystemExit, match="neural_linear"):
        diag_noise_cost.main(["--backends", "neural_linear", "--out", str(tmp_path)])
