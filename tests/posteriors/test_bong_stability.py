"""Stability of BONG's mean step (issue 59, fault 3): the self-fit gain κ against its closed forms on a linear model,
the warning / refusal for cells that are unstable by construction, and the diagonal rows of the regression benchmark
finite for 400 steps on 4 seeds at the prior variance the check accepts (while the grid's σ0² = 1 cells, flagged
κ0 > 2 by the check, do go non-finite)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.likelihoods import Gaussian
from banditkit.models import MLP
from banditkit.posteriors.bong import bong, check_step, self_fit_gain
from benchmarks.suites import bong as bench

R = 0.3
C0 = 0.7


def _linear():
    """``y = wᵀx`` with 5 inputs: the predictive mean is linear in ``w``, so the linearised κ is exact."""
    x = jnp.array([0.9, -1.3, 0.4, 2.0, -0.7], jnp.float64)
    params = {"w": jnp.array([0.1, 0.2, -0.3, 0.05, 0.4], jnp.float64)}

    def apply_fn(p, xx):
        return jnp.atleast_1d(p["w"] @ xx)

    return apply_fn, params, x, jnp.array([1.7], jnp.float64)


@pytest.mark.parametrize("cell", ["bog-dlr", "bong-diag", "blr-diag", "bong-full", "bong-dlr", "blr-dlr"])
def test_self_fit_gain_equals_its_closed_form_on_a_linear_model(x64, cell):
    apply_fn, params, x, y = _linear()
    rule, family = cell.split("-")
    alpha = {"bog": 0.05, "blr": 0.4, "bong": 1.0}[rule]
    kw = {} if rule == "bong" else {"learning_rate": alpha}
    post = bong(apply_fn, Gaussian(R), rule=rule, family=family, rank=2, init_cov=C0, **kw)
    kappa = float(self_fit_gain(post, post.init(params), x, y))
    h2 = np.asarray(x) ** 2
    expected = {
        "bog": alpha * h2.sum() / R,  # plain gradient step on the mean: α‖H‖²/R
        "diag": alpha * np.sum(h2 / (R / C0 + alpha * h2)),  # eq. 213/215 and BLR's first iterate, per coordinate
        "full": (s := C0 * h2.sum()) / (R / alpha + s),  # un-truncated precision: HΣHᵀ / (R/α + HΣHᵀ) < 1
        "dlr": (s := C0 * h2.sum()) / (R / alpha + s),
    }["bog" if rule == "bog" else family]
    np.testing.assert_allclose(kappa, expected, rtol=1e-10)


def test_check_step_warns_and_refuses_a_bog_learning_rate_above_two_over_the_curvature(x64):
    apply_fn, params, x, y = _linear()
    lam = float(np.sum(np.asarray(x) ** 2) / R)  # λ_max(HᵀR⁻¹H) of one observation (rank one)
    xs, ys = jnp.stack([x, 0.5 * x, 1.5 * x]), jnp.stack([y, -y, 2 * y])
    too_big = bong(apply_fn, Gaussian(R), rule="bog", family="dlr", rank=2, learning_rate=3.0 / lam)
    with pytest.warns(UserWarning, match=r"learning_rate × λ_max\(HᵀR⁻¹H\) < 2") as rec:
        kappa = check_step(too_big, too_big.init(params), xs, ys)
    assert kappa == pytest.approx(3.0, rel=1e-9)  # κ scales with ‖x‖², the median of (0.25, 1, 2.25) × 3
    suggested = float(str(rec[0].message).split("below about ")[1].split(",")[0])
    assert suggested == pytest.approx(2.0 / lam, rel=1e-2)  # 2α/κ: the stability limit of plain gradient descent
    with pytest.raises(ValueError, match="unstable by construction"):
        check_step(too_big, too_big.init(params), xs, ys, strict=True)
    ok = bong(apply_fn, Gaussian(R), rule="bog", family="dlr", rank=2, learning_rate=1.5 / lam)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: κ = 1.5
        assert check_step(ok, ok.init(params), xs, ys, strict=True) == pytest.approx(1.5, rel=1e-9)


def test_check_step_names_init_cov_for_the_diagonal_family(x64):
    apply_fn, params, x, y = _linear()
    wide = bong(apply_fn, Gaussian(1e-3), family="diag", init_cov=10.0)  # κ = Σ_j h_j²/(R/c0 + h_j²) ≈ 5 > 2
    with pytest.raises(ValueError, match=r"diagonal family's natural step .* Lower init_cov=10"):
        check_step(wide, wide.init(params), x[None], y[None], strict=True)
    full = bong(apply_fn, Gaussian(1e-3), family="full", init_cov=10.0)  # the same prior is stable with correlations
    assert check_step(full, full.init(params), x[None], y[None], strict=True) < 1


# ------------------------------------------------------------------------------------------- the regression stream
SEEDS, STEPS = 4, 400


def _stream():
    """The benchmark's regression stream for seeds 0..3: ``xs (4, 400, 21)``, ``ys (4, 400, 1)``, stacked ``params``
    of the 21-20-20-1 student, and ``R = 0.1 Var(y) = 0.1`` (``y`` is standardised on the training steps)."""
    data = [bench.regression_data(STEPS, 1, seed) for seed in range(SEEDS)]
    model = MLP(features=(20, 20), out=1)
    xs = jnp.stack([jnp.asarray(d[0]) for d in data])
    ys = jnp.stack([jnp.asarray(d[1]) for d in data])
    r = [0.1 * float(np.var(d[1])) for d in data]
    np.testing.assert_allclose(r, 0.1, rtol=1e-5)
    params = [model.init(jax.random.PRNGKey(seed), data[seed][0][0]) for seed in range(SEEDS)]
    return model, xs, ys, jax.tree_util.tree_map(lambda *a: jnp.stack(a), *params)


def _run_seeds(post, model, xs, ys, params):
    """Every seed's 400 steps (one ``vmap`` of one ``scan``); returns the final means, their finiteness and the
    training RMSE of the initial and the final network on each seed's stream."""

    def one(p, x, y):
        st = jax.lax.scan(lambda s, xy: (post.update(s, *xy), None), post.init(p), (x, y))[0]
        rmse = lambda q: jnp.sqrt(jnp.mean((jax.vmap(lambda xx: model.apply(q, xx))(x) - y) ** 2))  # noqa: E731
        return jnp.all(jnp.isfinite(st.mean)) & jnp.all(jnp.isfinite(st.prec)), rmse(p), rmse(post.mean(st))

    finite, before, after = jax.jit(jax.vmap(one))(params, xs, ys)
    return np.asarray(finite), np.asarray(before), np.asarray(after)


