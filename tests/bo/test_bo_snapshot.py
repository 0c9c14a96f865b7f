"""``BayesOpt.snapshot()`` / ``restore()`` (issue 72 item 3): the public, read-only view of an optimiser that
persistence, resumable runs, tests and studies read instead of its private attributes."""

import dataclasses
import pathlib

import jax
import numpy as np
import pytest

from banditkit import checkpoint
from banditkit.bo import BayesOpt
from banditkit.bo.space import Categorical, Float, Int

SPACE = {"x": Float(-1.0, 1.0), "k": Int(0, 9), "c": Categorical(["a", "b", "c"])}
FIXTURES = pathlib.Path(__file__).parent / "fixtures"
GP = dict(space=SPACE, surrogate="gp", acquisition="ei", direction="minimize", seed=0, n_initial=4, n_candidates=64)


def f(p):
    return (p["x"] - 0.3) ** 2 + 0.05 * (p["k"] - 6) ** 2 + (0.0 if p["c"] == "b" else 1.0)


def run(opt, n):
    for i in range(n):
        p = opt.ask()
        if i == 4:
            opt.fail(p)
        else:
            opt.tell(p, f(p))
    opt.ask()  # one pending suggestion
    return opt


def test_snapshot_is_a_read_only_copy_of_the_state():
    opt = run(BayesOpt(**GP), 7)
    snap = opt.snapshot()
    d = opt.space.dim
    assert snap.u.shape == (6, d) and snap.y.shape == (6,) and len(snap.source) == 6
    assert snap.pending.shape == (1, d) and snap.failed.shape == (1, d) and snap.sign == -1.0
    np.testing.assert_array_equal(snap.y, opt.history.y.to_numpy())
    np.testing.assert_array_equal(snap.s, -snap.y)
    assert opt.space.decode(snap.pending) == opt.pending and snap.fit is opt.fit and snap.phase == ("gp", "ei")
    assert snap.settings["seed"] == 0 and snap.settings["config"]["n_candidates"] == 64
    with pytest.raises(ValueError, match="read-only"):
        snap.u[0, 0] = 0.5
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.y = np.zeros(6)
    with pytest.raises(TypeError):
        snap.settings["seed"] = 1
    p = opt.pending[0]
    opt.tell(p, f(p))  # the optimiser moves on; the snapshot stays what it was
    assert snap.y.shape == (6,) and snap.pending.shape == (1, d) and opt.snapshot().y.shape == (7,)


@pytest.mark.parametrize("kw", [GP, dict(space=SPACE, surrogate="lofi", direction="minimize", seed=3, n_initial=4,
                                         features=(16, 16), n_candidates=64)])
def test_restore_continues_exactly(kw):
    """A fresh optimiser with the same settings, restored from a snapshot, asks what the original asks."""
    opt = run(BayesOpt(**kw), 8)
    twin = BayesOpt(**kw)
    twin.restore(opt.snapshot())
    assert twin.pending == opt.pending and twin.n_failed == 1 and twin.history.equals(opt.history)
    assert twin.ask(n=2) == opt.ask(n=2)


def test_restore_refuses_a_snapshot_of_another_optimiser():
    opt = run(BayesOpt(**GP), 6)
    snap = opt.snapshot()
    with pytest.raises(ValueError, match="dimensional"):
        BayesOpt([(0.0, 1.0)], surrogate="gp", direction="minimize", n_candidates=64).restore(snap)
    with pytest.raises(ValueError, match="sign"):
        BayesOpt(**dict(GP, direction="maximize")).restore(snap)
    with pytest.raises(ValueError, match="surrogate / acquisition"):
        BayesOpt(**dict(GP, acquisition="pi")).restore(snap)
    with pytest.raises(ValueError, match="without a fit"):
        opt.restore(snap.replace(fit=None))
    np.testing.assert_array_equal(opt.snapshot().u, snap.u)  # nothing changed


@pytest.mark.parametrize("name", ["bayesopt_gp_space_v2.npz", "bayesopt_lofi_box_v1.npz"])
def test_a_file_written_before_snapshot_existed_loads_and_saves_the_same(name, tmp_path):
    """Files written by the code before ``snapshot`` / ``restore`` (commit 679db96: a typed space with the GP,
    format 2; a box with LoFi, format 1; each with evaluations, a failed point and a pending suggestion) load, and
    saving them again writes the same settings, data, random state and surrogate arrays."""
    src = FIXTURES / name
    opt = BayesOpt.load(src)
    assert opt.n_evals == 6 and opt.n_failed == 1 and len(opt.pending) == 1
    opt.save(tmp_path / "again.npz")
    (old, h_old), (new, h_new) = checkpoint.load(src), checkpoint.load(tmp_path / "again.npz")
    assert h_new["meta"] == h_old["meta"] and h_new["leaves"] == h_old["leaves"]
    assert jax.tree_util.tree_structure(new) == jax.tree_util.tree_structure(old)
    for a, b in zip(jax.tree_util.tree_leaves(old), jax.tree_util.tree_leaves(new), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
