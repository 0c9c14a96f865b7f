"""Bayesian optimisation with online neural surrogates: the ask/tell :class:`BayesOpt` and :func:`optimize`.

.. code-block:: python

   opt = bk.BayesOpt(bounds=[(-5, 10), (0, 15)], surrogate="hilofi", acquisition="thompson", direction="minimize")
   x = opt.ask(); opt.tell(x, f(x)); opt.best; opt.history; opt.save("run.bk"); bk.BayesOpt.load("run.bk")
   res = bk.bo.optimize(f, bounds, n_evals=50, surrogate="hilofi", acquisition="ei")
   res = bk.bo.optimize(f, bounds, n_evals=50, checkpoint="run.bk")  # resumable: re-run the same call to continue
   opt = bk.BayesOpt(bounds, surrogate="gp", acquisition="ei")   # exact GP baseline (banditkit.bo.gp)

   from banditkit.bo import space                                # typed search spaces: ask() gives a dict
   opt = bk.BayesOpt(space={"lr": space.Float(1e-4, 1.0, log=True), "depth": space.Int(2, 12),
                            "loss": space.Categorical(["log_loss", "exponential"])}, direction="maximize")

The parts: :mod:`~banditkit.bo.space` (search spaces and their encoding), :mod:`~banditkit.bo.surrogate` (the
model contract; :mod:`~banditkit.bo.surrogate_nn`, :mod:`~banditkit.bo.surrogate_gp`),
:mod:`~banditkit.bo.acquisition`, :mod:`~banditkit.bo.search`, :mod:`~banditkit.bo.trust_region`,
:mod:`~banditkit.bo.propose` (the proposal step, a pure function), :mod:`~banditkit.bo.points` (points in the user's
form and in the unit cube), :mod:`~banditkit.bo.auto` (``surrogate="auto"``), :mod:`~banditkit.bo.optimizer` (the
ask/tell state), :mod:`~banditkit.bo.persist` (save / load),
:mod:`~banditkit.bo.loop` (:func:`optimize`, resumable runs).
"""

from banditkit.bo import gp, resume, space
from banditkit.bo.loop import BOResult, optimize
from banditkit.bo.optimizer import ACQUISITIONS, BayesOpt
from banditkit.bo.search import sobol_points
from banditkit.bo.snapshot import Snapshot
from banditkit.bo.space import Categorical, Float, Int, Space

__all__ = ["ACQUISITIONS", "BayesOpt", "BOResult", "Categorical", "Float", "Int", "Snapshot", "Space", "gp", "optimize",
           "resume", "space", "sobol_points"]
