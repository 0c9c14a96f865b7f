"""Ask/tell Bayesian optimisation (``banditkit.bo``).

Small surrogate everywhere (HiLoFi rank 5 on a 2×32 ELU MLP, 256 Sobol candidates) so the compiled kernels are
shared between tests (``BayesOpt`` caches them per configuration).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.bo import BayesOpt
from banditkit.environments.bo_functions import make_function

SMALL = dict(surrogate="hilofi", surrogate_kwargs=dict(rank=5), features=(32, 32), n_candidates=256)
BRANIN = make_function("branin")
BRANIN_BOUNDS = [(-5.0, 10.0), (0.0, 15.0)]


def branin_native(x):
    """Branin on its native domain [-5, 10] x [0, 15] (minimum 0.397887)."""
    return float(BRANIN.value((np.asarray(x) - BRANIN.bounds[:, 0]) / (BRANIN.bounds[:, 1] - BRANIN.bounds[:, 0])))


def quad(x):
    return float(np.sum((np.asarray(x) - np.array([0.3, 1.2])) ** 2))


def _leaves_equal(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(la) == len(lb) and all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(la, lb, strict=True))


def _random_search_regret(seed: int, n: int) -> float:
    """Branin's simple regret after ``n`` uniform points of ``default_rng(seed)`` on the unit square."""
    return float(np.min(BRANIN.value(np.random.default_rng(seed).random((n, 2))))) - BRANIN.minimum


def test_branin_finds_optimum_region_more_often_than_random():
    """Network BO (small HiLoFi) beats random search on Branin with 60 evaluations, over 10 seeds, in geometric-mean
    regret.  Measured over these 10 seeds on two CPUs (the trajectories depend on the CPU's floating point): one gave
    geometric-mean regret 0.19 (BO) vs 0.73 (random), median 0.30 vs 0.65, hits (< 0.5) 7 vs 5; an AMD EPYC gave
    0.38 vs 0.73, median 0.69 vs 0.65, hits 4 vs 5 — three of its seeds stick near the cube's face, as in
    ``benchmarks/results/diag_bo_branin.md``.  So only the geometric mean is asserted; the GP test below holds the
    strong claim."""
    seeds = range(10)
    bo_regret, rs_regret = [], []
    for seed in seeds:
        res = bk.bo.optimize(branin_native, BRANIN_BOUNDS, n_evals=60, direction="minimize", seed=seed, **SMALL)
        bo_regret.append(res.y - BRANIN.minimum)
        rs_regret.append(_random_search_regret(seed, 60))
    bo_regret, rs_regret = np.asarray(bo_regret), np.asarray(rs_regret)
    geo_bo, geo_rs = np.exp(np.mean(np.log(bo_regret))), np.exp(np.mean(np.log(rs_regret)))
    assert geo_bo < geo_rs, (bo_regret, rs_regret)


def test_gp_bo_reaches_branins_minimum_where_random_search_does_not():
    """The exact-GP surrogate on Branin, 30 evaluations, 5 seeds: every run within 0.1 of the known minimum (measured
    0.002–0.07), while random search's median regret is 1.37 with the same budget."""
    bo_regret, rs_regret = [], []
    for seed in range(5):
        res = bk.bo.optimize(branin_native, BRANIN_BOUNDS, n_evals=30, direction="minimize", seed=seed,
                             surrogate="gp", n_candidates=256)
        bo_regret.append(res.y - BRANIN.minimum)
        rs_regret.append(_random_search_regret(seed, 30))
    assert np.max(bo_regret) < 0.1, bo_regret
    assert np.median(rs_regret) > 10 * np.max(bo_regret), (bo_regret, rs_regret)


def test_save_load_resumes_exactly(tmp_path):
    opt = BayesOpt([(0.0, 1.0), (0.0, 2.0)], seed=3, **SMALL)
    for _ in range(7):
        x = opt.ask()
        opt.tell(x, quad(x))
    batch = opt.ask(n=2)  # pending suggestions are part of the state
    path = tmp_path / "sub" / "run.bk"
    opt.save(path)
    assert not [p for p in path.parent.iterdir() if p.name != "run.bk"]  # no temp file left behind
    again = BayesOpt.load(path)
    assert again.history.equals(opt.history)
    np.testing.assert_array_equal(again.pending, opt.pending)
    assert _leaves_equal(again.posterior[1], opt.posterior[1])
    np.testing.assert_array_equal(again.ask(), opt.ask())
    opt.tell(batch, [quad(b) for b in batch])
    again.tell(batch, [quad(b) for b in batch])
    np.testing.assert_array_equal(again.ask(n=3), opt.ask(n=3))
    assert again.best[1] == opt.best[1]


