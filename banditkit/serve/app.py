"""The ASGI app (Starlette): ``POST /rank``, ``POST /reward``, ``GET /health``, ``GET /`` (status page).

Request and answer bodies: :mod:`banditkit.serve.validate`.  Status codes: 200 answered; 400 the body is not JSON;
401 a bearer token is configured and the request does not carry it (``Authorization: Bearer TOKEN``, every route);
404 ``/reward`` for an unknown event; 409 a second reward for an event (or a new id when the catalogue is full);
413 the body is larger than ``max_body`` bytes; 422 a field is missing, unknown, of the wrong type or shape, or not
finite; 503 the log could not be written (nothing was acknowledged).  Every error answer is
``{"error": "<what was wrong and what to do>"}``.  A refused request writes nothing.

A ``/rank`` or ``/reward`` answer is sent only after its row is committed to the store (the micro-batch's
transaction: :class:`~banditkit.serve.batching.MicroBatcher`, :class:`~banditkit.serve.engine.Engine`).
"""

from __future__ import annotations

import contextlib
import hmac
import threading
import time

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from banditkit.serve.batching import MicroBatcher
from banditkit.serve.engine import Engine
from banditkit.serve.validate import BadRequest, parse_rank, parse_reward

MAX_BODY = 1 << 20  # bytes


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class ServeApp:
    """The app around one :class:`Engine`; ``token``: the bearer token every route requires (``None``: none)."""

    def __init__(self, engine: Engine, *, token: str | None = None, max_body: int = MAX_BODY):
        self.engine = engine
        self.token = token
        self.max_body = int(max_body)
        self._status_lock = threading.Lock()
        self.ranker = MicroBatcher(engine.rank_prepare, engine.cfg.max_batch, "rank")
        self.rewarder = MicroBatcher(engine.reward, engine.cfg.max_batch, "reward")
        routes = [Route("/rank", self.rank, methods=["POST"]), Route("/reward", self.reward, methods=["POST"]),
                  Route("/health", self.health, methods=["GET"]), Route("/", self.status, methods=["GET"]),
                  Route("/status.json", self.status_json, methods=["GET"])]
        known = "POST /rank, POST /reward, GET /health, GET /, GET /status.json"
        handlers = {404: lambda req, exc: _error(404, f"no route {req.method} {req.url.path}; the routes: {known}"),
                    405: lambda req, exc: _error(405, f"{req.url.path} does not take {req.method}; routes: {known}")}
        self.app = Starlette(routes=routes, lifespan=self._lifespan, exception_handlers=handlers)

    async def __call__(self, scope, receive, send):
        await self.app(scope, receive, send)

    # ------------------------------------------------------------------------------------------------ guards
    def _denied(self, request: Request) -> Response | None:
        if self.token is None:
            return None
        got = request.headers.get("authorization", "")
        if not hmac.compare_digest(got.encode(), f"Bearer {self.token}".encode()):
            return _error(401, "missing or wrong bearer token: send the header 'Authorization: Bearer <token>'")
        return None

    async def _body(self, request: Request) -> bytes:
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > self.max_body:
            raise BadRequest(413, f"the body is {size} bytes; at most {self.max_body} (--max-body)")
        chunks, total = [], 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > self.max_body:
                raise BadRequest(413, f"the body is over {self.max_body} bytes (--max-body)")
            chunks.append(chunk)
        return b"".join(chunks)

    async def _serve(self, request: Request, parse, batcher: MicroBatcher) -> Response:
        denied = self._denied(request)
        if denied is not None:
            return denied
        try:
            item = parse(await self._body(request))
            answer = await batcher.submit(item)
            if isinstance(answer, str):  # already JSON text (the logged answer)
                return Response(answer, media_type="application/json")
            return JSONResponse(answer)
        except BadRequest as e:
            return _error(e.status, e.message)
        except Exception as e:  # the log could not be written: nothing was acknowledged
            return _error(503, f"the decision could not be logged ({type(e).__name__}: {e}); retry with the same "
                               "event_id")

    # ------------------------------------------------------------------------------------------------ routes
    async def rank(self, request: Request) -> Response:
        shape = self.engine.cfg.shape
        return await self._serve(request, lambda b: parse_rank(b, shape), self.ranker)

    async def reward(self, request: Request) -> Response:
        return await self._serve(request, parse_reward, self.rewarder)

    async def health(self, request: Request) -> Response:
        denied = self._denied(request)
        if denied is not None:
            return denied
        e = self.engine
        err = e.learner_error
        body = {"status": "ok" if err is None else "learner stopped", "spec": e.cfg.spec,
                "model_version": e.model_version, "uptime_s": round(time.time() - e.started, 3),
                "replayed_on_start": e.replayed, "apprentice": e.cfg.apprentice}
        if err is not None:
            body["error"] = f"{type(err).__name__}: {err}"
        return JSONResponse(body, status_code=200 if err is None else 503)

    async def status(self, request: Request) -> Response:
        denied = self._denied(request)
        if denied is not None:
            return denied
        from banditkit.serve.status import render

        return HTMLResponse(render(await run_in_threadpool(self.summary)))

    async def status_json(self, request: Request) -> Response:
        denied = self._denied(request)
        if denied is not None:
            return denied
        return JSONResponse(await run_in_threadpool(self.summary))

    def summary(self) -> dict:
        """The status numbers (read in a worker thread, one reader at a time: the event loop keeps serving)."""
        from banditkit.serve.status import summarize

        with self._status_lock:
            return summarize(self.engine, self.ranker)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app):
        yield
        await self.shutdown()

    async def shutdown(self) -> None:
        self.ranker.close()
        self.rewarder.close()
        self.engine.close()
