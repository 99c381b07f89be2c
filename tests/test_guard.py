"""The request guard (whileai/platform/api/_guard.py) driven as the ASGI middleware it is, with a recording app and a
store that knows one key, one job key and one page session: each refusal's status, words and headers, and what
reaches the app. No server, no database: every check at its edges, in milliseconds."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

import pytest

from whileai.platform import defaults
from whileai.platform.api import _guard
from whileai.platform.api._guard import RequestGuard

NUL = ("the address holds a NUL character (%00); no name or id holds one: check the path and query")


class Store:
    """Knows the account key ``good``, the job key ``job`` and the page session ``live`` (read through ``_tx``)."""

    def account_for_key(self, token: str) -> str | None:
        return "acct_1" if token == "good" else None

    def job_key_scope(self, token: str) -> dict[str, Any] | None:
        return {"job_id": "job_1"} if token == "job" else None

    def __init__(self) -> None:
        self.session: str | None = None

    def _tx(self, work: Any, write: bool = True) -> str | None:
        return "acct_1" if self.session == "live" else None


class App:
    """Answers 200, keeping the scope and every message it received."""

    def __init__(self, fail: BaseException | None = None, start_then_fail: bool = False):
        self.calls: list[dict[str, Any]] = []
        self.fail, self.start_then_fail = fail, start_then_fail

    async def __call__(self, scope, receive, send):
        got = []
        if scope["type"] != "http" or scope.get("method") != "GET":
            got.append(await receive())
        self.calls.append({"scope": scope, "received": got, "receive": receive})
        if self.start_then_fail:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        if self.fail is not None:
            raise self.fail
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _scope(method="POST", path="/api/v1/runs", query=b"", headers=(), **extra) -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "query_string": query, "headers": list(headers), **extra}


def _call(scope, chunks=(b"",), app=None, store=None, quiet=False):
    """Run one request through the guard: ``(answer status or None, answer json or None, headers, app)``."""
    app = app or App()
    state = SimpleNamespace(store=store if store is not None else Store(), quiet_errors=quiet)
    if store is False:
        state.store = None
    guard = RequestGuard(app, state)
    queue = [m if isinstance(m, dict) else {"type": "http.request", "body": m, "more_body": i < len(chunks) - 1}
             for i, m in enumerate(chunks)]
    sent: list[dict[str, Any]] = []

    async def receive():
        return queue.pop(0) if queue else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    starts = [m for m in sent if m["type"] == "http.response.start"]
    bodies = [m["body"] for m in sent if m["type"] == "http.response.body"]
    status = starts[0]["status"] if starts else None
    answer = json.loads(bodies[0]) if bodies and bodies[0] != b"ok" else None
    return status, answer, dict(starts[0]["headers"]) if starts else {}, app, sent


def _length(n: int) -> tuple[bytes, bytes]:
    return (b"content-length", str(n).encode())


JSON = (b"content-type", b"application/json")


def test_a_request_without_a_body_goes_straight_to_the_app():
    for scope in (_scope("GET"), _scope("GET", headers=[_length(0)]), _scope("POST"), _scope("HEAD", headers=[_length(0)]),
                  _scope("OPTIONS"), _scope("DELETE", headers=[_length(5)], type="websocket")):
        status, answer, _, app, _ = _call(scope, chunks=())
        assert status == 200 and answer is None and len(app.calls) == 1, scope
    lifespan = _call({"type": "lifespan"}, chunks=({"type": "lifespan.startup"},))[3]
    assert lifespan.calls[0]["received"] == [{"type": "lifespan.startup"}], "its own receive, untouched"


def test_a_nul_anywhere_in_the_address_is_refused_400():
    for scope in (_scope(raw_path=b"/api/v1/runs/a\x00b"), _scope(query=b"name=a%00b"), _scope(query=b"name=a\x00b"),
                  _scope(path="/api/v1/runs/a\x00"), _scope("GET", path="/api/v1/runs/a\x00")):
        status, answer, headers, app, _ = _call(scope, chunks=())
        assert (status, answer) == (400, {"error": {"message": NUL, "type": "invalid_request"}}), scope
        assert not app.calls and b"connection" not in headers
    assert _call(_scope(raw_path=b"/api/v1/runs/a%2500b"), chunks=())[0] == 200, "an escaped percent sign is no NUL"


def test_a_number_in_the_query_past_the_bound_is_refused_422_naming_it():
    bound = defaults.PLATFORM_QUERY_NUMBER_MAX
    status, answer, _, app, _ = _call(_scope("GET", query=b"limit=1e999"), chunks=())
    assert status == 422 and not app.calls
    assert answer == {"error": {"type": "invalid_value", "message": (
        f"limit='1e999' is out of range: a number in the query must be finite and within [-{bound}, {bound}] "
        "(PLATFORM_QUERY_NUMBER_MAX); send a smaller value")}}
    refused = _guard._number_out_of_range
    assert refused(f"a=1&b={bound}&c=-{bound}&d=nan&e=&f=inf&g=.5&h=+3.&i=1e3".encode()) is None
    assert refused(f"x={bound + 2}".encode()).startswith(f"x='{bound + 2}' is out of range")
    assert refused(f"x=-{bound + 2}".encode()).startswith(f"x='-{bound + 2}' is out of range")
    assert refused(b"x=1e16") is not None and refused(b"x=%201e400%20") is not None
    assert refused(b"x=" + b"9" * 400) is not None and refused(b"x=" + b"9" * 401) is None, "past 400 characters: a name"
    assert refused(b"x=" + b"1" * 50 + b"e999").startswith("x='" + "1" * 40 + "' is out of range")
    assert refused(b"x=1e3x") is None and refused(b"x=12-3") is None


def test_a_body_declared_past_the_limit_is_refused_413_unread(monkeypatch):
    monkeypatch.setattr(defaults, "PLATFORM_MAX_BODY_BYTES", 100)
    status, answer, headers, app, _ = _call(_scope(headers=[_length(101)]), chunks=(b"x" * 101,))
    assert (status, not app.calls, headers[b"connection"]) == (413, True, b"close")
    assert answer == {"error": {"type": "too_large", "message": (
        "the body is 101 bytes, over the limit of 100 bytes (PLATFORM_MAX_BODY_BYTES); send it as several smaller "
        "requests (e.g. points in batches)")}}
    assert _call(_scope(headers=[_length(100)]), chunks=(b"x" * 100,), store=False)[0] == 200


def test_a_body_sent_past_the_limit_is_refused_413_once_it_is_over(monkeypatch):
    monkeypatch.setattr(defaults, "PLATFORM_MAX_BODY_BYTES", 10)
    chunked = (b"transfer-encoding", b"gzip, Chunked")
    status, answer, headers, app, _ = _call(_scope(headers=[chunked, (b"authorization", b"Bearer good")]),
                                            chunks=(b"x" * 6, b"x" * 5))
    assert (status, not app.calls, headers[b"connection"]) == (413, True, b"close")
    assert answer["error"] == {"type": "too_large", "message": (
        "the body is more than 10 bytes (PLATFORM_MAX_BODY_BYTES); send it as several smaller requests (e.g. points "
        "in batches)")}
    status, _, _, app, _ = _call(_scope(headers=[chunked, (b"authorization", b"Bearer good")]), chunks=(b"x" * 5, b"x" * 5))
    assert status == 200 and app.calls[0]["received"][0]["body"] == b"x" * 10


def test_a_large_body_is_read_only_for_a_valid_key_or_page_session(monkeypatch):
    small = defaults.PLATFORM_UNAUTH_BODY_BYTES
    big = [_length(small + 1)]
    status, answer, headers, app, _ = _call(_scope(headers=big), chunks=(b"x" * (small + 1),))
    assert (status, not app.calls, headers[b"connection"], headers[b"www-authenticate"]) == (401, True, b"close", b"Bearer")
    assert answer == {"error": {"type": "unauthorized", "message": (
        f"a body over {small} bytes (PLATFORM_UNAUTH_BODY_BYTES) is read only with a valid key: send "
        "'Authorization: Bearer <key>' (the data root's local_key file holds the local account's key); the body "
        "was not read")}}
    assert _call(_scope(headers=[_length(small)]), chunks=(b"x" * small,))[0] == 200, "up to the bound: no key asked"
    for auth in (b"Bearer good", b"bearer  good ", b"BEARER job"):
        assert _call(_scope(headers=[*big, (b"authorization", auth)]), chunks=(b"x" * (small + 1),))[0] == 200, auth
    for auth in (b"Bearer bad", b"Basic good", b"Bearer ", b"good"):
        assert _call(_scope(headers=[*big, (b"authorization", auth)]), chunks=(b"x",))[0] == 401, auth
    chunked = [(b"transfer-encoding", b"chunked")]
    assert _call(_scope(headers=chunked), chunks=(b"x",))[0] == 401, "an unknown length is a large one"
    assert _call(_scope(headers=chunked), chunks=(b"x",), store=False)[0] == 200, "no store: nothing to check against"
    store = Store()
    store.session = "live"
    cookie = (b"cookie", f"a=1; {defaults.SESSION_COOKIE}=live; b".encode())
    assert _call(_scope(headers=[*big, cookie]), chunks=(b"x",), store=store)[0] == 200
    assert _call(_scope(headers=[*big, (b"authorization", b"Bearer bad"), cookie]), chunks=(b"x",), store=store)[0] == 401
    assert _call(_scope(headers=[*big, (b"cookie", b"other=live")]), chunks=(b"x",), store=store)[0] == 401


def test_the_cookie_and_header_readers():
    scope = _scope(headers=[(b"x-a", b"1"), (b"cookie", b" a=1;b=two=2 ;  c="), (b"x-a", b"2")])
    assert _guard._header(scope, b"x-a") == b"1" and _guard._header(scope, b"x-b") is None
    assert _guard._cookie(scope, "b") == "two=2" and _guard._cookie(scope, "a") == "1" and _guard._cookie(scope, "c") == ""
    assert _guard._cookie(scope, "d") is None and _guard._cookie(_scope(), "a") is None
    assert _guard._header({"type": "http"}, b"x") is None and _guard._header({"headers": None}, b"x") is None


def test_a_client_that_leaves_before_its_body_is_whole_gets_nothing_and_the_app_is_not_called():
    status, _, _, app, sent = _call(_scope(headers=[_length(3)]), chunks=(b"ab",) and ({"type": "http.request", "body": b"a",
                                                                                       "more_body": True},))
    assert status is None and not sent and not app.calls


def test_the_app_gets_the_body_read_then_what_followed_it_then_the_client():
    later = {"type": "http.disconnect"}
    chunks = ({"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"c"},
              {"type": "other"}, later)
    status, _, _, app, _ = _call(_scope(headers=[_length(3)]), chunks=chunks)
    assert status == 200 and app.calls[0]["received"] == [{"type": "http.request", "body": b"abc", "more_body": False}]
    receive = app.calls[0]["receive"]

    async def rest():
        return [await receive(), await receive()]

    assert asyncio.run(rest()) == [{"type": "other"}, later]


def test_a_json_body_is_parsed_once_into_the_request_state(monkeypatch):
    for kind in (b"application/json", b"Application/JSON; charset=utf-8", b"application/vnd.api+json"):
        status, _, _, app, _ = _call(_scope(headers=[_length(8), (b"content-type", kind)]), chunks=(b'{"a": 1}',))
        assert status == 200 and app.calls[0]["scope"]["state"] == {"json_body": {"a": 1}}, kind
    for kind in (b"text/plain", b"application/jsonx", b"text/x+json", b""):
        status, _, _, app, _ = _call(_scope(headers=[_length(8), (b"content-type", kind)]), chunks=(b'{"a": 1}',))
        assert status == 200 and "state" not in app.calls[0]["scope"], kind
    status, _, _, app, _ = _call(_scope(headers=[_length(3), JSON]), chunks=(b"{a:",))
    assert status == 200 and "state" not in app.calls[0]["scope"], "not JSON at all: the route words it"
    monkeypatch.setattr(_guard, "_THREAD_PARSE_BYTES", 4)
    status, _, _, app, _ = _call(_scope(headers=[_length(8), JSON], state={"x": 1}), chunks=(b'{"a": 2}',))
    assert app.calls[0]["scope"]["state"] == {"x": 1, "json_body": {"a": 2}}, "parsed in a thread past the size"
    status, answer, _, app, _ = _call(_scope(headers=[_length(14), JSON]), chunks=(b'{"a": "x\\u0000"}',))
    assert status == 422 and answer["error"]["type"] == "invalid_value" and "NUL" in answer["error"]["message"]
    assert not app.calls, "a refused body never reaches the app"


def test_a_refused_launch_body_is_passed_on_with_its_run_id_alone():
    body = b'{"run_id": "run_0a1b", "x": "\\u0000"}'
    launch = _scope(path="/api/v1/jobs/launch", headers=[_length(len(body)), JSON])
    status, _, _, app, _ = _call(launch, chunks=(body,))
    state = app.calls[0]["scope"]["state"]
    assert status == 200 and state["json_body"] == {"run_id": "run_0a1b"} and "NUL" in str(state["body_refused"])
    refused = _guard._launch_refused
    error = _guard.BodyRefused(422, "no", "invalid_value")
    assert refused(launch, body, error) == {"run_id": "run_0a1b"}
    assert refused({**launch, "method": "PUT"}, body, error) is None
    assert refused({**launch, "path": "/api/v1/jobs/launch/"}, body, error) is None
    for other in (b'{"run_id": "run_0A"}', b'{"run_id": "run_"}', b'{"run_id": 3}', b'["run_0a"]', b"{",
                  b'{"run_id": "run_0a\\n"}', b'{"run_id": "xrun_0a"}', b'{"run_id": "run_' + b"a" * 65 + b'"}',
                  b"[" * 100_000):
        assert refused(launch, other, error) is None, other
    assert refused(launch, b'{"run_id": "run_' + b"a" * 64 + b'"}', error) == {"run_id": "run_" + "a" * 64}


def test_only_a_post_to_a_runs_points_is_a_points_body():
    assert _guard._is_points(_scope("POST", "/api/v1/runs/run_1/points"))
    for scope in (_scope("PUT", "/api/v1/runs/run_1/points"), _scope("POST", "/api/v1/runs/run_1/pointsx"),
                  _scope("POST", "/api/v2/runs/run_1/points"), {"method": "POST"}):
        assert not _guard._is_points(scope), scope


def test_a_failing_route_becomes_one_500_with_an_error_id_and_the_log_has_it(caplog):
    status, answer, headers, _, _ = _call(_scope("GET"), chunks=(), app=App(fail=RuntimeError("boom")))
    error_id = headers[b"x-error-id"].decode()
    assert status == 500 and len(error_id) == 12 and headers[b"content-type"] == b"application/json"
    assert answer == {"error": {"type": "internal_error", "message": (
        f"the platform failed on this request (error id {error_id}); nothing was changed by it. Retry, and if it "
        "fails again give the platform's operator that error id (the server log has the details under it)")}}
    assert int(headers[b"content-length"]) == len(json.dumps(answer).encode())
    record = [r for r in caplog.records if r.name == "whileai.platform"][-1]
    assert record.getMessage() == f"error {error_id} on GET /api/v1/runs" and record.exc_info[1].args == ("boom",)
    _call(_scope("GET"), chunks=(), app=App(fail=RuntimeError("quiet")), quiet=True)
    record = [r for r in caplog.records if r.name == "whileai.platform"][-1]
    assert record.getMessage().endswith(" on GET /api/v1/runs: RuntimeError: quiet") and not record.exc_info
    status, _, _, _, sent = _call(_scope("GET"), chunks=(), app=App(fail=RuntimeError("late"), start_then_fail=True))
    assert status == 200 and len(sent) == 1, "an answer already under way is not answered again"


def test_the_answer_helper_sets_length_and_only_a_401_asks_for_a_bearer_key():
    start, body = _guard._answer_bytes(401, "m", "t", close=True, extra=[(b"x-a", b"1")])
    assert body == b'{"error": {"message": "m", "type": "t"}}'
    assert start == {"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close"),
        (b"www-authenticate", b"Bearer"), (b"x-a", b"1")]}
    assert _guard._answer_bytes(403, "m", "t")[0]["headers"] == [(b"content-type", b"application/json"),
                                                                 (b"content-length", str(len(body)).encode())]


@pytest.mark.parametrize("points", [False, True])
def test_the_parse_keeps_the_strict_checks(points):
    assert _guard._parse(b'{"a": [1, 2.5]}', points) == {"a": [1, 2.5]}
    with pytest.raises(ValueError):
        _guard._parse(b"{", points)


def test_a_points_body_is_parsed_the_fast_way_and_any_other_strictly(monkeypatch):
    body = b'{"points": [{"v": 1180591620717411303424}]}'  # 2**70: past 64 bits
    points = _scope(path="/api/v1/runs/run_1/points", headers=[_length(len(body)), JSON])
    status, _, _, app, _ = _call(points, chunks=(body,))
    assert status == 200 and app.calls[0]["scope"]["state"]["json_body"] == {"points": [{"v": 2.0 ** 70}]}
    status, answer, _, app, _ = _call(_scope(headers=[_length(len(body)), JSON]), chunks=(body,))
    assert status == 422 and not app.calls
    monkeypatch.setattr(_guard, "_THREAD_PARSE_BYTES", 8)
    status, _, _, app, _ = _call(points, chunks=(body,))
    assert status == 200 and app.calls[0]["scope"]["state"]["json_body"] == {"points": [{"v": 2.0 ** 70}]}, "in a thread"


def test_a_scope_missing_its_optional_keys_is_read_with_their_defaults(caplog):
    bare = {"type": "http", "headers": [_length(0)]}
    status, _, _, app, _ = _call(bare, chunks=({"type": "http.disconnect"},))
    assert status == 200 and len(app.calls) == 1, "no method reads as GET: an empty body is not read"
    options = _scope("OPTIONS", headers=[_length(0)])
    assert len(_call(options, chunks=({"type": "http.disconnect"},))[3].calls) == 1
    app, state = App(), SimpleNamespace()
    sent: list = []

    big = defaults.PLATFORM_UNAUTH_BODY_BYTES + 1

    async def receive():
        return {"type": "http.request", "body": b"x" * big}

    async def send(message):
        sent.append(message)

    asyncio.run(RequestGuard(app, state)({"type": "http", "method": "POST", "headers": [_length(big)]}, receive, send))
    assert sent[0]["status"] == 200 and app.calls[0]["received"][0]["body"] == b"x" * big, "no store, no path: let in"
    asyncio.run(RequestGuard(App(fail=RuntimeError("loud")), state)(_scope("GET"), receive, send))
    record = [r for r in caplog.records if r.name == "whileai.platform"][-1]
    assert record.exc_info and record.exc_info[1].args == ("loud",), "not quiet unless the app state says so"


def test_a_nul_in_the_decoded_path_alone_is_refused_and_an_undecodable_path_is_let_in():
    clean_raw = _scope(raw_path=b"/api/v1/runs/a", path="/api/v1/runs/a\x00")
    assert _call(clean_raw, chunks=())[0] == 400
    assert _call(_scope("GET", path="/api/v1/runs/\udcff"), chunks=())[0] == 200


def test_every_number_in_the_query_is_read_past_a_word():
    assert _guard._number_out_of_range(b"name=abc&limit=1e999").startswith("limit='1e999' is out of range")


def test_the_body_read_stops_at_another_message_and_hands_it_on():
    chunks = ({"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.trailers"})
    status, _, _, app, _ = _call(_scope(headers=[_length(2)]), chunks=chunks)
    assert status == 200 and app.calls[0]["received"] == [{"type": "http.request", "body": b"ab", "more_body": False}]

    async def next_message():
        return await app.calls[0]["receive"]()

    assert asyncio.run(next_message()) == {"type": "http.trailers"}
    status, _, _, app, _ = _call(_scope(headers=[_length(0), (b"transfer-encoding", b"chunked")]),
                                 chunks=({"type": "http.request"},), store=False)
    assert status == 200 and app.calls[0]["received"] == [{"type": "http.request", "body": b"", "more_body": False}]
