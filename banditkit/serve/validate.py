"""The JSON contract of ``/rank`` and ``/reward``: parse a request body or say exactly what is wrong with it.

``POST /rank``::

    {"event_id": str, "context": [float, ...] (d numbers),
     "actions": [{"id": str, "features": [float, ...] (F numbers) | null | omitted}, ...]
                (1 .. max_actions of them, ids unique),
     "baseline_id": str (optional: the application's own choice; apprentice mode serves it, default the first action)}

``POST /reward``: ``{"event_id": str, "reward": float}``.

Every violation raises :class:`BadRequest` (HTTP status + one message naming the field, what was wanted and what came);
nothing is decided or written for such a request.  Unknown fields are refused (a typo would otherwise be ignored
silently); numbers must be finite (JSON has no NaN, but Python's parser accepts ``NaN`` / ``Infinity``).
"""

from __future__ import annotations

import json
import math
import re
from typing import NamedTuple

import numpy as np

try:  # the serve extra's fast parser; json (stdlib) otherwise
    import orjson
except ImportError:  # pragma: no cover - depends on the installed extras
    orjson = None

MAX_ID = 256  # longest accepted event / action id (characters)


class BadRequest(Exception):
    """A refused request: ``status`` (4xx) and ``message``."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = int(status)
        self.message = message


class Shape(NamedTuple):
    """What the service accepts: ``context_dim`` numbers of context, ``action_dim`` features per action (0: a fixed
    catalogue of ids without features), at most ``max_actions`` actions per request."""

    context_dim: int
    action_dim: int
    max_actions: int


class RankRequest(NamedTuple):
    event_id: str
    context: list[float]
    ids: list[str]
    features: list[list[float]] | np.ndarray | None  # (n, F) numbers per action; None for a catalogue of ids
    baseline_id: str | None
    actions_json: str | None = None  # the request's own text of a validated "actions" list (logged as sent)


class RewardRequest(NamedTuple):
    event_id: str
    reward: float


def _loads(body: bytes):
    """``orjson.loads`` (about ten times faster on a body of a few hundred numbers) when installed, else
    ``json.loads``; a body orjson refuses is parsed again by ``json``, for its message — and because ``json`` reads
    ``NaN`` / ``Infinity``, which the field checks then refuse by name."""
    if orjson is not None:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


def _object(body: bytes, allowed: set[str], required: set[str]) -> dict:
    try:
        data = _loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise BadRequest(400, f"the body is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise BadRequest(422, f"the body must be a JSON object, got {type(data).__name__}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise BadRequest(422, f"unknown field(s) {unknown}; accepted: {sorted(allowed)}")
    missing = sorted(required - set(data))
    if missing:
        raise BadRequest(422, f"missing field(s) {missing}")
    return data


def _id(value, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise BadRequest(422, f"{where} must be a non-empty string, got {json.dumps(value)[:60]}")
    if len(value) > MAX_ID:
        raise BadRequest(422, f"{where} is {len(value)} characters long; at most {MAX_ID}")
    return value


def _numbers(value, n: int, where: str) -> list[float]:
    if not isinstance(value, list):
        raise BadRequest(422, f"{where} must be a list of {n} numbers, got {type(value).__name__}")
    if len(value) != n:
        raise BadRequest(422, f"{where} must have {n} numbers, got {len(value)}")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise BadRequest(422, f"{where}[{i}] must be a number, got {json.dumps(v)[:40]}")
        if not math.isfinite(v):
            raise BadRequest(422, f"{where}[{i}] is {v}: numbers must be finite (no NaN or infinity)")
    return [float(v) for v in value]


def parse_rank(body: bytes, shape: Shape) -> RankRequest:
    """A validated ``/rank`` request (see the module docstring)."""
    data = _object(body, {"event_id", "context", "actions", "baseline_id"}, {"event_id", "context", "actions"})
    event_id = _id(data["event_id"], "event_id")
    context = _numbers(data["context"], shape.context_dim, "context")
    actions = data["actions"]
    if not isinstance(actions, list) or not actions:
        raise BadRequest(422, "actions must be a non-empty list of {\"id\": ..., \"features\": [...]} objects")
    if len(actions) > shape.max_actions:
        raise BadRequest(422, f"{len(actions)} actions; this service takes at most {shape.max_actions} per request "
                              "(--max-actions)")
    fast = _fast_actions(actions, shape, body)
    if fast is not None:
        ids, feats = fast
    else:
        ids, feats = _slow_actions(actions, shape)
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        raise BadRequest(422, f"action ids must be unique within a request; repeated: {dup[:5]}")
    baseline = data.get("baseline_id")
    if baseline is not None:
        baseline = _id(baseline, "baseline_id")
        if baseline not in ids:
            raise BadRequest(422, f"baseline_id {baseline!r} is not one of the request's action ids")
    raw = _raw_actions(body, actions) if fast is not None else None
    return RankRequest(event_id, context, ids, feats if shape.action_dim > 0 else None, baseline, raw)


_ACTIONS_VALUE = re.compile(rb'"actions"\s*:\s*(\[(?:\s*\{[^{}]*\}\s*,?)*\s*\])')


def _raw_actions(body: bytes, actions: list) -> str | None:
    """The body's own text of its ``"actions"`` list, or ``None``: the first ``"actions": [{...}, ...]`` run in the
    body (objects without braces inside), kept only if it parses to exactly the validated ``actions`` — so the logged
    text is always a JSON text of the very list that was decided on (an id holding a brace, say, falls back to
    ``json.dumps``)."""
    m = _ACTIONS_VALUE.search(body)
    if m is None:
        return None
    try:
        same = _loads(m.group(1)) == actions
    except (ValueError, RecursionError):
        return None
    return m.group(1).decode("utf-8") if same else None


def _fast_actions(actions: list, shape: Shape, body: bytes):
    """``(ids, features)`` of a well-formed action list in a few vectorised steps, or ``None`` (then the per-field
    checks run and name the problem).  Booleans would pass ``np.asarray(..., float)``: a body with a JSON
    ``true`` / ``false`` anywhere takes the per-field path."""
    if shape.action_dim == 0 or b"true" in body or b"false" in body:
        return None
    try:
        if not all(a.keys() == {"id", "features"} for a in actions):
            return None
        ids = [a["id"] for a in actions]
        if not all(type(x) is str and 0 < len(x) <= MAX_ID for x in ids):
            return None
        arr = np.asarray([a["features"] for a in actions], np.float64)
    except (AttributeError, TypeError, ValueError):
        return None
    if arr.shape != (len(actions), shape.action_dim) or not np.isfinite(arr).all():
        return None
    return ids, arr


def _slow_actions(actions: list, shape: Shape) -> tuple[list[str], list[list[float]]]:
    ids: list[str] = []
    feats: list[list[float]] = []
    for i, a in enumerate(actions):
        if not isinstance(a, dict):
            raise BadRequest(422, f"actions[{i}] must be an object with an \"id\", got {type(a).__name__}")
        unknown = sorted(set(a) - {"id", "features"})
        if unknown:
            raise BadRequest(422, f"actions[{i}] has unknown field(s) {unknown}; accepted: ['features', 'id']")
        if "id" not in a:
            raise BadRequest(422, f"actions[{i}] has no \"id\"")
        ids.append(_id(a["id"], f"actions[{i}].id"))
        f = a.get("features")
        if shape.action_dim > 0:
            if f is None:
                raise BadRequest(422, f"actions[{i}] needs \"features\" ({shape.action_dim} numbers): this service "
                                      "scores actions by their features")
            feats.append(_numbers(f, shape.action_dim, f"actions[{i}].features"))
        elif f is not None:
            raise BadRequest(422, f"actions[{i}] has features, but this service learns a fixed catalogue of ids "
                                  "(started with --action-dim 0): omit \"features\"")
    return ids, feats


def parse_reward(body: bytes) -> RewardRequest:
    """A validated ``/reward`` request."""
    data = _object(body, {"event_id", "reward"}, {"event_id", "reward"})
    event_id = _id(data["event_id"], "event_id")
    r = data["reward"]
    if isinstance(r, bool) or not isinstance(r, (int, float)):
        raise BadRequest(422, f"reward must be a number, got {json.dumps(r)[:40]}")
    if not math.isfinite(r):
        raise BadRequest(422, f"reward is {r}: it must be finite (no NaN or infinity)")
    return RewardRequest(event_id, float(r))
