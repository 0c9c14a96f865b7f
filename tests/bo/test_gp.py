"""Exact GP surrogate (``banditkit.bo.gp``) and ``BayesOpt(surrogate="gp")``.

Oracles: the GP predictive and log marginal likelihood against a NumPy closed form in float64 (fixed
hyper-parameters); FIFO buffering; MAP fitting improves the LML; exact save/load resume.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import banditkit as bk
from banditkit.bo import gp
from banditkit.environments.bo_functions import make_function

BRANIN = make_function("branin")


def _params(dim, ls, sf2=1.3, sn2=0.05, c=0.2):
    return gp.GPParams(jnp.log(jnp.asarray(ls, jnp.float64)), jnp.log(jnp.asarray(sf2, jnp.float64)),
                       jnp.log(jnp.asarray(sn2, jnp.float64)), jnp.asarray(c, jnp.float64))


def _numpy_matern(a, b, ls, sf2):
    r = np.sqrt((((a[:, None, :] - b[None, :, :]) / ls) ** 2).sum(-1))
    return sf2 * (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r)


def test_predictive_and_lml_equal_numpy_closed_form():
    rng = np.random.default_rng(0)
    x, xq = rng.random((11, 3)), rng.random((7, 3))
    y = np.sin(5 * x).sum(1)
    ls, sf2, sn2, c = np.array([0.3, 0.5, 0.8]), 1.3, 0.05, 0.2
    with jax.enable_x64(True):
        xp, yp, mask = gp.pad(x, y)
        assert xp.shape == (16, 3) and float(mask.sum()) == 11  # padded to the capacity
        st = gp.condition(xp, yp, mask, _params(3, ls, sf2, sn2, c), jitter=0.0)
        mean, var = gp.predict(st, jnp.asarray(xq))
        _, var_y = gp.predict(st, jnp.asarray(xq), include_noise=True)
        mj, cov = gp.predict_joint(st, jnp.asarray(xq))
        lml = gp.log_marginal_likelihood(st.params, st.x, st.y, st.mask, jitter=0.0)
    K = _numpy_matern(x, x, ls, sf2) + sn2 * np.eye(11)
    ks = _numpy_matern(x, xq, ls, sf2)
    m_ref = c + ks.T @ np.linalg.solve(K, y - c)
    cov_ref = _numpy_matern(xq, xq, ls, sf2) - ks.T @ np.linalg.solve(K, ks)
    _, logdet = np.linalg.slogdet(K)
    lml_ref = -0.5 * (y - c) @ np.linalg.solve(K, y - c) - 0.5 * logdet - 5.5 * np.log(2 * np.pi)
    assert mean.dtype == jnp.float64
    np.testing.assert_allclose(mean, m_ref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(var, np.diag(cov_ref), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(var_y, np.diag(cov_ref) + sn2, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(mj, m_ref, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(cov, cov_ref, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(float(lml), lml_ref, rtol=1e-8)


def test_joint_draws_have_the_posterior_moments():
    rng = np.random.default_rng(1)
    x, xq = rng.random((6, 2)), rng.random((4, 2))
    with jax.enable_x64(True):
        st = gp.fit(x, np.cos(4 * x[:, 0]), _params(2, [0.4, 0.4]), optimize=False)
        keys = jax.random.split(jax.random.PRNGKey(0), 4000)
        draws = np.asarray(jax.jit(jax.vmap(lambda k: gp.sample_joint(k, st, jnp.asarray(xq))))(keys))
        m, cov = (np.asarray(a) for a in gp.predict_joint(st, jnp.asarray(xq)))
    sd = np.sqrt(np.max(np.diag(cov)))
    np.testing.assert_allclose(draws.mean(0), m, atol=4 * sd / np.sqrt(4000))
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.12 * sd**2)  # ~5 s.e. of a variance estimate


def test_fifo_buffer_keeps_the_last_points():
    x = np.arange(30, dtype=float)[:, None] / 30
    y = np.arange(30, dtype=float)
    with jax.enable_x64(True):
        xp, yp, mask = gp.pad(x, y, buffer=20)
        st = gp.fit(x, y, _params(1, [0.2]), buffer=20, optimize=False)
        ref = gp.fit(x[-20:], y[-20:], _params(1, [0.2]), optimize=False)
        q = jnp.linspace(0, 1, 9)[:, None]
        np.testing.assert_array_equal(gp.predict(st, q)[0], gp.predict(ref, q)[0])
        assert xp.shape == (32, 1) and float(mask.sum()) == 20
        np.testing.assert_array_equal(np.asarray(yp[:20]), y[10:])
    assert gp.capacity(1) == 16 and gp.capacity(16) == 16 and gp.capacity(17) == 32


def test_marginal_likelihood_fit_improves_lml_and_recovers_noise():
    rng = np.random.default_rng(2)
    x = rng.random((40, 2))
    f = np.sin(6 * x[:, 0]) + 0.1 * x[:, 1]  # varies along x0 only
    y = f + 0.1 * rng.normal(size=40)
    with jax.enable_x64(True):
        xp, yp, mask = gp.pad(x, y)
        p0 = gp.default_params(2)
        p1 = gp.fit_params(xp, yp, mask, p0, steps=100, use_prior=False)
        lml0 = float(gp.log_marginal_likelihood(p0, xp, yp, mask))
        lml1 = float(gp.log_marginal_likelihood(p1, xp, yp, mask))
    assert lml1 > lml0 + 10, (lml0, lml1)
    ls = np.exp(np.asarray(p1.log_lengthscale))
    assert ls[1] > 3 * ls[0], ls  # the irrelevant input gets the longer lengthscale (ARD)
    assert 0.003 < float(np.exp(p1.log_noise_var)) < 0.03  # true noise variance 0.01


def test_gp_bayesopt_beats_random_on_branin():
    """Branin, 2 seeds: 2 warm-up Sobol points + 14 EI steps (one padded capacity, so one compilation); random
    search gets the same 16 evaluations."""
    bo, rs = [], []
    for seed in range(2):
        res = bk.bo.optimize(lambda u: float(BRANIN.value(u)), [(0.0, 1.0)] * 2, n_evals=16, surrogate="gp",
                             acquisition="ei", direction="minimize", seed=seed, n_initial=2, n_candidates=256)
        bo.append(res.y - BRANIN.minimum)
        rs.append(float(np.min(BRANIN.value(np.random.default_rng(seed).random((16, 2))))) - BRANIN.minimum)
    assert max(bo) < 0.5 and np.mean(bo) < np.mean(rs) / 3, (bo, rs)


def test_gp_save_load_resumes_exactly(tmp_path):
    def quad(x):
        return float(np.sum((np.asarray(x) - np.array([0.3, 1.2])) ** 2))

    for acq in ("thompson", "ucb"):
        opt = bk.BayesOpt([(0.0, 1.0), (0.0, 2.0)], surrogate="gp", acquisition=acq, seed=4, n_initial=3,
                          n_candidates=256, surrogate_kwargs=dict(buffer_size=6))
        for _ in range(6):
            x = opt.ask()
            opt.tell(x, quad(x))
        pending = opt.ask(n=2)
        opt.save(tmp_path / f"{acq}.bk")
        again = bk.BayesOpt.load(tmp_path / f"{acq}.bk")
        assert again.surrogate == "gp" and again.surrogate_kwargs["buffer_size"] == 6
        np.testing.assert_array_equal(again.pending, opt.pending)
        for a, b in zip(jax.tree_util.tree_leaves(again.posterior[1]), jax.tree_util.tree_leaves(opt.posterior[1]),
                        strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        np.testing.assert_array_equal(again.ask(n=2), opt.ask(n=2))
        opt.tell(pending, [quad(p) for p in pending])
        again.tell(pending, [quad(p) for p in pending])
        np.testing.assert_array_equal(again.ask(), opt.ask())
        assert set(opt.history.source) >= {"initial", acq}


def test_gp_bad_arguments():
    with pytest.raises(TypeError, match="rejected"):
        bk.BayesOpt([(0, 1)], surrogate="gp", surrogate_kwargs=dict(rank=3))
    with pytest.raises(ValueError, match="buffer_size"):
        bk.BayesOpt([(0, 1)], surrogate="gp", surrogate_kwargs=dict(buffer_size=0))
    with pytest.raises(ValueError, match="no model"):
        bk.BayesOpt([(0, 1)], surrogate="gp", model=bk.models.MLP(features=(4,), out=1))
    with pytest.raises(ValueError, match="n >= 1"):
        gp.pad(np.zeros((0, 2)), np.zeros(0))
