"""Saving and loading a :class:`~banditkit.bo.BayesOpt`: one portable file from which the run resumes exactly.

The file is a :mod:`banditkit.checkpoint` archive (``.npz`` arrays + a JSON header, no pickled code, written
atomically).  Its ``meta`` holds ``format = "banditkit.BayesOpt"``, ``version`` and:

- the settings (``settings`` of :class:`~banditkit.bo.snapshot.Snapshot`): ``bounds`` (a box) or ``space`` (a typed
  space's configuration, :meth:`Space.to_config`; format version 2), surrogate name and keyword arguments,
  acquisition, direction, seed, ``n_initial``, ``custom_model`` and ``config`` (every other option);
- the data: the unit-cube inputs ``u``, the values ``y``, the pending suggestions and the sources of both, the points
  whose evaluation failed (``failed``, :meth:`BayesOpt.fail`; absent in older files: none), as JSON
  float64 values (exact: JSON writes ``repr``; the archive would hand them back as JAX arrays, rounded to float32
  unless x64 is on);
- the random state: the Sobol position (the PRNG key is an array) and the trust region;
- the surrogate's fit: ``shift``, ``scale``, ``n_fed`` and what the surrogate adds (:meth:`Surrogate.meta`: the
  GP's hyper-parameters, from which its state is rebuilt by the same deterministic computation).

Everything is read from :meth:`BayesOpt.snapshot` and put back by :meth:`BayesOpt.restore`.  The arrays are the PRNG
``key`` and the surrogate's (:meth:`Surrogate.arrays`: a network filter's ``state``).
Files written before an option existed load with the value that option had then (``maximizer="ascent"``,
``trust_region=False``).
"""

from __future__ import annotations

import os
from typing import Any

from banditkit import checkpoint
from banditkit import posteriors as _posteriors
from banditkit.bo import trust_region as _tr
from banditkit.bo.snapshot import Snapshot

FORMAT = "banditkit.BayesOpt"
FORMAT_VERSION = 2  # 2: a typed search space (``space``); a box is still written as version 1
_OLD_DEFAULTS = dict(maximizer="ascent", trust_region=False)  # what a checkpoint without the key was made with
# BayesOpt arguments saved as its attributes of the same names (in the settings) and passed back as they are by load
ARGUMENTS = ("surrogate", "acquisition", "direction", "seed", "n_initial", "surrogate_kwargs")


def _arrays(snap: Snapshot) -> dict:
    return dict(snap.surrogate.arrays(snap.fit), key=snap.key)


def save(opt, path: str | os.PathLike) -> None:
    """Write ``opt`` to ``path`` atomically (see the module docstring); it reads only ``opt.snapshot()``."""
    snap = opt.snapshot()
    settings, fit = dict(snap.settings), snap.fit
    meta = dict(
        format=FORMAT,
        version=2 if "space" in settings else 1,
        **settings,
        shift=fit.shift,
        scale=fit.scale,
        n_fed=fit.n_fed,
        sobol_index=snap.sobol_index,
        source=list(snap.source),
        pending_source=list(snap.pending_source),
        u=snap.u.tolist(),
        y=snap.y.tolist(),
        pending=snap.pending.tolist(),
        failed=snap.failed.tolist(),
        trust_region_state=list(snap.trust_region),
        gp_params=None,
    )
    meta.update(snap.surrogate.meta(fit))
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    os.makedirs(folder, exist_ok=True)
    try:
        checkpoint.save(path, _arrays(snap), posterior=snap.surrogate.posterior, meta=meta)
    except TypeError as e:
        raise TypeError(f"cannot save this optimiser (surrogate_kwargs must be JSON-serialisable): {e}") from e


def load(cls, path: str | os.PathLike, model: Any = None, surrogate: Any = None):
    """The optimiser saved at ``path`` (an instance of ``cls``); ``model`` / ``surrogate``: the code a checkpoint
    cannot hold (a custom Flax model, a surrogate factory that is not a registered name).  Built from the file's
    settings, then put in the file's state by ``restore`` twice: first without a fit (the data-free fit of the
    phase of the file's evaluations: the template the file's arrays are read into), then with the file's fit."""
    _, header = checkpoint.load(path)
    meta = header.get("meta") or {}
    if meta.get("format") != FORMAT:
        raise ValueError(f"{os.fspath(path)!r} is a banditkit checkpoint but not a saved BayesOpt")
    if meta["version"] > FORMAT_VERSION:
        raise ValueError(f"{os.fspath(path)!r} was written by a newer banditkit (format {meta['version']})")
    if meta["custom_model"] and model is None:
        raise ValueError(
            "this optimiser used a custom model: pass the same Flax module as BayesOpt.load(path, model=...)"
        )
    if surrogate is None and meta["surrogate"] not in ("gp", "auto"):
        try:
            _posteriors.get(meta["surrogate"])
        except ValueError:
            raise ValueError(
                f"this optimiser used the surrogate factory {meta['surrogate']!r}, which is not a registered "
                "backend name (code is not stored in a checkpoint): pass the same factory as "
                "BayesOpt.load(path, surrogate=...)"
            ) from None
    domain = dict(space=meta["space"]) if meta.get("space") is not None else dict(bounds=meta["bounds"])
    arguments = {k: meta[k] for k in ARGUMENTS} | ({} if surrogate is None else dict(surrogate=surrogate))
    opt = cls(**domain, **arguments, model=model, **dict(_OLD_DEFAULTS, **meta["config"]))
    fresh = opt.snapshot()
    data = Snapshot.of(
        opt.dim, settings=fresh.settings, u=meta["u"], y=meta["y"], source=meta["source"], pending=meta["pending"],
        pending_source=meta["pending_source"],
        failed=meta.get("failed", []),  # none before fail() existed
        key=fresh.key, sobol_index=int(meta["sobol_index"]),
        trust_region=_tr.TrustRegion(*meta.get("trust_region_state", _tr.TrustRegion())), sign=fresh.sign)
    opt.restore(data)  # the data, and surrogate="auto"'s phase for them with its data-free fit
    blank = opt.snapshot()
    tree, _ = checkpoint.load(path, template=_arrays(blank), posterior=blank.surrogate.posterior)
    with blank.surrogate.precision():
        fit = blank.surrogate.restore(blank.fit, tree, meta, blank.u, blank.s)
    opt.restore(blank.replace(key=tree["key"], fit=fit))
    return opt
