"""``acquisition.neighbors_of`` (the cached neighbour moves of the mixed-space search) equals ``Space.neighbors``.

Oracle: ``Space.neighbors`` row for row, on a space with a float, a log-float, a short and a long integer grid, a
stepped float and a categorical, at random points, twice (the second call is served from the cache).
"""

import numpy as np

from banditkit.bo import acquisition
from banditkit.bo.space import Categorical, Float, Int, Space


def test_cached_neighbours_equal_space_neighbors():
    space = Space({"a": Float(0.0, 1.0), "b": Int(0, 3), "c": Int(0, 40), "d": Categorical(["x", "y", "z"]),
                   "e": Float(1e-3, 1.0, log=True), "f": Float(0.0, 1.0, step=0.25)})
    rng = np.random.default_rng(0)
    xs = rng.random((6, space.dim))
    xs[3] = xs[0]  # a repeated point
    for _ in range(2):
        got = acquisition.neighbors_of(space, xs, 8)
        want = np.stack([space.neighbors(x, 8) for x in xs])
        assert got.shape == want.shape and got.shape[1] > 0
        np.testing.assert_array_equal(got, want)
    xs[:, 0] = rng.random(6)  # same discrete values, new continuous ones: cached rows, new base
    np.testing.assert_array_equal(acquisition.neighbors_of(space, xs, 8),
                                  np.stack([space.neighbors(x, 8) for x in xs]))
