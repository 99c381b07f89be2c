"""The client seam: requests and errors over MockTransport, the credential chain, the embedded platform."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from whileai.domain import client as _client
from whileai.core import defaults as core_defaults
from whileai.domain.client import Client, embedded_base_url, get_client
from whileai.core.errors import NotFoundError, PlatformError


def _client_over(handler) -> Client:
    return Client("http://platform.test", "wai_secret", transport=httpx.MockTransport(handler))


def test_request_sends_json_with_bearer_under_api_prefix():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["path"] = request.url.path
        seen["query"] = dict(request.url.params)
        seen["auth"] = request.headers["authorization"]
        seen["body"] = json.loads(request.content)
        return httpx.Response(201, json={"id": "run_0123456789abcdef"})

    answer = _client_over(handler).request("POST", "/runs", json={"name": "a"}, params={"x": 1, "skip": None})
    assert answer == {"id": "run_0123456789abcdef"}
    assert seen == {"path": "/api/v1/runs", "query": {"x": "1"}, "auth": "Bearer wai_secret", "body": {"name": "a"}}


def test_paths_outside_the_api_are_sent_as_given():
    paths = []

    def handler(request):
        paths.append(request.url.path)
        return httpx.Response(200, json={})

    client = _client_over(handler)
    client.request("GET", "/v1/models")
    client.request("GET", "runs")
    assert paths == ["/v1/models", "/api/v1/runs"]


def test_errors_carry_the_servers_message_and_status():
    def handler(request):
        if request.url.path.endswith("/missing"):
            return httpx.Response(404, json={"error": {"message": "no run run_x in this account", "type": "not_found"}})
        return httpx.Response(422, json={"error": {"message": "status='bogus' is not a run status", "type": "invalid"}})

    client = _client_over(handler)
    with pytest.raises(NotFoundError, match="no run run_x in this account") as missing:
        client.request("GET", "/runs/missing")
    assert missing.value.status == 404 and isinstance(missing.value, LookupError)
    with pytest.raises(PlatformError, match="'bogus' is not a run status") as invalid:
        client.request("PATCH", "/runs/run_x", json={"status": "bogus"})
    assert invalid.value.status == 422
    assert not isinstance(invalid.value, NotFoundError)


def test_unreachable_and_slow_platforms_are_status_zero():
    def refused(request):
        raise httpx.ConnectError("connection refused", request=request)

    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(PlatformError, match="cannot reach the platform") as exc:
        _client_over(refused).request("GET", "/runs")
    assert exc.value.status == 0
    with pytest.raises(PlatformError, match="did not answer in time") as exc:
        _client_over(slow).request("GET", "/runs")
    assert exc.value.status == 0


def test_non_json_answer_is_a_clear_error():
    client = _client_over(lambda request: httpx.Response(200, text="<html>hello</html>"))
    with pytest.raises(PlatformError, match="not JSON"):
        client.request("GET", "/runs")


def test_injected_http_client_is_used_as_is():
    calls = []
    http = httpx.Client(base_url="http://x.test", transport=httpx.MockTransport(lambda r: calls.append(r) or httpx.Response(200, json=[1])))
    client = Client(http=http, api_key="k")
    assert client.request("GET", "/runs") == [1]
    assert calls[0].headers["authorization"] == "Bearer k"


# --------------------------------------------------------------------------- the credential chain


def _write_config(home, **values):
    (home / "config.json").write_text(json.dumps(values))


def test_chain_explicit_beats_environment_beats_config(home, monkeypatch):
    _write_config(home, api_key="from-config", base_url="http://config.test")
    client = get_client()
    assert (client.api_key, client.base_url, client.embedded) == ("from-config", "http://config.test", False)

    monkeypatch.setenv("WHILEAI_API_KEY", "from-env")
    monkeypatch.setenv("WHILEAI_BASE_URL", "http://env.test/")
    client = get_client()
    assert (client.api_key, client.base_url) == ("from-env", "http://env.test")

    client = get_client(api_key="explicit", base_url="http://explicit.test")
    assert (client.api_key, client.base_url) == ("explicit", "http://explicit.test")
    # each field falls through on its own
    client = get_client(api_key="explicit")
    assert (client.api_key, client.base_url) == ("explicit", "http://env.test")


def test_nothing_configured_means_embedded(home):
    client = get_client()
    assert client.embedded and client.base_url == embedded_base_url()
    assert client.base_url == f"http://127.0.0.1:{core_defaults.PLATFORM_PORT}"
    me = client.request("GET", "/me")
    assert me["account_id"].startswith("acct_")
    assert (home / "local_key").read_text().strip() == client.api_key


def test_base_url_without_a_key_says_how_to_give_one(home, monkeypatch):
    monkeypatch.setenv("WHILEAI_BASE_URL", "http://server.test")
    with pytest.raises(PlatformError, match="WHILEAI_API_KEY"):
        get_client()


def test_broken_config_file_is_named(home):
    (home / "config.json").write_text("{not json")
    with pytest.raises(PlatformError, match="config.json"):
        get_client()


def test_clients_are_cached_per_key_url_and_data_root(home, monkeypatch, tmp_path):
    a = get_client(api_key="k1", base_url="http://a.test")
    assert get_client(api_key="k1", base_url="http://a.test") is a
    assert get_client(api_key="k2", base_url="http://a.test") is not a
    other = tmp_path / "other-root"
    other.mkdir()
    monkeypatch.setenv("WHILEAI_HOME", str(other))
    assert get_client(api_key="k1", base_url="http://a.test") is not a


# --------------------------------------------------------------------------- the embedded transport


def test_embedded_platform_is_the_same_app_with_the_same_errors(home):
    client = get_client()
    with pytest.raises(NotFoundError, match="run_0000000000000000"):
        client.request("GET", "/runs/run_0000000000000000")
    with pytest.raises(PlatformError) as bad:
        client.request("PATCH", "/runs/run_0000000000000000", json={"status": 3})
    assert bad.value.status in (404, 422)
    stranger = Client(embedded_base_url(), "wai_not_a_key", transport=client.http._transport)
    with pytest.raises(PlatformError) as refused:
        stranger.request("GET", "/runs")
    assert refused.value.status == 401


def test_embedded_transport_serves_many_threads_at_once(home):
    client = get_client()
    made, failures = [], []

    def worker():
        try:
            for _ in range(5):
                made.append(client.request("POST", "/runs", json={"name": "threaded"})["id"])
        except Exception as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert len(set(made)) == 20
    assert len(client.request("GET", "/runs", params={"name": "threaded"})["runs"]) == 20


def test_embedded_timeout_is_a_read_timeout(home):
    """The embedded transport's own deadline: the platform's app, one route of it slower than the request allows."""
    import anyio

    from whileai.platform.api import create_app
    from whileai.platform.store import Store, store_url

    store = Store(store_url())
    _, key = store.create_account("slow")
    app = create_app(store)
    started = threading.Event()

    async def slow() -> dict:
        started.set()
        await anyio.sleep(5)
        return {}

    app.add_api_route("/api/v1/slow", slow)
    client = Client(embedded_base_url(), key, transport=_client._EmbeddedTransport(app), embedded=True)
    with pytest.raises(PlatformError, match="did not answer in time") as exc:
        client.request("GET", "/slow", timeout=0.05)
    assert exc.value.status == 0 and started.is_set()
    assert client.request("GET", "/me")["name"] == "slow"  # the transport still serves after a timeout
