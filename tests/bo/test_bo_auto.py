"""``surrogate="auto"`` (:mod:`banditkit.bo.auto`): the exact GP with EI while at most ``SWITCH_AT`` evaluations are
told, HiLoFi with Thompson sampling after; and the acquisition search over integer / stepped / categorical values.

The switch point is lowered to 6 here (the module constant, read at every tell) so the test stays small; the network
phase uses a 2×16 MLP."""

import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.bo import BayesOpt, acquisition, auto
from banditkit.bo.space import Categorical, Float, Int, Space

SPACE = {"x": Float(-1.0, 1.0), "k": Int(0, 9), "c": Categorical(["a", "b", "c"])}
SMALL = dict(direction="minimize", seed=0, n_initial=4, n_candidates=64)
NET = dict(features=(16, 16))


def f(p):
    return (p["x"] - 0.3) ** 2 + 0.05 * (p["k"] - 6) ** 2 + (0.0 if p["c"] == "b" else 1.0)


@pytest.fixture
def switch_at_6(monkeypatch):
    monkeypatch.setattr(auto, "SWITCH_AT", 6)


def test_auto_is_gp_ei_up_to_the_switch_then_hilofi_thompson(switch_at_6, tmp_path):
    a = BayesOpt(space=SPACE, surrogate="auto", **SMALL, **NET)
    g = BayesOpt(space=SPACE, surrogate="gp", acquisition="ei", **SMALL)
    assert (a.surrogate, a.snapshot().surrogate.name, a.acquisition) == ("auto", "gp", "ei")
    assert dict(a.config) == dict(g.config, features=[16, 16])
    for _ in range(6):  # asks at n = 0..5 evaluations: the same points as GP-EI's, the same seed
        p, q = a.ask(), g.ask()
        assert p == q
        a.tell(p, f(p))
        g.tell(q, f(q))
    assert a.snapshot().phase == ("gp", "ei")
    p = a.ask()  # n = 6 = SWITCH_AT: still the GP
    assert p == g.ask()
    a.tell(p, f(p))  # the 7th evaluation: HiLoFi-TS from now on, fed all seven at once
    assert (a.surrogate, a.snapshot().surrogate.name, a.acquisition) == ("auto", "hilofi", "thompson")
    assert a.fit.n_fed == 7 and a.config["maximizer"] == "ascent" and a.config["trust_region"]
    h = BayesOpt(space=SPACE, surrogate="hilofi", acquisition="thompson", **SMALL, **NET)
    h.tell(a.history[list(SPACE)].to_dict("records"), a.history.y.to_numpy())  # one batch: same standardisation
    assert h.trust_region == a.trust_region
    assert a.ask(seed=3) == h.ask(seed=3)
    # a checkpoint on either side of the switch resumes in its phase
    a.save(tmp_path / "late.bk")
    b = BayesOpt.load(tmp_path / "late.bk")
    assert (b.surrogate, b.snapshot().phase) == ("auto", ("hilofi", "thompson")) and b.ask(seed=5) == a.ask(seed=5)
    g.save(tmp_path / "gp.bk")
    e = BayesOpt(space=SPACE, surrogate="auto", **SMALL, **NET)
    for p in g.history[list(SPACE)].to_dict("records")[:5]:
        e.tell(p, f(p))
    e.save(tmp_path / "early.bk")
    c = BayesOpt.load(tmp_path / "early.bk")
    assert c.snapshot().phase == ("gp", "ei") and c.ask(seed=1) == e.ask(seed=1)


def test_auto_refuses_what_cannot_apply_to_both_phases():
    with pytest.raises(ValueError, match="chooses its acquisition"):
        BayesOpt(space=SPACE, surrogate="auto", acquisition="ei", direction="minimize")
    with pytest.raises(ValueError, match="surrogate_kwargs"):
        BayesOpt(space=SPACE, surrogate="auto", surrogate_kwargs=dict(rank=2), direction="minimize")
    assert auto.phase(100) == auto.EARLY and auto.phase(101) == auto.LATE


def test_discrete_search_returns_valid_points_and_the_known_argmax():
    """A separable acquisition peaked at one valid point of an int / stepped-float / log-int / categorical space:
    from 8 random candidates (none of them the peak) the neighbour moves end exactly on it, and every point the
    search returns is a valid point of the space."""
    sp = Space({"k": Int(0, 9), "s": Float(0.0, 1.0, step=0.25), "m": Int(1, 8, log=True),
                "c": Categorical(["a", "b", "c"])})
    peak = dict(k=7, s=0.75, m=3, c="b")
    target = jnp.asarray(sp.encode(peak), jnp.float32)

    def score(args, u):
        return -jnp.sum((u - target) ** 2)

    cfg = dict(maximizer="lbfgs", n_starts=4, refine_steps=10, step_size=0.1, xi=0.0, beta=1.0)
    k = acquisition.search_kernels(score, cfg)
    cands = sp.sample(np.random.default_rng(0), 8)
    assert not any(sp.decode(c) == peak for c in cands)
    for seed in range(3):
        cands = sp.sample(np.random.default_rng(seed), 8)
        x, a, _ = acquisition.maximise(k, None, jnp.asarray(cands, jnp.float32), None, None, cfg, sp)
        assert np.array_equal(sp.snap(x), x)  # a valid point, not a relaxed one
        assert sp.decode(x) == peak and a == pytest.approx(0.0, abs=1e-6)


def test_an_optuna_study_with_the_auto_sampler_on_a_mixed_space():
    optuna = pytest.importorskip("optuna")
    from banditkit.integrations.optuna import BanditkitSampler

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = BanditkitSampler(surrogate="auto", n_startup_trials=4, seed=0, warm_up=False, n_candidates=64)
    study = optuna.create_study(direction="minimize", sampler=sampler)

    def objective(trial):
        return f(dict(x=trial.suggest_float("x", -1.0, 1.0), k=trial.suggest_int("k", 0, 9),
                      c=trial.suggest_categorical("c", ["a", "b", "c"])))

    study.optimize(objective, n_trials=10)
    assert len(study.trials) == 10 and all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    bp = study.best_params
    assert type(bp["k"]) is int and 0 <= bp["k"] <= 9 and bp["c"] in ("a", "b", "c")
    memo = next(iter(sampler._memos.values()))
    assert memo.opt.surrogate == "auto" and memo.opt.snapshot().surrogate.name == "gp" and memo.opt.n_evals >= 9


def test_the_cli_takes_surrogate_auto_without_an_acquisition(tmp_path, capsys):
    import argparse

    from banditkit.cli import main
    from banditkit.cli.bo import acquisition_arg, run_name
    from banditkit.cli.errors import CLIError

    def ns(surrogate, acquisition):
        return argparse.Namespace(surrogate=surrogate, acquisition=acquisition)

    assert acquisition_arg(ns("hilofi", None)) == "thompson" and acquisition_arg(ns("gp", "ei")) == "ei"
    assert acquisition_arg(ns("auto", None)) is None
    assert run_name("auto", None) == "auto" and run_name("hilofi", "thompson") == "hilofi-thompson"
    with pytest.raises(CLIError, match="drop --acquisition ei"):
        acquisition_arg(ns("auto", "ei"))
    assert main(["bo", "--function", "branin", "--surrogate", "auto", "--acquisition", "ei",
                 "--out", str(tmp_path / "x"), "--quiet"]) != 0
    assert "chooses its acquisition" in capsys.readouterr().err and not (tmp_path / "x").exists()
