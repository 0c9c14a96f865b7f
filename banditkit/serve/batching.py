"""Micro-batching: concurrent requests queue up while the previous batch is being served, then go as one batch.

``await batcher.submit(item)`` returns ``fn(items)[i]`` for its item, where ``fn`` (blocking: a compiled JAX call and
a database commit) runs in the batcher's own worker thread on up to ``max_batch`` queued items at a time.  There is
no waiting window: a lone request is served at once; under load, the requests that arrive during one batch form the
next, so the batch size follows the load.

Two stages: when ``fn`` returns a callable instead of a list, that callable (``finish() -> results``, e.g. the
database commit) runs in a second thread, in batch order, while the first stage already serves the next batch; the
requests are answered when ``finish`` returns.  At most ``depth`` batches wait for their second stage.

An exception raised by a stage is raised in every request of that batch; a
:class:`~banditkit.serve.validate.BadRequest` *returned* for one item is raised in that request only.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any


class MicroBatcher:
    """``fn(items) -> results`` (or ``-> finish``) in batches of at most ``max_batch`` (see the module docstring)."""

    def __init__(self, fn: Callable[[list], Any], max_batch: int, name: str, depth: int = 2):
        self.fn = fn
        self.max_batch = int(max_batch)
        self.name = name
        self._queue: deque[tuple[Any, asyncio.Future]] = deque()
        self._first = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"banditkit-{name}")
        self._second = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"banditkit-{name}-commit")
        self._slots: asyncio.Semaphore | None = None
        self.depth = int(depth)
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

    @staticmethod
    def _resolve(batch, results) -> None:
        for (_, fut), res in zip(batch, results, strict=True):
            if not fut.done():
                fut.set_result(res)

    async def _second_stage(self, batch, finish) -> None:
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(self._second, finish)
        except Exception as e:
            results = [e] * len(batch)
        finally:
            self._slots.release()
        self._resolve(batch, results)

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.depth)
        try:
            while self._queue:
                await self._slots.acquire()
                batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
                try:
                    results = await loop.run_in_executor(self._first, self.fn, [b[0] for b in batch])
                except Exception as e:  # the whole batch failed (e.g. the database): every request hears it
                    results = [e] * len(batch)
                self.batches += 1
                self.items += len(batch)
                if callable(results):
                    loop.create_task(self._second_stage(batch, results))
                else:
                    self._slots.release()
                    self._resolve(batch, results)
        finally:
            self._running = False

    def close(self) -> None:
        self._first.shutdown(wait=True)
        self._second.shutdown(wait=True)
