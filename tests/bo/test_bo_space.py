"""Typed search spaces (``banditkit.bo.space``): the encoding into the unit cube and back, snapping, sampling,
neighbour moves, configurations, and the errors for bad spaces and bad values."""

import json

import numpy as np
import pytest

from banditkit.bo.space import Categorical, Float, Int, Space, as_space

PARAMS = {
    "f": Float(-2.0, 3.0),
    "flog": Float(1e-4, 1.0, log=True),
    "fstep": Float(0.0, 1.0, step=0.1),
    "i": Int(2, 12),
    "ilog": Int(1, 1000, log=True),
    "istep": Int(0, 100, step=5),
    "c": Categorical(["relu", "tanh", None, 3, 2.5, True]),
}


@pytest.fixture(scope="module")
def sp():
    return Space(PARAMS)


def test_dim_order_and_masks(sp):
    assert sp.names == tuple(PARAMS)
    assert sp.dim == 6 + 6  # six one-coordinate parameters, a six-way one-hot
    assert sp.continuous_mask.tolist() == [True, True] + [False] * 10
    assert [s.stop - s.start for s in sp.slices] == [1, 1, 1, 1, 1, 1, 6]


@pytest.mark.parametrize("name,values", [
    ("f", [-2.0, 0.123456789, 3.0]),
    ("flog", [1e-4, 3.3e-3, 0.5, 1.0]),
    ("fstep", [0.0, 0.1, 0.3, 0.7, 1.0]),
    ("i", [2, 7, 12]),
    ("ilog", [1, 2, 17, 999, 1000]),
    ("istep", [0, 5, 55, 100]),
    ("c", ["relu", "tanh", None, 3, 2.5, True]),
])
def test_round_trip_every_type(sp, name, values):
    base = {"f": 0.0, "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 10, "c": "tanh"}
    for v in values:
        point = dict(base, **{name: v})
        u = sp.encode(point)
        assert u.shape == (sp.dim,) and np.all((u >= 0) & (u <= 1))
        back = sp.decode(u)
        assert type(back[name]) is type(v)
        if isinstance(v, float):
            assert back[name] == pytest.approx(v, rel=1e-12, abs=1e-15)
        else:
            assert back[name] == v
        assert np.allclose(sp.snap(u), u, atol=1e-12)  # an encoding is already snapped
        assert sp.decode(sp.encode(back)) == back


def test_decoded_types(sp):
    for row in sp.decode(sp.sample(0, 50)):
        assert type(row["f"]) is float and type(row["flog"]) is float and type(row["fstep"]) is float
        assert type(row["i"]) is int and type(row["ilog"]) is int and type(row["istep"]) is int
        assert row["c"] in PARAMS["c"].choices


def test_snapping_never_leaves_the_range_and_is_idempotent(sp):
    rng = np.random.default_rng(1)
    u = np.concatenate([rng.random((500, sp.dim)), rng.normal(0.5, 2.0, (500, sp.dim)),
                        np.zeros((1, sp.dim)), np.ones((1, sp.dim))])
    s = sp.snap(u)
    assert np.all((s >= 0) & (s <= 1))
    assert np.array_equal(sp.snap(s), s)
    for row in sp.decode(u):
        for name, p in sp.items():
            v = row[name]
            if isinstance(p, Categorical):
                assert v in p.choices
                continue
            assert p.lo <= v <= p.hi
            if p.step is not None:
                k = (v - p.lo) / p.step
                assert abs(k - round(k)) < 1e-8
    one_hot = s[:, sp.slices[-1]]
    assert np.array_equal(one_hot.sum(1), np.ones(len(u))) and set(np.unique(one_hot)) == {0.0, 1.0}


def test_step_values_are_clean_decimals():
    p = Space({"a": Float(0.0, 1.0, step=0.1)})
    assert [r["a"] for r in p.decode(p.snap(np.linspace(0, 1, 11)[:, None] * 0.999 + 0.0005))] == [
        0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]


def test_uniform_sampling_over_values():
    sp = Space({"c": Categorical(["a", "b", "c"]), "i": Int(1, 3), "s": Float(0, 1, step=0.5)})
    rows = sp.decode(sp.sample(3, 3000))
    for name, vals in [("c", ["a", "b", "c"]), ("i", [1, 2, 3]), ("s", [0.0, 0.5, 1.0])]:
        counts = np.array([sum(r[name] == v for r in rows) for v in vals])
        assert np.all(np.abs(counts - 1000) < 120), (name, counts)  # ends as likely as the middle


def test_log_scale_is_log_uniform():
    sp = Space({"lr": Float(1e-4, 1.0, log=True)})
    x = np.array([r["lr"] for r in sp.decode(sp.sample(0, 4000))])
    assert abs(np.mean(x < 1e-2) - 0.5) < 0.04  # half of the decades lie below 1e-2


def test_neighbors_reach_every_category_and_value(sp):
    u = sp.encode({"f": 0.0, "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 10, "c": "tanh"})
    nb = sp.neighbors(u)
    rows = sp.decode(nb)
    assert {r["c"] for r in rows} == set(PARAMS["c"].choices)  # every choice one move away
    assert {r["i"] for r in rows} == set(range(2, 13))  # 11 values: all reachable in one move
    for r in rows:  # exactly one discrete parameter changed; continuous ones never move
        changed = [k for k in r if r[k] != sp.decode(u)[k]]
        assert len(changed) == 1 and changed[0] not in ("f", "flog")
    # a long ordinal grid: adjacent values plus spread-out ones, deterministic without rng
    ilog = sorted(r["ilog"] for r in rows if r["ilog"] != 10)
    assert 9 in ilog and 11 in ilog and min(ilog) < 100 < max(ilog) and len(ilog) == 16
    assert np.array_equal(sp.neighbors(u), nb)
    drawn = sp.neighbors(u, rng=0)
    assert np.array_equal(drawn, sp.neighbors(u, rng=0)) and drawn.shape == nb.shape
    assert Space({"x": Float(0, 1)}).neighbors(np.array([0.3])).shape == (0, 1)


def test_config_round_trip_through_json(sp):
    cfg = json.loads(json.dumps(sp.to_config()))
    assert Space.from_config(cfg) == sp
    assert Space.from_config([dict(name=n, **c) for n, c in cfg.items()]) == sp
    assert as_space(cfg) == sp
    assert Space.from_config({"a": {"type": "float", "lo": 0, "hi": 2}}) == Space({"a": Float(0, 2)})


def test_a_box_is_a_space_of_floats():
    sp = as_space([(-5, 10), (0, 15)])
    assert sp.names == ("x0", "x1") and sp.is_box
    assert np.array_equal(sp.bounds, [[-5.0, 10.0], [0.0, 15.0]])
    assert np.allclose(sp.encode({"x0": 2.5, "x1": 15.0}), [0.5, 1.0])
    assert as_space([("a", Float(0, 1)), ("b", Int(0, 3))]).names == ("a", "b")
    assert as_space(sp) is sp
    assert not Space(PARAMS).is_box
    with pytest.raises(ValueError, match="only a space of plain Floats"):
        _ = Space(PARAMS).bounds


def test_single_value_parameters():
    sp = Space({"a": Float(2.0, 2.0), "b": Int(4, 4), "c": Categorical(["only"])})
    assert sp.decode(sp.sample(0, 1)[0]) == {"a": 2.0, "b": 4, "c": "only"}


@pytest.mark.parametrize("make,match", [
    (lambda: Float(1.0, 0.0), "empty range"),
    (lambda: Int(5, 4), "empty range"),
    (lambda: Float(0.0, 1.0, log=True), "log scale needs lo > 0"),
    (lambda: Float(-1.0, 1.0, log=True), "log scale needs lo > 0"),
    (lambda: Int(0, 10, log=True), "log scale needs lo > 0"),
    (lambda: Float(1e-3, 1.0, log=True, step=0.1), "log and step cannot be combined"),
    (lambda: Int(1, 10, log=True, step=3), "log and step cannot be combined"),
    (lambda: Float(0.0, 1.0, step=0.3), "not a multiple of step; use hi=0.9"),
    (lambda: Int(0, 10, step=3), "not a multiple of step; use hi=9"),
    (lambda: Float(0.0, 1.0, step=0.0), "step must be > 0"),
    (lambda: Int(0, 10, step=0), "step must be a positive integer"),
    (lambda: Int(0.5, 3), "lo must be an integer"),
    (lambda: Float(0.0, float("inf")), "hi must be a finite number"),
    (lambda: Categorical([]), "choices is empty"),
    (lambda: Categorical("abc"), "choices must be a list"),
    (lambda: Categorical(["a", "b", "a"]), "appears twice"),
    (lambda: Categorical([1, 1.0]), "appears twice"),
    (lambda: Categorical([[1, 2]]), "is not None, a bool, a number or a string"),
    (lambda: Space([("a", Float(0, 1)), ("a", Int(0, 1))]), "duplicate parameter name 'a'"),
    (lambda: Space({}), "no parameters"),
    (lambda: Space({"a": (0, 1)}), "must be Float"),
    (lambda: Space([("", Float(0, 1))]), "non-empty strings"),
    (lambda: Space.from_config({"a": {"type": "float", "low": 0}}), "missing \\['high'\\]"),
    (lambda: Space.from_config({"a": {"type": "float", "low": 0, "high": 1, "base": 2}}), "unknown keys \\['base'\\]"),
    (lambda: Space.from_config({"a": {"type": "complex"}}), "'type' must be one of"),
    (lambda: Space.from_config({"a": {"type": "categorical"}}), "exactly the key 'choices'"),
])
def test_bad_spaces_get_clear_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bool_and_int_choices_are_distinct():
    """``1`` and ``True`` are different choices (Python's ``==`` says they are equal); ``1.0`` is the choice ``1``."""
    c = Categorical([1, True, "1"])
    assert [c.index(v) for v in (1, True, "1", 1.0)] == [0, 1, 2, 0]


@pytest.mark.parametrize("values,match", [
    ({"f": 0.0, "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 10, "c": "sigmoid"},
     "'c': 'sigmoid' is not one of its choices"),
    ({"f": 3.5, "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 10, "c": "tanh"},
     "'f': 3.5 is outside its range \\[-2.0, 3.0\\]"),
    ({"f": 0.0, "flog": 2.0, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 10, "c": "tanh"}, "outside its range"),
    ({"f": 0.0, "flog": 0.01, "fstep": 0.55, "i": 3, "ilog": 10, "istep": 10, "c": "tanh"}, "not on the grid"),
    ({"f": 0.0, "flog": 0.01, "fstep": 0.5, "i": 3.5, "ilog": 10, "istep": 10, "c": "tanh"}, "expected an integer"),
    ({"f": 0.0, "flog": 0.01, "fstep": 0.5, "i": 13, "ilog": 10, "istep": 10, "c": "tanh"}, "outside its range"),
    ({"f": 0.0, "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 11, "c": "tanh"}, "not on the grid"),
    ({"f": "0", "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 10, "c": "tanh"}, "expected a finite number"),
    ({"f": float("nan"), "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 10, "c": "tanh"},
     "expected a finite number"),
    ({"f": 0.0, "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "istep": 10, "c": "tanh", "extra": 1},
     "unknown parameter\\(s\\) \\['extra'\\]"),
    ({"f": 0.0, "flog": 0.01, "fstep": 0.5, "i": 3, "ilog": 10, "c": "tanh"}, "missing parameter\\(s\\) \\['istep'\\]"),
    ([0.0, 0.01], "expected a dict"),
])
def test_bad_values_get_clear_errors(sp, values, match):
    with pytest.raises(ValueError, match=match):
        sp.encode(values) if isinstance(values, dict) else sp.validate(values)


def test_integral_floats_are_accepted_as_ints(sp):
    point = {"f": 0, "flog": 0.01, "fstep": 0.5, "i": 3.0, "ilog": np.int64(10), "istep": 10, "c": np.str_("tanh")}
    typed = sp.validate(point)
    assert typed["i"] == 3 and type(typed["i"]) is int and type(typed["ilog"]) is int and type(typed["f"]) is float
    assert typed["c"] == "tanh"


def test_bad_encoded_points(sp):
    with pytest.raises(ValueError, match="shape"):
        sp.decode(np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        sp.snap(np.full(sp.dim, np.nan))
