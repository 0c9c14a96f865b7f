"""Bayesian optimisation with online neural surrogates: the ask/tell :class:`BayesOpt` and :func:`optimize`.

```python
opt = bk.BayesOpt(bounds=[(-5, 10), (0, 15)], surrogate="hilofi", acquisition="thompson", direction="minimize")
x = opt.ask(); opt.tell(x, f(x)); opt.best; opt.history; opt.save("run.bk"); bk.BayesOpt.load("run.bk")
res = bk.bo.optimize(f, bounds, n_evals=50, surrogate="hilofi", acquisition="ei")
res = bk.bo.optimize(f, bounds, n_evals=50, checkpoint="run.bk")  # resumable: re-run the same call to continue
opt = bk.BayesOpt(bounds, surrogate="gp", acquisition="ei")   # exact GP baseline (banditkit.bo.gp)
```
"""

from banditkit.bo import gp, resume
from banditkit.bo.optimizer import ACQUISITIONS, BayesOpt, BOResult, optimize
from banditkit.bo.search import sobol_points

__all__ = ["ACQUISITIONS", "BayesOpt", "BOResult", "gp", "optimize", "resume", "sobol_points"]
