"""Adapters to other tools' interfaces, each behind an optional extra and imported only when asked for:

- :mod:`banditkit.integrations.optuna` — :class:`~banditkit.integrations.optuna.BanditkitSampler`, banditkit's
  Bayesian optimiser as an Optuna sampler (``pip install banditkit[optuna]``).
"""
