"""The fuzz test of tests/protocol/test_fuzz.py, over A2A v0.3 (issue 34): hypothesis over the
v0.3 JSON-RPC methods (``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
``tasks/resubscribe``, the push config methods, the extended card) and the v0.3 HTTP+JSON routes
(``{A2A_REST_PATH}/v1/...``), on an app serving both versions.

The same properties as v1.0's: never a 5xx, never -32603 (nor a REST ``INTERNAL``), a valid
answer of the binding, and a refusal leaves every task and push config of both owners as it
was. A longer run takes the same ``A2A_FUZZ_EXAMPLES`` / ``A2A_FUZZ_SECONDS`` as v1.0's:

    A2A_FUZZ_EXAMPLES=20000 A2A_FUZZ_SECONDS=600 \\
        python -m pytest -q -s -p no:cacheprovider tests/protocol/test_fuzz_v03.py
"""

from __future__ import annotations

import collections
import json
import typing as t
from urllib.parse import quote, urlencode

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flask_a2a.store import MemoryStore
from tests.fuzz_strategies import (
    RestCall,
    encode,
    envelopes,
    headers,
    rarely,
    v03_rest_calls,
)
from tests.protocol.test_fuzz import ROUNDS, Harness, fuzz_settings, read_stream, report, sse_events

V03: t.Final = {"A2A_PROTOCOL_VERSIONS": ["1.0", "0.3"]}
REST: t.Final = "/a2a/rest/v1/"
MEDIA_TYPES: t.Final = frozenset({"application/json", "application/a2a+json"})
#: A v0.3 StreamResponse's members (one per event).
EVENT_KEYS: t.Final = frozenset({"task", "message", "statusUpdate", "artifactUpdate"})


@pytest.fixture(scope="module")
def v03() -> t.Iterator[Harness]:
    harness = Harness(MemoryStore(), V03)
    yield harness
    report("v0.3", harness)
    harness.exchange.shutdown(timeout=5)


@pytest.fixture
def jsonrpc_round(v03: Harness) -> Harness:
    v03.next_round("v0.3 JSON-RPC")
    return v03


@pytest.fixture
def rest_round(v03: Harness) -> Harness:
    v03.next_round("v0.3 HTTP+JSON")
    return v03


@pytest.mark.parametrize("round_", ROUNDS)
@fuzz_settings(200)
@given(data=st.data())
def test_v03_jsonrpc_requests(jsonrpc_round: Harness, round_: int, data: st.DataObject) -> None:
    """Near-valid v0.3 JSON-RPC requests to every v0.3 method (an id left out now and then)."""
    harness = jsonrpc_round
    doc, expected_id, id_known, method = data.draw(envelopes("0.3"))
    hdrs = data.draw(headers(odd=data.draw(rarely(10)), version="0.3"))
    ascii_only = data.draw(st.booleans())
    if harness.out_of_time("v0.3 JSON-RPC"):  # after every draw: hypothesis replays prefixes
        return
    harness.ensure_seeds()
    body = encode(harness.resolve(doc, hdrs), ascii_only=ascii_only)
    harness.send(body, hdrs, expected_id=expected_id, id_known=id_known, rpc_method=method)


def rest_path(call: RestCall) -> str:
    """The route's path below the REST mount, each id quoted (``call`` resolved)."""
    segments = []
    for segment in call.segments:
        if isinstance(segment, list):
            head, *suffix = segment
            segment = quote(str(head), safe="") + "".join(suffix)
        segments.append(segment)
    query = "?" + urlencode({k: str(v) for k, v in call.query.items()}) if call.query else ""
    return REST + "/".join(segments) + query


def check_rest(response: t.Any, stats: collections.Counter[str]) -> bool:
    """Assert the answer is the v0.3 HTTP+JSON binding's; True when it is a refusal."""
    status = response.status_code
    streamed = response.mimetype == "text/event-stream"
    text = read_stream(response) if streamed else response.get_data(as_text=True)
    assert status < 500, (status, text[:500])
    if streamed:
        assert status == 200
        events = sse_events(text)
        assert events, "a stream with no event"
        refused = False
        for event in events:
            assert isinstance(event, dict), event
            if "error" in event:
                refused = True
                check_status(event, status, stats)
            else:
                assert len(set(event) & EVENT_KEYS) == 1, event
        return refused
    assert response.mimetype in MEDIA_TYPES, (status, response.mimetype, text[:500])
    doc = json.loads(text)
    assert isinstance(doc, dict), doc
    if status == 200:
        assert "error" not in doc or not isinstance(doc["error"], dict), doc
        return False
    check_status(doc, status, stats)
    return True


def check_status(doc: dict[str, t.Any], status: int, stats: collections.Counter[str]) -> None:
    """A ``google.rpc.Status`` body: its code the HTTP status (200 in a stream), never
    INTERNAL, a message, ErrorInfo details."""
    error = doc["error"]
    assert isinstance(error, dict), doc
    assert isinstance(error.get("code"), int) and error["code"] < 500, doc
    assert status == 200 or error["code"] == status, (status, doc)
    assert error.get("status") != "INTERNAL", doc
    assert isinstance(error.get("message"), str), doc
    reasons = [d.get("reason") for d in error.get("details") or () if isinstance(d, dict)]
    assert "INTERNAL_ERROR" not in reasons, doc
    stats[f"rest {error['code']} {error.get('status')}"] += 1


@pytest.mark.parametrize("round_", ROUNDS)
@fuzz_settings(200)
@given(data=st.data())
def test_v03_rest_requests(rest_round: Harness, round_: int, data: st.DataObject) -> None:
    """Near-valid requests to every v0.3 HTTP+JSON route, ids odd now and then."""
    harness = rest_round
    call = data.draw(v03_rest_calls())
    hdrs = data.draw(headers(odd=data.draw(rarely(10)), version="0.3"))
    ascii_only = data.draw(st.booleans())
    if harness.out_of_time("v0.3 HTTP+JSON"):  # after every draw: hypothesis replays prefixes
        return
    harness.ensure_seeds()
    resolved = RestCall(*harness.resolve(list(call), hdrs))
    body = b"" if resolved.body is None else encode(resolved.body, ascii_only=ascii_only)
    harness.send(
        body,
        hdrs,
        http_method=resolved.verb,
        path=rest_path(resolved),
        check=check_rest,
    )