@pytest.mark.parametrize("rule", ["bong", "blr"])
def test_diag_rows_of_the_regression_grid_are_finite_on_four_seeds(rule):
    """The grid's diagonal rows at ``DIAG_INIT_COV`` pass the check (κ0 < 2) and stay finite for 400 steps on every
    seed, fitting the stream better than the initial network; the same rows at the grid's σ0² = 1 (all the grid had
    before) are flagged κ0 > 2 by the check and go non-finite on every seed."""
    model, xs, ys, params = _stream()
    grid = [m for m in bench.method_grid("regression", 10, 10, bench.DIAG_INIT_COV)
            if m["family"] == "diag" and m["rule"] == rule]
    assert [m.get("init_cov", 1.0) for m in grid] == [1.0, bench.DIAG_INIT_COV]
    p0 = jax.tree_util.tree_map(lambda a: a[0], params)
    for m in grid:
        post = bong(model.apply, Gaussian(0.1), **m)
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            kappa0 = check_step(post, post.init(p0), xs[0, :100], ys[0, :100])
        finite, before, after = _run_seeds(post, model, xs, ys, params)
        if "init_cov" in m:  # the stable cell
            assert kappa0 < 2, kappa0
            assert finite.all(), finite
            assert np.all(after < before), (before, after)
        else:  # σ0² = 1: unstable by construction, and it does diverge
            assert kappa0 > 2, kappa0
            assert not finite.any(), finite
