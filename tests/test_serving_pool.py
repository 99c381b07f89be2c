"""The serving endpoint's parts that need no model: the model pool's bookkeeping and request parsing.

The pool gets a loader that returns placeholders, so least-recently-used
eviction, idle unloading, failed loads and the per-model lock are checked in
milliseconds; tests/test_serving.py runs the same pool behind the real server.
"""

from __future__ import annotations

import threading
import time

import pytest

from whileai.platform.serving import _chat as chat
from whileai.platform.serving._chat import ChatRequestError
from whileai.platform.serving._pool import ModelPool
from whileai.platform import defaults


class _Loader:
    def __init__(self, fail: set[str] | None = None, delay: float = 0.0):
        self.calls: list[tuple[str, str | None]] = []
        self.fail = fail or set()
        self.delay = delay

    def __call__(self, base, adapter):
        self.calls.append((base, adapter))
        time.sleep(self.delay)
        if base in self.fail:
            raise OSError(f"cannot load {base}")
        return object(), object()


def _use(pool, base, adapter=None):
    with pool.use(base, adapter) as entry:
        return entry


def test_least_recently_used_goes_first():
    loader = _Loader()
    pool = ModelPool(max_loaded=2, idle_s=60, loader=loader)
    try:
        _use(pool, "a")
        _use(pool, "b", "x")
        _use(pool, "a")  # a is now the most recent
        _use(pool, "c")
        assert pool.loaded() == [("a", None), ("c", None)]
        _use(pool, "b", "x")
        assert loader.calls.count(("b", "x")) == 2 and loader.calls.count(("a", None)) == 1
        assert pool.is_loaded("b", "x") and not pool.is_loaded("a", None)
    finally:
        pool.close()


def test_idle_models_are_dropped_and_the_check_thread_ends():
    pool = ModelPool(max_loaded=4, idle_s=0.2, loader=_Loader())
    _use(pool, "a")
    assert pool.loaded() == [("a", None)] and pool._reaper is not None
    deadline = time.monotonic() + 5
    while (pool.loaded() or pool._reaper is not None) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.loaded() == [] and pool._reaper is None  # idle to zero: no weights, no thread
    _use(pool, "a")  # loads again on demand
    assert pool.loaded() == [("a", None)]
    pool.close()
    assert pool.loaded() == []
    with pytest.raises(RuntimeError, match="closed"):
        _use(pool, "a")


def test_a_model_in_use_is_never_dropped():
    pool = ModelPool(max_loaded=1, idle_s=0.05, loader=_Loader())
    try:
        with pool.use("a", None) as held:
            _use(pool, "b")  # over capacity while a is busy: b is the one that goes
            time.sleep(0.3)  # past the idle period
            assert held.model is not None and pool.is_loaded("a", None)
        assert not pool.is_loaded("b", None)
    finally:
        pool.close()


def test_a_failed_load_keeps_nothing_and_is_retried():
    loader = _Loader(fail={"broken"})
    pool = ModelPool(loader=loader)
    try:
        for _ in range(2):
            with pytest.raises(OSError, match="broken"):
                _use(pool, "broken")
        assert pool.loaded() == [] and len(loader.calls) == 2
    finally:
        pool.close()


def test_concurrent_first_requests_load_once():
    loader = _Loader(delay=0.2)
    pool = ModelPool(loader=loader)
    try:
        threads = [threading.Thread(target=_use, args=(pool, "a")) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert loader.calls == [("a", None)]
    finally:
        pool.close()


def test_settings_come_from_arguments_then_the_environment(monkeypatch):
    monkeypatch.setenv(defaults.SERVING_IDLE_UNLOAD_ENV, "12.5")
    monkeypatch.setenv(defaults.SERVING_MAX_LOADED_ENV, "3")
    pool = ModelPool(loader=_Loader())
    assert (pool.max_loaded, pool.idle_s) == (3, 12.5)
    assert ModelPool(max_loaded=1, idle_s=2, loader=_Loader()).idle_s == 2.0
    monkeypatch.setenv(defaults.SERVING_IDLE_UNLOAD_ENV, "soon")
    with pytest.raises(ValueError, match="WHILEAI_SERVING_IDLE_S='soon'"):
        ModelPool(loader=_Loader())
    monkeypatch.delenv(defaults.SERVING_IDLE_UNLOAD_ENV)
    monkeypatch.delenv(defaults.SERVING_MAX_LOADED_ENV)
    assert ModelPool(loader=_Loader()).idle_s == defaults.SERVING_IDLE_UNLOAD_S
    with pytest.raises(ValueError, match="max_loaded"):
        ModelPool(max_loaded=0)


# --------------------------------------------------------------------------- requests


def test_request_parsing_names_every_problem():
    with pytest.raises(ChatRequestError) as caught:
        chat.parse_request({"model": "m", "messages": [], "temperature": 9})
    assert "messages" in caught.value.message and "temperature" in caught.value.message
    assert caught.value.status == 400 and caught.value.body()["error"]["type"] == "invalid_request_error"
    with pytest.raises(ChatRequestError, match="JSON object"):
        chat.parse_request(["not", "an", "object"])
    with pytest.raises(ChatRequestError, match="image_url"):
        chat.parse_request({"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "x"}}]}]})
    with pytest.raises(ChatRequestError, match="stop"):
        chat.parse_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stop": ["a"] * 5})
    with pytest.raises(ChatRequestError, match="stream=true with n"):
        chat.parse_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "n": 2})
    ok = chat.parse_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "user": "someone"})
    assert ok.model == "m"  # fields this endpoint does not read are accepted


def test_messages_are_normalised_for_the_chat_template():
    messages = chat.normalise_messages([
        {"role": "developer", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
    ])
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1]["tool_calls"][0]["function"] == {"name": "f", "arguments": {"x": 1}}
    assert messages[2] == {"role": "tool", "content": "2", "tool_call_id": "c1"}


@pytest.mark.parametrize(
    ("text", "markers", "expected"),
    [
        ("Hello there", ["<tool_call>"], 11),
        ("Sure <tool_call>{", ["<tool_call>"], 5),
        ("Sure <tool_", ["<tool_call>"], 5),  # might be the start of a block: held back
        ("a STOP b", ["STOP"], 2),
        ("ends with ST", ["STOP", "<tool_call>"], 10),
        ("", ["x"], 0),
    ],
)
def test_streaming_holds_back_what_may_be_a_marker(text, markers, expected):
    assert chat.safe_prefix_length(text, markers) == expected


def test_a_reply_becomes_tool_calls_only_when_tools_were_given():
    text = 'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    message, is_call = chat.reply_message(text, tools_on=True)
    assert is_call and message["content"] == "Let me check."
    assert message["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}
    message, is_call = chat.reply_message(text, tools_on=False)
    assert not is_call and message == {"role": "assistant", "content": text}
    message, is_call = chat.reply_message("<tool_call>not json</tool_call>", tools_on=True)
    assert not is_call and "not json" in message["content"]
