"""Checkpoints of :func:`banditkit.run` (both loops) and of :func:`banditkit.sweep`.

Compiled loop (``run(checkpoint=path, save_every=s)``): at the end of a chunk, once ``s`` seconds have passed since
the last save, and after the last chunk, the vmapped agent state and the loop's position (next round,
cumulative-regret totals, health flags, run time so far) are written atomically (:mod:`banditkit.checkpoint`).  A
run given an existing checkpoint of the same agent name, seeds, steps and chunking starts from its next round; the
keys are ``fold_in(k_act, t)`` and the data pre-drawn, so the rounds it runs are exactly those of a run never
stopped.

Gymnasium loop (``run(compiled=False, checkpoint=path)``): resume any env exactly.

The Gymnasium loop runs the seeds one after another.  A checkpoint holds::

    done            {seed: rounds run}            the seeds already finished (their rows are the caller's)
    seed, t_next    the seed in progress and its first round not run yet
    agent           that seed's agent state after round t_next − 1          (pytree, as ``agent.init`` makes it)
    actions[t_next] int64, rewards[t_next] float64   what the env was given and gave back in rounds 0..t_next−1
    offset          its cumulative regret after round t_next − 1
    run_s, first_call_s, timed_steps                  the timing totals so far
    diagnostics     {key: {seed: value}}          the finished seeds' posterior diagnostics (``Posterior.diagnostics``)

An env is any Python object, so its state is not saved: it is *replayed*.  ``env.reset(seed=s)`` followed by
``env.step(a_t)`` for the saved actions puts a Gymnasium env whose randomness comes from its ``reset`` seed (the
Gymnasium contract; every banditkit env) back where it was, and each replayed reward is checked against the saved
one, so an env that does not replay (one drawing from a global RNG, or whose data changed) is an error, not a
silently different run.  The keys are ``fold_in(k_act, t)``, so the rounds after the checkpoint are exactly those of
a run never stopped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from banditkit import checkpoint

FORMAT = "banditkit.run"  # the compiled loop's checkpoints share the format; ``loop`` tells the two apart
LOOP = "gymnasium"



@dataclass
class Progress:
    """Where a Gymnasium-loop run stands (see the module docstring for the fields)."""

    done: dict[int, int] = field(default_factory=dict)
    seed: int | None = None
    t_next: int = 0
    offset: float = 0.0
    actions: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    run_s: float = 0.0
    first_call_s: float = 0.0
    timed_steps: int = 0
    diagnostics: dict[str, dict[int, Any]] = field(default_factory=dict)



def save(path: str, run_key: dict, progress: Progress, state: Any) -> None:
    """Write ``progress`` and the agent ``state`` of the seed in progress (or the last finished one) atomically."""
    meta = dict(
        format=FORMAT,
        loop=LOOP,
        run=run_key,
        done={str(k): int(v) for k, v in progress.done.items()},
        seed=None if progress.seed is None else int(progress.seed),
        t_next=int(progress.t_next),
        offset=float(progress.offset),
        run_s=float(progress.run_s),
        first_call_s=float(progress.first_call_s),
        timed_steps=int(progress.timed_steps),
        diagnostics={key: {str(s): v for s, v in by_seed.items()} for key, by_seed in progress.diagnostics.items()},
    )
    tree = dict(agent=state, actions=np.asarray(progress.actions, np.int64).reshape(-1),
                rewards=np.asarray(progress.rewards, np.float64).reshape(-1))
    checkpoint.save(path, tree, meta=meta)



def run_meta(path: str, run_key: dict, loop: str) -> dict:
    """The ``meta`` of the :func:`banditkit.run` checkpoint ``path``, after checking that it was made by ``loop``
    (``"compiled"`` / ``"gymnasium"``) for the run ``run_key`` describes (``ValueError`` naming what differs)."""
    meta = checkpoint.header(path).get("meta") or {}
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path!r} is not a checkpoint of a bandit run (banditkit.run)")
    made_by = meta.get("loop", "compiled")  # checkpoints written before the Gymnasium loop had any say nothing
    if made_by != loop:
        name = "the Gymnasium loop" if made_by == LOOP else "the compiled loop"
        raise ValueError(f"checkpoint {path!r} was made by {name}; resume it with compiled={made_by != LOOP} (or "
                         "delete it to start over)")
    saved = meta["run"]
    diff = [f"{k}: saved {saved.get(k)!r}, now {v!r}" for k, v in run_key.items() if saved.get(k) != v]
    if diff:
        raise ValueError(
            f"checkpoint {path!r} is of another run ({'; '.join(diff)}); run with the same agent, seeds, steps "
            "and chunk size to resume it, or delete it to start over"
        )
    return meta



def read(path: str, run_key: dict) -> Progress:
    """The :class:`Progress` saved in ``path`` (without the agent state), after checking it is of this run."""
    meta = run_meta(path, run_key, LOOP)
    return Progress(
        done={int(k): int(v) for k, v in meta["done"].items()},
        seed=meta["seed"],
        t_next=int(meta["t_next"]),
        offset=float(meta["offset"]),
        run_s=float(meta["run_s"]),
        first_call_s=float(meta["first_call_s"]),
        timed_steps=int(meta["timed_steps"]),
        diagnostics=_diagnostics(meta),
    )



def _diagnostics(meta: dict) -> dict[str, dict[int, Any]]:
    """The saved diagnostics; a checkpoint written before the diagnostics hook kept only ``discarded``."""
    if "diagnostics" in meta:
        return {key: {int(s): v for s, v in by_seed.items()} for key, by_seed in meta["diagnostics"].items()}
    old = meta.get("discarded") or {}
    return {"discarded_retrainings": {int(s): list(v) for s, v in old.items()}} if old else {}



def load_seed(path: str, progress: Progress, template: Any) -> Any:
    """The saved agent state of the seed in progress (structure checked against ``template``); fills
    ``progress.actions`` / ``progress.rewards``."""
    n = progress.t_next
    tree, _ = checkpoint.load(path, template=dict(agent=template, actions=np.zeros(n, np.int64),
                                                   rewards=np.zeros(n, np.float64)))
    progress.actions = [int(a) for a in np.asarray(tree["actions"])]
    progress.rewards = [float(r) for r in np.asarray(tree["rewards"])]
    return tree["agent"]



def replay(env, seed: int, actions: list[int], rewards: list[float]):
    """``env.reset(seed=seed)``, then step it through ``actions``, checking each reward against ``rewards``.

    Returns the observation after the last action (the one the next round acts on), or the reset's when there is
    none.  Raises ``ValueError`` at the first round whose reward differs, or when the env ends early.
    """
    obs, _ = env.reset(seed=seed)
    for t, (a, r) in enumerate(zip(actions, rewards, strict=True)):
        obs, reward, terminated, truncated, _ = env.step(int(a))
        if float(reward) != r:
            raise ValueError(
                f"cannot resume seed {seed}: replaying the saved actions, the env gave reward {float(reward)!r} in "
                f"round {t} where the interrupted run got {r!r} — the env does not depend on its reset seed alone "
                "(does it draw from a global RNG, or did its data change?).  Delete the checkpoint to start over"
            )
        if (terminated or truncated) and t < len(actions) - 1:
            raise ValueError(f"cannot resume seed {seed}: the env ended in round {t} of the replay, before the "
                             f"{len(actions)} saved rounds; delete the checkpoint to start over")
    return obs



def rounds(meta: dict) -> dict[int, int]:
    """``{seed: rounds run}`` of a Gymnasium-loop checkpoint's ``meta``: finished seeds, the one in progress, 0 for
    the rest."""
    out = {int(s): 0 for s in meta["run"]["seeds"]}
    out.update({int(k): int(v) for k, v in meta["done"].items()})
    if meta.get("seed") is not None:
        out[int(meta["seed"])] = int(meta["t_next"])
    return out



def _save_state(path, state, run_key: dict, t_next: int, offsets, nonfinite: dict, run_s: float) -> None:
    """Write the vmapped agent state after round ``t_next − 1`` and what the loop needs to go on from there."""
    meta = dict(format=FORMAT, run=run_key, t_next=int(t_next), offsets=np.asarray(offsets).tolist(),
                nonfinite={str(k): int(v) for k, v in nonfinite.items()}, run_s=float(run_s))
    checkpoint.save(path, state, meta=meta)



def _resume_state(path, template, run_key: dict, per_seed):
    """``(state, t_next, offsets, nonfinite, run_s)`` from a checkpoint of the same run (``run_key`` equal)."""
    meta = run_meta(os.fspath(path), run_key, "compiled")
    state, _ = checkpoint.load(path, template=template)
    state = jax.device_put(state, per_seed) if per_seed is not None else state
    nonfinite = {int(k): int(v) for k, v in meta["nonfinite"].items()}
    return state, int(meta["t_next"]), np.asarray(meta["offsets"], np.float64), nonfinite, float(meta["run_s"])



def agent_checkpoint(folder: str | os.PathLike, name: str) -> str:
    """The checkpoint file of agent ``name`` in ``folder`` (the name with characters other than letters, digits,
    ``-``, ``_`` and ``.`` replaced by ``_``, then ``.bk``)."""
    import re

    return os.path.join(os.fspath(folder), re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)) + ".bk")



def checkpoint_rounds(path: str | os.PathLike) -> dict[int, int]:
    """``{seed: rounds run}`` of a :func:`run` checkpoint (``{}`` when the file does not exist): every seed at the
    same round in the compiled loop; in the Gymnasium loop the finished seeds, the one in progress, and 0 for the
    seeds not started."""
    if not os.path.exists(path):
        return {}
    meta = checkpoint.header(path).get("meta") or {}
    if meta.get("format") != FORMAT:
        raise ValueError(f"{os.fspath(path)!r} is not a checkpoint of a bandit run ({FORMAT})")
    if meta.get("loop") == LOOP:
        return rounds(meta)
    return {int(s): int(meta["t_next"]) for s in meta["run"]["seeds"]}



def checkpoint_round(path: str | os.PathLike) -> int:
    """The first round a :func:`run` checkpoint has not run for every seed (0 when the file does not exist; the
    least over seeds for the Gymnasium loop, :func:`checkpoint_rounds` has each seed's)."""
    return min(checkpoint_rounds(path).values(), default=0)
