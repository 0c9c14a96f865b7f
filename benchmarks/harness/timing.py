"""Interleaved timing of compiled calls: every variant once per round, so a load that changes during the run falls on
all of them alike (the studies compare variants by the median of their per-round ratios)."""

from __future__ import annotations

import time
from collections.abc import Callable

import jax


def interleaved(calls: dict[str, tuple[Callable, tuple]], rounds: int, reps: int) -> dict[str, list[float]]:
    """``name -> the fastest of reps calls (seconds), per round`` for jitted ``(fn, args)`` pairs: each is called
    once first (compiling it), then ``rounds`` times in turn ``reps`` calls each."""
    for fn, args in calls.values():
        jax.block_until_ready(fn(*args))
    best: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, (fn, args) in calls.items():
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                jax.block_until_ready(fn(*args))
                ts.append(time.perf_counter() - t0)
            best[name].append(min(ts))
    return best
