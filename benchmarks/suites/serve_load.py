"""The ``serve`` suite's load generator: asyncio HTTP/1.1 keep-alive connections, open or closed loop.

* **open loop** (``rate`` requests/s): request ``i`` is due at ``t₀ + i / rate``; it goes out on the first idle
  connection of a pool of ``connections``; its latency runs from the time it was *due* (so a stalled server cannot
  hide its queueing: no coordinated omission).  When every connection is busy the request waits, and that wait
  counts in its latency.
* **closed loop** (``rate = None``): each of the ``connections`` sends its next request as soon as the last one
  answered: the server's throughput at that concurrency.

With ``rewards=True`` every rank answer is followed, on the same connection, by ``POST /reward`` for its event (the
reward's time is not in the rank latency).  Bodies are built before the clock starts; answers are checked for
status 200 only.  Everything stops after ``seconds`` (or ``max_requests``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import NamedTuple

import numpy as np


class LoadResult(NamedTuple):
    sent: int
    ok: int
    errors: int
    seconds: float
    latencies_ms: np.ndarray
    rewards_ok: int


def make_bodies(n: int, context_dim: int, action_dim: int, actions: int, seed: int = 0) -> list[bytes]:
    """``n`` distinct ``/rank`` bodies without their event id: ``b'{"event_id": "' + id + body``."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        rest = {"context": rng.normal(size=context_dim).round(4).tolist(),
                "actions": [{"id": f"item{k}", "features": rng.normal(size=action_dim).round(4).tolist()}
                            for k in range(actions)]}
        out.append(json.dumps(rest)[1:].encode())
    return out


def _request(path: str, body: bytes, auth: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    if length:
        await reader.readexactly(length)
    return status


async def _run(port: int, bodies: list[bytes], *, rate: float | None, connections: int, seconds: float,
               rewards: bool, max_requests: int, prefix: str, token: str | None) -> LoadResult:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(connections)]
    idle: asyncio.Queue = asyncio.Queue()
    for c in conns:
        idle.put_nowait(c)
    lat: list[float] = []
    counts = {"sent": 0, "ok": 0, "err": 0, "rew": 0}
    t0 = time.perf_counter()
    stop_at = t0 + seconds

    async def one(i: int, due: float, conn) -> None:
        reader, writer = conn
        eid = f"{prefix}{i}"
        writer.write(_request("/rank", b'{"event_id": "' + eid.encode() + b'", ' + bodies[i % len(bodies)], auth))
        status = await _read_response(reader)
        done = time.perf_counter()
        if status == 200:
            counts["ok"] += 1
            lat.append((done - due) * 1e3)
        else:
            counts["err"] += 1
        if rewards and status == 200:
            writer.write(_request("/reward", b'{"event_id": "' + eid.encode() + b'", "reward": '
                                  + (b"1.0" if i % 3 == 0 else b"0.0") + b"}", auth))
            if await _read_response(reader) == 200:
                counts["rew"] += 1

    tasks = []
    if rate is not None:
        async def dispatch(i: int, due: float) -> None:
            conn = await idle.get()
            try:
                await one(i, due, conn)
            finally:
                idle.put_nowait(conn)

        i = 0
        while i < max_requests:
            due = t0 + i / rate
            if due >= stop_at:
                break
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(dispatch(i, due)))
            counts["sent"] += 1
            i += 1
        await asyncio.gather(*tasks)
    else:
        nxt = [0]

        async def worker(conn) -> None:
            while time.perf_counter() < stop_at and nxt[0] < max_requests:
                i = nxt[0]
                nxt[0] += 1
                counts["sent"] += 1
                await one(i, time.perf_counter(), conn)

        await asyncio.gather(*(worker(c) for c in conns))
    elapsed = time.perf_counter() - t0
    for _, w in conns:
        w.close()
    return LoadResult(counts["sent"], counts["ok"], counts["err"], elapsed, np.asarray(lat), counts["rew"])


def run_load(port: int, bodies: list[bytes], *, rate: float | None, connections: int = 32, seconds: float = 10.0,
             rewards: bool = False, max_requests: int = 10**7, prefix: str = "ev",
             token: str | None = None) -> LoadResult:
    """Drive ``/rank`` (and ``/reward``) on ``127.0.0.1:port`` (see the module docstring); ``token``: the bearer
    token, when the server wants one."""
    return asyncio.run(_run(port, bodies, rate=rate, connections=connections, seconds=seconds, rewards=rewards,
                            max_requests=max_requests, prefix=prefix, token=token))
