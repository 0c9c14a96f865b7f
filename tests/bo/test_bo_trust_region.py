"""``BayesOpt(trust_region=True)``: TuRBO's adaptive box (``banditkit.bo.trust_region``).

Oracles: the length rule replayed by hand, the box's geometry, and box-constrained maximisers whose exact answer is
the projection of an unconstrained optimum.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.bo import BayesOpt, search
from banditkit.bo import trust_region as tr
from banditkit.environments.bo_functions import make_function

SMALL = dict(surrogate="hilofi", surrogate_kwargs=dict(rank=5), features=(32, 32), n_candidates=256)


def test_length_rule_doubles_halves_caps_and_restarts():
    d = 6  # failure tolerance max(4, 6) = 6
    assert tr.failure_tolerance(2) == 4 and tr.failure_tolerance(d) == 6
    s = tr.TrustRegion()
    assert s.length == 0.8
    for _ in range(2):
        s = tr.update(s, True, d)
    assert (s.length, s.n_success) == (0.8, 2)
    s = tr.update(s, True, d)  # third success in a row: double
    assert (s.length, s.n_success, s.n_failure) == (1.6, 0, 0)
    for _ in range(3):
        s = tr.update(s, True, d)
    assert s.length == 1.6  # capped at length_max
    s = tr.update(s, True, d)
    s = tr.update(s, False, d)  # a failure resets the success run
    assert (s.n_success, s.n_failure) == (0, 1)
    for _ in range(5):
        s = tr.update(s, False, d)
    assert (s.length, s.n_failure) == (0.8, 0)  # 6 failures: halve
    lengths = []
    for _ in range(6 * 7):
        s = tr.update(s, False, d)
        lengths.append(s.length)
    # 0.8 → 0.4 → ... → 0.8 / 2⁶ = 0.0125 ≥ 0.5⁷; the 7th halving (0.00625 < 0.5⁷ = 0.0078) restarts at 0.8
    assert lengths[6 * 6 - 1] == pytest.approx(0.8 / 2**6)
    assert (s.length, s.n_restarts) == (0.8, 1)


def test_improvement_threshold_is_relative():
    assert tr.improves(10.02, 10.0) and not tr.improves(10.005, 10.0)
    assert tr.improves(-9.98, -10.0) and not tr.improves(-9.995, -10.0)


def test_candidates_stay_in_the_box_and_move_few_coordinates():
    d, n = 50, 512
    base = jnp.asarray(search.sobol_points(n, d, seed=0), jnp.float32)
    center = np.full(d, 0.9)
    lo, hi = tr.box(center, 0.4)
    np.testing.assert_allclose(lo, 0.7)
    np.testing.assert_allclose(hi, 1.0)  # cut at the face
    c = np.asarray(tr.candidates(jax.random.PRNGKey(0), base, jnp.asarray(center, jnp.float32),
                                 jnp.asarray(lo, jnp.float32), jnp.asarray(hi, jnp.float32)))
    assert c.shape == (n, d)
    assert np.all(c >= lo - 1e-6) and np.all(c <= hi + 1e-6)
    moved = np.abs(c - center) > 1e-6
    assert moved.any(axis=1).all()  # every candidate moves at least one coordinate
    assert 0.3 < moved.mean() < 0.5  # p = 20/50
    # coordinates that move take the Sobol value mapped into the box
    b = np.asarray(base)
    np.testing.assert_allclose(c[moved], (lo + b * (hi - lo))[moved], rtol=1e-6)
    # in low dimension every coordinate moves (p = 1)
    c2 = np.asarray(tr.candidates(jax.random.PRNGKey(1), base[:, :3], jnp.full(3, 0.5), jnp.full(3, 0.2),
                                  jnp.full(3, 0.8)))
    np.testing.assert_allclose(c2, 0.2 + 0.6 * np.asarray(base[:, :3]), rtol=1e-6)


def test_maximisers_respect_a_box():
    """Concave quadratic with its optimum outside the box: both refiners return the optimum's projection."""
    rng = np.random.default_rng(0)
    d = 8
    c = rng.uniform(-0.5, 1.5, d)
    lo, hi = np.full(d, 0.3), np.full(d, 0.6)
    starts = lo + (hi - lo) * rng.random((3, d))

    def vg(x):
        x = np.asarray(x)
        return -np.sum((x - c) ** 2, axis=1), -2.0 * (x - c)

    x, _ = search.lbfgs_refine(vg, starts, 100, lo, hi)
    np.testing.assert_allclose(x, np.clip(c, lo, hi), atol=1e-5)

    def score(u):
        return -jnp.sum((u - c) ** 2)

    x2, _, _ = search.maximize(score, jnp.asarray(starts), n_starts=3, steps=200, step_size=0.2,
                               lo=jnp.asarray(lo), hi=jnp.asarray(hi))
    assert np.all(np.asarray(x2) >= lo - 1e-7) and np.all(np.asarray(x2) <= hi + 1e-7)
    np.testing.assert_allclose(np.asarray(x2), np.clip(c, lo, hi), atol=0.02)


