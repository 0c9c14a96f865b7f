"""Stopping a run part-way, as a crash would: ``bk.run(..., on_chunk=stop_at_chunk(n))`` raises :class:`Stop` when its
``n``-th chunk of rows arrives (the rows are delivered before that chunk's state is checkpointed, so the checkpoint
holds the state after chunk ``n − 1``)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd


class Stop(Exception):
    """Raised by the callback of :func:`stop_at_chunk`."""


def stop_at_chunk(n: int) -> Callable[[pd.DataFrame], None]:
    chunks: list[pd.DataFrame] = []

    def on_chunk(df: pd.DataFrame) -> None:
        chunks.append(df)
        if len(chunks) == n:
            raise Stop

    return on_chunk
