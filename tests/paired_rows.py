"""Made-up seed rows of a paired-variants study (benchmarks.harness.variants) for the studies' verdict tests."""

from __future__ import annotations

import pandas as pd


def paired_rows(diffs: dict[str, list[float]], base: str, variant: str) -> pd.DataFrame:
    """Per env of ``diffs`` and seed ``s``: ``base`` at 100 and ``variant`` at ``100 + diffs[env][s]`` (5000 rounds),
    so the paired difference ``variant − base`` on each env is ``diffs[env]``."""
    out = []
    for env, d in diffs.items():
        for seed, x in enumerate(d):
            out += [dict(env=env, variant=base, seed=seed, steps=5000, cum_reward=100.0),
                    dict(env=env, variant=variant, seed=seed, steps=5000, cum_reward=100.0 + x)]
    return pd.DataFrame(out)
