"""HiLoFi's wide last layer at scale: which forms factor the ``D_ℓ × D_ℓ`` block per step, and ``rank_last``.

The compiled ``predict`` + ``update`` is inspected, not timed: XLA's cost analysis counts the GEMM flops, and the
HLO text names every LAPACK call with its operand shape, so a factorisation (Cholesky, QR, eigh) of the
``(D_ℓ, D_ℓ)`` block is found by shape.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from banditkit.likelihoods import Gaussian
from banditkit.models.nets import MLP
from banditkit.posteriors import hilofi, lolofi

WIDTH = 400  # the head reads 400 features + a bias: D_ℓ = 401


def _model():
    model = MLP(features=(8, WIDTH), out=1)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros(5))
    return model, params


def _compiled_step(post, params):
    """``(flops, HLO text)`` of the jitted ``update(predict(state))`` for one scalar observation."""
    state = post.init(params)
    step = jax.jit(lambda s, x, y: post.update(post.predict(s), x, y))
    compiled = step.lower(state, jnp.ones(5), jnp.ones(1)).compile()
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float(cost.get("flops", 0.0)), compiled.as_text()


def _lapack_on_block(hlo: str, d: int) -> list[str]:
    """The LAPACK custom calls of ``hlo`` whose line mentions a ``(d, d)`` array."""
    return [line for line in hlo.splitlines()
            if 'custom_call_target="lapack_' in line and re.search(rf"\[{d},{d}\]", line)]


@pytest.mark.parametrize("kw", [dict(dynamics_cov=1e-3), dict(dynamics_cov_last=1e-3, forgetting=0.9),
                                dict(dynamics_cov=1e-3, dynamics_mode="gain"), dict()])
def test_default_last_layer_form_does_no_cubic_work_per_step(kw):
    """``last_cov="auto"`` (dense with q_ℓ > 0, square root with q_ℓ = 0): the step's work on the last layer is
    ``O(D_ℓ² C)`` — no factorisation of the block and far fewer flops than one ``D_ℓ³`` product."""
    model, params = _model()
    d = WIDTH + 1
    post = hilofi(model.apply, Gaussian(0.1), rank=3, **kw)
    flops, hlo = _compiled_step(post, params)
    assert _lapack_on_block(hlo, d) == []
    assert flops < d**3 / 20, (post.hyper["last_cov"], flops)


@pytest.mark.parametrize("mode", ["carry", "gain"])
def test_square_root_form_with_dynamics_noise_refactors_the_block(mode):
    """The documented cost of ``last_cov="sqrt"`` with ``q_ℓ > 0``: a square root of ``γ²UᵀU + qI`` (carry, in
    ``predict``) or of the Joseph form (gain, in ``update``) is an ``O(D_ℓ³)`` refactorisation every step — the
    reason ``"auto"`` picks the dense form when ``q_ℓ > 0``."""
    model, params = _model()
    d = WIDTH + 1
    post = hilofi(model.apply, Gaussian(0.1), rank=3, dynamics_cov=1e-3, last_cov="sqrt", dynamics_mode=mode)
    flops, hlo = _compiled_step(post, params)
    assert _lapack_on_block(hlo, d) != []
    assert flops > d**3


def test_rank_last_is_lolofi_with_a_low_rank_head():
    """``hilofi(rank_last=r)`` is LoLoFi (one code path): the same name, state and steps as ``lolofi``, a ``(r, D_ℓ)``
    head factor, and no ``D_ℓ × D_ℓ`` array anywhere in the step."""
    model, params = _model()
    d = WIDTH + 1
    kw = dict(rank=3, rank_last=4, dynamics_cov=1e-3)
    a, b = hilofi(model.apply, Gaussian(0.1), **kw), lolofi(model.apply, Gaussian(0.1), **kw)
    assert a.name == b.name == "lolofi" and a.hyper == b.hyper
    sa, sb = a.init(params), b.init(params)
    assert sa.cov_last.basis.shape == (4, d) and sa.cov_last.mix.shape == (4, 4)
    # each backend's step jitted on its own (one compiled program each instead of every primitive of the 401-wide
    # step run one by one); equal programs give equal bits, different ones would not
    step_a, step_b = (jax.jit(lambda s, x, y, p=p: p.update(p.predict(s), x, y)) for p in (a, b))
    rng = np.random.default_rng(0)
    for _ in range(3):
        x, y = jnp.asarray(rng.normal(size=5), jnp.float32), jnp.asarray(rng.normal(size=1), jnp.float32)
        sa, sb = step_a(sa, x, y), step_b(sb, x, y)
    for u, v in zip(jax.tree_util.tree_leaves(sa), jax.tree_util.tree_leaves(sb), strict=True):
        np.testing.assert_array_equal(u, v)
    _, hlo = _compiled_step(a, params)
    assert f"[{d},{d}]" not in hlo


def test_scale_1m_study_runs_at_a_small_size(tmp_path):
    """``python -m benchmarks study scale_1m`` end to end on the 10k MLP: every piece has XLA counts and a time."""
    import pandas as pd

    from benchmarks.studies import scale_1m

    assert scale_1m.main(["--configs", "mlp10k", "--backends", "hilofi,lrkf", "--rounds", "1", "--reps", "1",
                          "--out", str(tmp_path)]) == 0
    prof = pd.read_csv(tmp_path / "scale_1m_profile.csv")
    assert set(prof.piece[prof.backend == "hilofi"]) == {"step", "linearize", "hidden_project", "hidden_update",
                                                         "last_project", "last_update", "predict", "sample"}
    assert set(prof.piece[prof.backend == "lrkf"]) == {"step", "linearize", "project", "update", "predict", "sample"}
    assert (prof.ms > 0).all() and (prof.mbytes > 0).all() and prof.params.eq(10_465).all()
    step = prof[(prof.backend == "hilofi") & (prof.piece == "step")].iloc[0]
    assert step.traffic_floor_ms > step.grad_ms and step.suite_floor_ms > step.grad_ms
    scal = pd.read_csv(tmp_path / "scale_1m_scaling.csv")
    assert set(scal.backend) == {"hilofi", "lrkf"} and scal.exponent_time.isna().all()  # one size: no exponent
    qt = pd.read_csv(tmp_path / "scale_1m_qterm.csv").set_index("variant")
    assert set(qt.index) == {"current", "two_dots", "stacked", "rows"} and qt.loc["current", "ratio"] == 1.0
    assert (qt.max_abs_diff < 1e-4).all()  # the same pass, four ways
    with pytest.raises(SystemExit):
        scale_1m.main(["--configs", "lenet"])
    with pytest.raises(SystemExit):
        scale_1m.main(["--parts", "profile,nothing"])