@pytest.mark.parametrize(
    "kw",
    [
        dict(SMALL, acquisition="thompson"),  # projected ascent
        dict(SMALL, acquisition="ei", maximizer="lbfgs", trust_region=True),
        dict(surrogate="gp", acquisition="thompson", n_candidates=128),  # joint draw on the box's candidates
        dict(surrogate="gp", acquisition="ei", n_candidates=128),
    ],
    ids=["hilofi-ts-ascent", "hilofi-ei-lbfgs", "gp-ts", "gp-ei-lbfgs"],
)
def test_suggestions_lie_in_the_box_and_the_length_follows_the_rule(kw, tmp_path):
    """Every acquired point lies in the side-``L`` cube around the incumbent of its ask; the region's state equals
    the rule replayed over the history; a saved optimiser resumes to the same region and the same next ask."""
    f = make_function("hartmann6")
    d = 6
    opt = BayesOpt([(0.0, 1.0)] * d, direction="minimize", seed=2, n_initial=6, **kw)
    assert opt.trust_region == tr.TrustRegion()
    expect = tr.TrustRegion()
    lengths = set()
    for i in range(40):
        before = opt.trust_region
        x = opt.ask()
        if i >= 6:
            told = opt.snapshot()  # the unit cube is the box here
            center = told.u[int(np.argmin(told.y))]
            lo, hi = tr.box(center, before.length)
            assert np.all(x >= lo - 1e-6) and np.all(x <= hi + 1e-6), (i, before)
        y = float(f.value(x))
        if i >= 6:
            expect = tr.update(expect, tr.improves(-y, float(np.max(-opt.snapshot().y))), d)
        opt.tell(x, y)
        assert opt.trust_region == expect
        lengths.add(opt.trust_region.length)
    assert len(lengths) >= 2  # 34 acquisitions in 6-D: the box changed at least once
    opt.save(tmp_path / "tr.bk")
    again = BayesOpt.load(tmp_path / "tr.bk")
    assert again.trust_region == opt.trust_region
    np.testing.assert_array_equal(again.ask(), opt.ask())


def test_trust_region_default_per_acquisition_and_surrogate_and_checked():
    """On for Thompson sampling and the GP, off for EI / PI / UCB with a network (measured, bo_notes.md)."""
    assert BayesOpt([(0.0, 1.0)], **SMALL).trust_region == tr.TrustRegion()
    assert BayesOpt([(0.0, 1.0)], surrogate="gp", acquisition="ei", n_candidates=32).trust_region is not None
    for acq in ("ei", "pi", "ucb"):
        assert BayesOpt([(0.0, 1.0)], acquisition=acq, **SMALL).trust_region is None
    assert BayesOpt([(0.0, 1.0)], acquisition="ei", trust_region=True, **SMALL).trust_region is not None
    assert BayesOpt([(0.0, 1.0)], trust_region=False, **SMALL).trust_region is None
    with pytest.raises(TypeError, match="trust_region must be True, False or None"):
        BayesOpt([(0.0, 1.0)], trust_region="yes", **SMALL)


def test_batch_asks_stay_in_the_box():
    """``ask(n)``: every point of a batch (the acquisition's and the extra Thompson draws) lies in the box."""
    f = make_function("hartmann6")
    opt = BayesOpt([(0.0, 1.0)] * 6, direction="minimize", seed=5, n_initial=8, **SMALL)
    x0 = np.random.default_rng(0).random((8, 6))
    opt.tell(x0, [float(f.value(x)) for x in x0])
    xs = opt.ask(4)
    lo, hi = tr.box(x0[int(np.argmin([f.value(x) for x in x0]))], opt.trust_region.length)
    assert len({tuple(x) for x in xs}) == 4
    assert np.all(xs >= lo - 1e-6) and np.all(xs <= hi + 1e-6)
