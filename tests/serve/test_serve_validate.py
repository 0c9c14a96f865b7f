"""``/rank`` bodies: the vectorised path and the per-field path agree, and the logged ``actions`` text is the
request's own (no floats re-printed) exactly when it can be cut out safely."""

from __future__ import annotations

import json

import pytest

from banditkit.serve.validate import BadRequest, Shape, parse_rank

SHAPE = Shape(context_dim=1, action_dim=2, max_actions=4)


@pytest.mark.parametrize("body", [
    b'{"event_id": "e", "context": [0.5], "actions": [{"id": "a", "features": [1, 2.5e-3]}, '
    b'{"features": [3, 4], "id": "b"}]}',
    b'{"actions" :\n [{"id": "x\\"actions\\": 1", "features": [1, 2]}], "event_id": "actions", "context": [1]}',
    b'{"event_id": "actions", "context": [1], "baseline_id": "a", "actions": [{"id": "a", "features": [0, 0]}]}',
    b'{"event_id": "e", "context": [1], "actions": [{"id": "{\\"actions\\": [{}]}", "features": [0, 0]}]}',
])
def test_logged_actions_text_is_the_requests_own(body):
    r = parse_rank(body, SHAPE)
    if b"{\\" in body:  # an id holding braces: no safe cut, the list is printed again
        assert r.actions_json is None
        return
    assert r.actions_json is not None
    assert json.loads(r.actions_json) == json.loads(body)["actions"]
    assert [a["id"] for a in json.loads(r.actions_json)] == r.ids
    assert r.features.tolist() == [a["features"] for a in json.loads(body)["actions"]]


def test_the_per_field_path_names_what_is_wrong_and_logs_no_raw_text():
    with pytest.raises(BadRequest, match=r"actions\[1\].features\[0\] must be a number"):
        parse_rank(b'{"event_id": "e", "context": [0], "actions": [{"id": "a", "features": [1, 2]}, '
                   b'{"id": "b", "features": [true, 2]}]}', SHAPE)
    catalogue = parse_rank(b'{"event_id": "e", "context": [0], "actions": [{"id": "a"}, {"id": "b"}]}',
                           Shape(1, 0, 4))
    assert catalogue.features is None and catalogue.actions_json is None and catalogue.ids == ["a", "b"]
