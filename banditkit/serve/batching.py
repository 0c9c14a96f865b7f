"""Micro-batching: concurrent requests queue up while the previous batch is being served, then go as one batch.

``await batcher.submit(item)`` returns ``fn(items)[i]`` for its item, where ``fn`` (blocking: a compiled JAX call and
a database commit) runs in the batcher's own worker thread on up to ``max_batch`` queued items at a time.  There is
no waiting window: a lone request is served at once; under load, the requests that arrive during one batch form the
next, so the batch size follows the load (and the latency stays about two batch times).  An exception raised by
``fn`` is raised in every request of that batch; a :class:`~banditkit.serve.validate.BadRequest` *returned* for one
item is raised in that request only.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class MicroBatcher:
    """``fn(items) -> results`` served in batches of at most ``max_batch`` (see the module docstring)."""

    def __init__(self, fn: Callable[[list], list], max_batch: int, name: str):
        self.fn = fn
        self.max_batch = int(max_batch)
        self.name = name
        self._queue: deque[tuple[Any, asyncio.Future]] = deque()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"banditkit-{name}")
        self._running = False
        self.batches = 0
        self.items = 0

    async def submit(self, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.append((item, fut))
        if not self._running:
            self._running = True
            loop.create_task(self._drain())
        result = await fut
        if isinstance(result, Exception):
            raise result
        return result

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
                try:
                    results = await loop.run_in_executor(self._pool, self.fn, [b[0] for b in batch])
                except Exception as e:  # the whole batch failed (e.g. the database): every request hears it
                    results = [e] * len(batch)
                self.batches += 1
                self.items += len(batch)
                for (_, fut), res in zip(batch, results, strict=True):
                    if not fut.done():
                        fut.set_result(res)
        finally:
            self._running = False

    def close(self) -> None:
        self._pool.shutdown(wait=True)