def test_rejected_tell_leaves_state_unchanged():
    a = BayesOpt([(-1.0, 1.0)] * 2, seed=1, n_initial=3, **SMALL)
    b = BayesOpt([(-1.0, 1.0)] * 2, seed=1, n_initial=3, **SMALL)
    for _ in range(4):
        x = a.ask()
        np.testing.assert_array_equal(x, b.ask())
        a.tell(x, float(np.sum(x)))
        b.tell(x, float(np.sum(x)))
    pending = a.ask(n=2)
    b.ask(n=2)
    bad = [
        (np.zeros(3), 1.0),  # wrong dimension
        (np.array([0.0, 1.5]), 1.0),  # out of bounds
        (np.array([0.0, np.nan]), 1.0),  # NaN coordinate
        (pending[0], np.nan),  # NaN value
        (pending[0], np.inf),
        (pending, [1.0]),  # one value for two points
        (np.stack([pending[0], [2.0, 0.0]]), [1.0, 2.0]),  # second row out of bounds: nothing is told
    ]
    for x, y in bad:
        with pytest.raises(ValueError):
            a.tell(x, y)
    assert a.history.equals(b.history)
    np.testing.assert_array_equal(a.pending, b.pending)
    assert _leaves_equal(a.posterior[1], b.posterior[1])
    np.testing.assert_array_equal(a.ask(), b.ask())


def test_ask_batch_distinct_and_in_bounds():
    bounds = [(-2.0, 3.0), (10.0, 11.0)]
    opt = BayesOpt(bounds, seed=0, n_initial=4, **SMALL)
    for phase in ("initial design", "acquisition"):
        xs = opt.ask(n=4)
        assert xs.shape == (4, 2), phase
        lo, hi = np.array(bounds).T
        assert np.all(xs >= lo) and np.all(xs <= hi), phase
        assert len({tuple(np.round(x, 9)) for x in xs}) == 4, phase
        opt.tell(xs, [quad(x) for x in xs])
    assert opt.ask().shape == (2,)
    assert set(opt.history.source) == {"initial", "thompson"}


def test_minimize_and_maximize_are_mirror_images():
    lo = BayesOpt([(0.0, 1.0), (0.0, 2.0)], direction="minimize", seed=5, **SMALL)
    hi = BayesOpt([(0.0, 1.0), (0.0, 2.0)], direction="maximize", seed=5, **SMALL)
    for _ in range(15):
        x = lo.ask()
        np.testing.assert_allclose(x, hi.ask(), atol=1e-6)  # -f maximised == f minimised
        lo.tell(x, quad(x))
        hi.tell(x, -quad(x))
    hist = lo.history
    assert lo.best[1] == hist.y.min() and hi.best[1] == -lo.best[1]
    assert np.all(np.diff(hist.best_y) <= 0)  # best so far only goes down when minimising
    random_best = min(quad(x) for x in np.random.default_rng(5).random((15, 2)) * [1.0, 2.0])
    assert lo.best[1] < random_best


@pytest.mark.parametrize("acq", ["ei", "pi", "ucb"])
def test_analytic_acquisitions_run(acq):
    opt = BayesOpt([(0.0, 1.0), (0.0, 2.0)], acquisition=acq, direction="minimize", seed=2, n_initial=4, **SMALL)
    for _ in range(8):
        x = opt.ask()
        opt.tell(x, quad(x))
    hist = opt.history
    assert list(hist.source[4:]) == [acq] * 4
    assert np.all(hist[["x0", "x1"]].to_numpy() <= [1.0, 2.0]) and np.all(hist[["x0", "x1"]].to_numpy() >= 0)
    xs = opt.ask(n=3)  # each by the acquisition, the earlier ones of the batch pending (constant liar)
    assert xs.shape == (3, 2) and len({tuple(x) for x in xs}) == 3


def test_user_points():
    opt = BayesOpt([(0.0, 1.0), (0.0, 2.0)], n_initial=2, seed=0, direction="maximize", **SMALL)
    opt.tell(np.array([[0.1, 0.1], [0.9, 1.9]]), [1.0, 2.0])  # points never asked
    assert list(opt.history.source) == ["user", "user"]
    x = opt.ask()
    assert x.shape == (2,) and 0.0 <= x[0] <= 1.0 and 0.0 <= x[1] <= 2.0
    np.testing.assert_array_equal(opt.best[0], [0.9, 1.9])


