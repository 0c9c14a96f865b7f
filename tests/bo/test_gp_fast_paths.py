"""The GP's fast paths (issue 71 item 1, speed): the closed-form hyper-parameter gradient and the GEMM predictions.

Oracles: the gradient of ``−(LML + log prior) / n`` by reverse-mode autodiff through the Cholesky factor (the
pre-speed-up objective, :func:`banditkit.bo.gp.log_marginal_likelihood`), on padded data; predictions with the
stored ``U⁻¹`` against the triangular solve with ``U`` (``chol_inv=None``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.bo import gp


def _data(n=13, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d))
    y = np.sin(4 * x).sum(1)
    return x, (y - y.mean()) / y.std()


def test_closed_form_gradient_equals_autodiff_through_cholesky():
    x, y = _data()
    with jax.enable_x64(True):
        xp, yp, mask = gp.pad(x, y)
        assert float(mask.sum()) == 13 and xp.shape[0] == 16  # padded rows must not change the value or gradient
        for use_prior in (True, False):
            for shift in (0.0, 0.7):
                v = gp._pack(gp.default_params(3)) + shift * jnp.asarray([0.3, -0.5, 0.2, 0.4, 1.0, -0.3])

                def reference(v, use_prior=use_prior):
                    p = gp._unpack(v, 3)
                    lp = gp.log_prior(p) if use_prior else 0.0
                    return -(gp.log_marginal_likelihood(p, xp, yp, mask) + lp) / 13.0

                want_f, want_g = jax.value_and_grad(reference)(v)
                got_f, got_g = gp._objective_and_grad(v, xp, yp, mask, use_prior)
                np.testing.assert_allclose(float(got_f), float(want_f), rtol=1e-10)
                np.testing.assert_allclose(np.asarray(got_g), np.asarray(want_g), rtol=1e-7, atol=1e-9)


def test_predictions_with_stored_inverse_equal_the_triangular_solve():
    x, y = _data(n=9, d=2, seed=1)
    xq = np.random.default_rng(2).random((5, 2))
    with jax.enable_x64(True):
        xp, yp, mask = gp.pad(x, y)
        st = gp.condition(xp, yp, mask, gp.default_params(2))
        assert st.chol_inv is not None
        np.testing.assert_allclose(np.asarray(st.chol_inv @ st.chol), np.eye(16), atol=1e-8)
        slow = st._replace(chol_inv=None)
        for a, b in zip(gp.predict(st, jnp.asarray(xq)), gp.predict(slow, jnp.asarray(xq)), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)
        for a, b in zip(gp.predict_joint(st, jnp.asarray(xq)), gp.predict_joint(slow, jnp.asarray(xq)), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)


def test_compiled_fit_reaches_scipys_map():
    """Oracle: SciPy's L-BFGS-B on the same objective from the same starts (the pre-speed-up fit)."""
    rng = np.random.default_rng(3)
    x = rng.random((12, 2))
    y = np.sin(6 * x[:, 0]) + x[:, 1] ** 2 + 0.05 * rng.normal(size=12)
    y = (y - y.mean()) / y.std()
    with jax.enable_x64(True):
        xp, yp, mask = gp.pad(x, y)
        init = gp.GPParams(jnp.asarray([0.5, -1.0]), jnp.asarray(0.3), jnp.asarray(-3.0), jnp.asarray(0.1))
        ref = gp.fit_params(xp, yp, mask, init, optimizer="scipy")
        got = gp.fit_params(xp, yp, mask, init)  # the default: compiled

        def objective(p):
            return float(gp._objective_and_grad(gp._pack(p), xp, yp, mask, True)[0])

        assert objective(got) <= objective(ref) + 1e-7
        np.testing.assert_allclose(np.asarray(gp._pack(got)), np.asarray(gp._pack(ref)), atol=2e-3)
        lo, hi = (np.asarray(b) for b in gp._bounds(2, jnp.float64))
        assert np.all(np.asarray(gp._pack(got)) >= lo) and np.all(np.asarray(gp._pack(got)) <= hi)
        with pytest.raises(ValueError, match="optimizer must be one of"):
            gp.fit_params(xp, yp, mask, init, optimizer="adam")
