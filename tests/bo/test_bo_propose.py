"""The split of ``BayesOpt`` (issue 72): the proposal step as a pure function (:func:`banditkit.bo.propose.propose`),
the user's form of points (:class:`banditkit.bo.points.Points`), and the read-only ``config`` / ``fit``."""

import jax
import numpy as np
import pytest

from banditkit.bo import BayesOpt, propose
from banditkit.bo.points import Points
from banditkit.bo.space import Categorical, Float, Int, Space

SPACE = {"x": Float(-1.0, 1.0), "k": Int(0, 9), "c": Categorical(["a", "b", "c"])}


def f(p):
    return (p["x"] - 0.3) ** 2 + 0.05 * (p["k"] - 6) ** 2 + (0.0 if p["c"] == "b" else 1.0)


def test_propose_is_pure_and_is_what_ask_returns():
    opt = BayesOpt(space=SPACE, surrogate="gp", acquisition="ei", direction="minimize", seed=0, n_initial=4,
                   n_candidates=64)
    for _ in range(6):
        p = opt.ask()
        opt.tell(p, f(p))
    opt.ask()  # one pending point: the constant liar is part of the proposal
    model, data, points, candidates = opt.proposal_inputs()
    before = [a.copy() for a in (data.u, data.s, data.pending, data.failed)]
    with opt.snapshot().surrogate.precision():
        a = propose.propose(2, model, data, points, candidates, propose.key_stream(jax.random.PRNGKey(3)))
        b = propose.propose(2, model, data, points, candidates, propose.key_stream(jax.random.PRNGKey(3)))
    np.testing.assert_array_equal(a, b)  # the same inputs and keys: the same points
    for x, y in zip(before, (data.u, data.s, data.pending, data.failed), strict=True):
        np.testing.assert_array_equal(x, y)  # nothing it was given changed
    taken = np.concatenate([data.u, data.pending])
    assert not any(propose.near(taken, row, opt.config["min_distance"]) for row in a)
    assert not propose.near(a[:1], a[1], opt.config["min_distance"])
    with opt.snapshot().surrogate.precision():  # ask(seed=7) draws from (the optimiser's seed, 7): the same keys
        want = propose.propose(2, model, data, points, candidates,
                               propose.key_stream(jax.random.fold_in(jax.random.PRNGKey(0), 7)))
    assert opt.ask(n=2, seed=7) == points.external(want, batch=True)


def test_points_round_trip_and_errors():
    box = Points(Space.from_bounds(np.array([[-5.0, 10.0], [0.0, 15.0]])), named=False)
    x = np.array([[2.5, 7.5], [-5.0, 15.0]])
    u = box.internal(x)
    np.testing.assert_allclose(u, [[0.5, 0.5], [0.0, 1.0]])
    np.testing.assert_allclose(box.external(u), x)
    assert box.is_single(x[0]) and not box.is_single(x)
    typed = Points(Space(SPACE), named=True)
    p = {"x": 0.25, "k": 3, "c": "c"}
    assert typed.external(typed.internal(p)[0]) == p and typed.is_single(p)
    assert typed.external(np.zeros((0, typed.dim)), batch=True) == []
    with pytest.raises(ValueError, match="dict"):
        typed.internal(3.0)


def test_config_and_fit_are_read_only():
    opt = BayesOpt(space=SPACE, surrogate="gp", acquisition="ei", direction="minimize", seed=0, n_initial=4,
                   n_candidates=64)
    cfg = opt.config
    assert cfg["maximizer"] == "lbfgs" and cfg["n_candidates"] == 64
    with pytest.raises(TypeError):
        cfg["maximizer"] = "ascent"
    cfg["features"].append(1)  # a copy: the optimiser's own is untouched
    assert opt.config["features"] == [180, 180, 180]
    assert opt.fit.state is None and opt.fit.n_fed == 0
    with pytest.raises(AttributeError):
        opt.fit = None