def test_bad_arguments_are_clear():
    with pytest.raises(ValueError, match="acquisition"):
        BayesOpt([(0, 1)], acquisition="magic")
    with pytest.raises(ValueError, match="direction"):
        BayesOpt([(0, 1)], direction="up")
    with pytest.raises(ValueError, match="low < high"):
        BayesOpt([(1, 0)])
    with pytest.raises(ValueError, match="unknown posterior"):
        BayesOpt([(0, 1)], surrogate="nope")
    opt = BayesOpt([(0.0, 1.0)], surrogate="ekf", features=(8,), n_candidates=64)
    with pytest.raises(ValueError, match="no evaluations"):
        _ = opt.best
    with pytest.raises(ValueError, match="positive int"):
        opt.ask(n=0)
    with pytest.raises(ValueError, match="finite"):
        bk.bo.optimize(lambda x: float("nan"), [(0.0, 1.0)], n_evals=2, surrogate="ekf", features=(8,))


@pytest.mark.parametrize("surrogate", ["online_vbll", "last_layer_laplace"])
def test_replay_buffer_surrogates_get_their_example_input(surrogate):
    """Seed 003's replay-buffer baselines size their buffer from one input; BayesOpt supplies it."""
    opt = BayesOpt([(0.0, 1.0), (0.0, 2.0)], surrogate=surrogate, features=(16,), n_candidates=64, seed=0)
    for _ in range(6):
        x = opt.ask()
        opt.tell(x, quad(x))
    assert len(opt.history) == 6 and np.isfinite(opt.best[1])


# ------------------------------------------------------------------------------ maximizer="lbfgs" (L-BFGS-B refine)
def test_lbfgs_refine_finds_box_constrained_optimum():
    """Concave quadratic ``a(x) = −Σ_j w_j (x_j − c_j)²`` on the unit cube: the optimum is ``clip(c, 0, 1)``."""
    from banditkit.bo import search

    rng = np.random.default_rng(0)
    d = 12
    c = rng.uniform(-0.5, 1.5, d)  # about half the coordinates outside the cube: optimum on faces
    w = rng.uniform(0.1, 10.0, d)  # badly scaled: fixed-length steps would crawl

    def vg(x):
        x = np.asarray(x)
        return -np.sum(w * (x - c) ** 2, axis=1), -2.0 * w * (x - c)

    starts = rng.random((3, d))
    x, a = search.lbfgs_refine(vg, starts, maxiter=100)
    np.testing.assert_allclose(x, np.clip(c, 0.0, 1.0), atol=1e-5)  # L-BFGS-B stops at |proj. grad| < 1e-5
    assert a == pytest.approx(float(vg(x[None])[0][0]))
    # never worse than the best start, even with no iterations
    x0, a0 = search.lbfgs_refine(vg, starts, maxiter=0)
    assert a0 == pytest.approx(float(np.max(vg(starts)[0])))
    # non-finite rows are ignored, not propagated
    x1, _ = search.lbfgs_refine(lambda X: (np.where(np.arange(3) == 1, np.nan, vg(X)[0]), vg(X)[1]), starts, 100)
    np.testing.assert_allclose(x1, np.clip(c, 0.0, 1.0), atol=1e-4)


@pytest.mark.parametrize("surrogate,acq", [("gp", "ei"), ("hilofi", "ei"), ("hilofi", "thompson"), ("gp", "pi")])
def test_lbfgs_maximizer_beats_its_starts_and_resumes(surrogate, acq, tmp_path):
    """The L-BFGS suggestion scores at least as well as the best candidate on the log acquisition (EI: strictly
    better on this state), and a saved optimiser resumes to the same next ask."""
    kw = dict(n_candidates=128) if surrogate == "gp" else {k: v for k, v in SMALL.items() if k != "surrogate"}
    opt = BayesOpt([(0.0, 1.0)] * 3, surrogate=surrogate, acquisition=acq, direction="minimize", seed=4,
                   maximizer="lbfgs", n_initial=6, **kw)
    assert opt.config["n_starts"] == 8 and opt.config["refine_steps"] == 200
    f = make_function("hartmann6")

    def obj(x):
        return float(f.value(np.concatenate([x, [0.5, 0.5, 0.5]])))

    for _ in range(10):
        x = opt.ask()
        opt.tell(x, obj(x))
    path = tmp_path / "o.bk"
    opt.save(path)
    again = BayesOpt.load(path)
    assert again.config["maximizer"] == "lbfgs"
    x = opt.ask()
    np.testing.assert_array_equal(again.ask(), x)
    if acq != "thompson":
        from banditkit.bo.acquisition import log_score

        snap, cfg = opt.snapshot(), opt.config
        state, dtype = snap.fit.state, snap.surrogate.dtype
        best = float(np.max((snap.s - snap.fit.shift) / snap.fit.scale))
        with jax.enable_x64(surrogate == "gp"):
            w = jnp.asarray([acq == a for a in ("ei", "pi", "ucb")], dtype)
            if surrogate == "gp":
                from banditkit.bo import gp as _gp

                def score(u):
                    m, v = _gp.predict(state, u[None])
                    return log_score(m[0], jnp.sqrt(v[0]), best, w, cfg)
            else:
                def score(u):
                    m, c = snap.surrogate.posterior.predictive(state, u)
                    return log_score(m[0], jnp.sqrt(jnp.maximum(c[0, 0], 1e-12)), best, w, cfg)

            dt = jnp.float64 if surrogate == "gp" else dtype
            score = jax.jit(score)  # one compile, then each point scored alone as the maximiser's refinement sees it
            cand = max(float(score(jnp.asarray(c, dt))) for c in np.asarray(opt.proposal_inputs()[3]))
            got = float(score(jnp.asarray(x, dt)))
        assert got >= cand - 1e-6 * abs(cand)
        if acq == "ei":
            assert got > cand


def test_lbfgs_reaches_a_far_optimum_the_short_ascent_cannot():
    """GP-EI on a 20-D bowl whose minimum sits in a corner: with the data clustered in the opposite corner the EI
    maximiser lies beyond the default ascent's reach (≤ 0.28 in L2) from every candidate start."""
    d = 20
    target = np.full(d, 0.95)

    def bowl(x):
        return float(np.sum((x - target) ** 2))

    rng = np.random.default_rng(1)
    x0 = 0.3 * rng.random((25, d))  # the low corner only
    res = {}
    for m in ("ascent", "lbfgs"):
        opt = BayesOpt([(0.0, 1.0)] * d, surrogate="gp", acquisition="ei", direction="minimize", seed=0,
                       maximizer=m, n_initial=25, n_candidates=64, trust_region=False)  # the whole cube
        opt.tell(x0, [bowl(x) for x in x0])
        for _ in range(5):
            x = opt.ask()
            opt.tell(x, bowl(x))
        res[m] = opt.best[1]
    assert res["lbfgs"] < res["ascent"], res


def test_unknown_maximizer_is_a_clear_error():
    with pytest.raises(ValueError, match="maximizer.*ascent.*lbfgs"):
        BayesOpt([(0, 1)], maximizer="newton")


def _drop_options(path, *names: str) -> None:
    """Rewrite the BayesOpt saved at ``path`` as a format before the options ``names`` existed wrote it: its
    header's ``config`` without them (the header is the checkpoint's JSON entry ``__banditkit_meta__``)."""
    import json

    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    header = json.loads(bytes(arrays["__banditkit_meta__"]).decode("utf-8"))
    for name in names:
        del header["meta"]["config"][name]
    arrays["__banditkit_meta__"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


def test_default_maximizer_per_surrogate_and_old_checkpoints(tmp_path):
    """The ascent is the default for Thompson sampling with a network, L-BFGS otherwise; a checkpoint written
    before the options existed (its config has no ``maximizer`` / ``trust_region``) resumes with the whole-cube
    ascent it was made with, to the same next ask."""
    assert BayesOpt([(0.0, 1.0)], surrogate="gp", n_candidates=32).config["maximizer"] == "lbfgs"
    assert BayesOpt([(0.0, 1.0)], **SMALL).config["maximizer"] == "ascent"
    assert BayesOpt([(0.0, 1.0)], acquisition="ei", **SMALL).config["maximizer"] == "lbfgs"
    opt = BayesOpt([(0.0, 1.0)] * 2, surrogate="gp", acquisition="ei", maximizer="ascent", seed=1, n_initial=4,
                   n_candidates=64, trust_region=False)
    for _ in range(6):
        x = opt.ask()
        opt.tell(x, quad(x))
    opt.save(tmp_path / "old.bk")
    _drop_options(tmp_path / "old.bk", "maximizer", "trust_region")  # what the previous format wrote
    again = BayesOpt.load(tmp_path / "old.bk")
    assert again.config["maximizer"] == "ascent" and again.config["refine_steps"] == 10
    assert again.trust_region is None  # made by a search over the whole cube
    np.testing.assert_array_equal(again.ask(), opt.ask())


def test_a_custom_surrogate_factory_is_asked_for_again_at_load(tmp_path):
    """A factory that is not a registered name is code, not stored: ``load`` without it says to pass it again, and
    with it continues exactly."""
    import functools

    import banditkit as bk

    factory = functools.partial(bk.posteriors.lofi, init_cov=0.01)
    opt = BayesOpt([(0.0, 1.0)], seed=0, **{**SMALL, "surrogate": factory})
    for _ in range(6):
        x = opt.ask()
        opt.tell(x, quad(x))
    opt.save(tmp_path / "run.bk")
    with pytest.raises(ValueError, match=r"not a registered backend name.*surrogate=\.\.\."):
        BayesOpt.load(tmp_path / "run.bk")
    np.testing.assert_array_equal(BayesOpt.load(tmp_path / "run.bk", surrogate=factory).ask(), opt.ask())


def test_optimize_on_error_raise_saves_skip_drops_and_fail_is_saved(tmp_path):
    """``optimize(on_error=...)``: "raise" saves the checkpoint (evaluations so far, the failing point pending) before
    the error propagates; "skip" records the point as failed (not told, never suggested again, saved with the
    optimiser) and still makes ``n_evals`` evaluations; a bad ``on_error`` is a clear error."""
    bad = []

    def f(x):
        if len(bad) < 3 and x[0] > 0.5:  # the first three calls with x0 > 0.5 fail
            bad.append(np.array(x))
            raise RuntimeError("objective failed")
        return quad(x)

    ck = tmp_path / "run.bk"
    with pytest.raises(RuntimeError, match="objective failed"):
        bk.bo.optimize(f, [(0.0, 1.0), (0.0, 2.0)], n_evals=8, checkpoint=ck, save_every=1e9, seed=2, **SMALL)
    saved = BayesOpt.load(ck)
    assert saved.n_evals >= 0 and len(saved.pending) == 1 and saved.n_failed == 0
    np.testing.assert_array_equal(saved.pending[0], bad[0])
    res = bk.bo.optimize(f, [(0.0, 1.0), (0.0, 2.0)], n_evals=8, checkpoint=ck, save_every=1e9, seed=2,
                         on_error="skip", **SMALL)
    # the pending point was evaluated first (and failed again), then one more failed: two points skipped
    np.testing.assert_array_equal(bad[1], bad[0])
    assert len(bad) == 3 and res.optimizer.n_evals == 8 and res.optimizer.n_failed == 2
    told = res.history[["x0", "x1"]].to_numpy()
    assert not any(np.any(np.all(told == b, axis=1)) for b in bad)  # a failed point was not told
    assert len(res.optimizer.pending) == 0
    again = BayesOpt.load(ck)
    assert again.n_failed == 2
    np.testing.assert_array_equal(again.snapshot().failed, res.optimizer.snapshot().failed)
    opt = BayesOpt([(0.0, 1.0)], seed=0, n_initial=1, min_distance=0.05, acquisition="ei", **SMALL)
    opt.tell(np.array([0.5]), 0.0)
    x = opt.ask()
    opt.fail(x)
    assert len(opt.pending) == 0
    for _ in range(3):  # the same state asks again: never the failed point (within min_distance)
        z = opt.ask()
        assert abs(z[0] - x[0]) > 0.05
        opt.tell(z, 0.0)
    with pytest.raises(ValueError, match="on_error must be"):
        bk.bo.optimize(f, [(0.0, 1.0)], n_evals=2, on_error="ignore")


def test_minimize_is_the_default_and_leaving_it_out_warns_for_one_release(tmp_path):
    """``BayesOpt`` / ``optimize`` without ``direction`` minimise (as Optuna and ``banditkit bo``) and warn, at the
    caller's line, that the default was "maximize" until 0.2; a given direction, and ``load``, do not warn."""
    import warnings

    with pytest.warns(DeprecationWarning, match="minimise by default since banditkit 0.3") as rec:
        opt = BayesOpt([(0.0, 1.0)], n_initial=2, seed=0, **SMALL)
    assert opt.direction == "minimize" and rec[0].filename == __file__
    opt.tell(np.array([[0.2], [0.8]]), [1.0, 2.0])
    np.testing.assert_array_equal(opt.best[0], [0.2])
    opt.save(tmp_path / "o.bk")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert BayesOpt.load(tmp_path / "o.bk").direction == "minimize"
        assert BayesOpt([(0.0, 1.0)], direction="Maximize", **SMALL).direction == "maximize"
    with pytest.warns(DeprecationWarning, match="pass direction=") as rec:
        res = bk.bo.optimize(lambda x: float((x[0] - 0.7) ** 2), [(0.0, 1.0)], n_evals=3, n_initial=3, **SMALL)
    assert len(rec) == 1 and rec[0].filename == __file__ and res.optimizer.direction == "minimize"
    assert res.y == res.history.y.min()
    with pytest.raises(ValueError, match="direction must be 'minimize' or 'maximize'"):
        BayesOpt([(0.0, 1.0)], direction="down", **SMALL)
