"""Serving from Modal: the platform's endpoint forwarding to a vLLM deployment.

The platform is a real uvicorn server on a loopback port and the caller is the
official ``openai`` client. vLLM needs a GPU, so the deployment is a stand-in
(another loopback server) that answers vLLM's routes the way vLLM documents
them: ``/v1/load_lora_adapter`` (400 when already loaded), ``/v1/chat/completions``
(404 "The model `x` does not exist." for an unknown adapter, 401 for a wrong
bearer), streams as server-sent events. The Volume is a folder. Everything the
platform does is real: the registry, account keys, the upload, the load on a
404 and the retry, the renaming of replies, the 404 after unserve.
"""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

openai = pytest.importorskip("openai")

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse  # noqa: E402

from whileai.platform import serving  # noqa: E402
from whileai.platform.serving._chat import ChatRequestError  # noqa: E402
from whileai.platform.serving._remote import ModalServeCloud, RemoteServing, serve_target, vllm_adapter_name  # noqa: E402
from whileai.platform.server import serve_in_thread  # noqa: E402
from whileai.domain import defaults  # noqa: E402
from whileai.core import defaults as core_defaults  # noqa: E402
from whileai.kit import defaults as kit_defaults  # noqa: E402
from whileai.platform import defaults as platform_defaults  # noqa: E402

BASE = "Qwen/Qwen3-0.6B"
KEY = "deployment-key-0123456789"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": "Weather in Paris?"}]


# --------------------------------------------------------------------------- the stand-ins


class FakeVllm:
    """vLLM's OpenAI server routes with LoRA runtime loading, on a loopback port."""

    def __init__(self, volume: Path):
        self.volume = volume
        self.loaded: dict[str, str] = {}
        self.calls: list[tuple[str, str | None, str]] = []  # (path, model or lora name, bearer)
        app = FastAPI()

        def refused(request: Request) -> JSONResponse | None:
            if request.headers.get("authorization") != f"Bearer {KEY}":
                return JSONResponse({"error": "Unauthorized"}, status_code=401)
            return None

        @app.post("/v1/load_lora_adapter")
        async def load(request: Request):
            body = await request.json()
            self.calls.append(("load", body["lora_name"], request.headers.get("authorization", "")))
            if (bad := refused(request)) is not None:
                return bad
            if body["lora_name"] in self.loaded:
                return JSONResponse({"error": {"message": f"The lora adapter '{body['lora_name']}' has already been "
                                               "loaded.", "type": "InvalidUserInput", "code": 400}}, status_code=400)
            local = self.volume / Path(body["lora_path"]).relative_to(platform_defaults.MODAL_VOLUME_MOUNT)
            if not (local / "adapter_config.json").is_file():
                return JSONResponse({"error": {"message": f"No adapter found for {body['lora_path']}",
                                               "type": "NotFoundError", "code": 404}}, status_code=404)
            self.loaded[body["lora_name"]] = body["lora_path"]
            return PlainTextResponse(f"Success: LoRA adapter '{body['lora_name']}' added successfully.")

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            model = body.get("model")
            self.calls.append(("chat", model, request.headers.get("authorization", "")))
            if (bad := refused(request)) is not None:
                return bad
            if model != BASE and model not in self.loaded:
                return JSONResponse({"error": {"message": f"The model `{model}` does not exist.",
                                               "type": "NotFoundError", "param": "model", "code": 404}},
                                    status_code=404)
            call = {"id": "chatcmpl-tool-1", "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}
            if body.get("stream"):
                def events():
                    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": model}
                    yield f"data: {json.dumps(dict(head, choices=[{'index': 0, 'delta': {'role': 'assistant', 'content': ''}, 'finish_reason': None}]))}\n\n"
                    yield f"data: {json.dumps(dict(head, choices=[{'index': 0, 'delta': {'tool_calls': [dict(call, index=0)]}, 'finish_reason': None}]))}\n\n"
                    yield f"data: {json.dumps(dict(head, choices=[{'index': 0, 'delta': {}, 'finish_reason': 'tool_calls'}]))}\n\n"
                    yield "data: [DONE]\n\n"

                return StreamingResponse(events(), media_type="text/event-stream")
            message = ({"role": "assistant", "content": None, "tool_calls": [call]} if body.get("tools")
                       else {"role": "assistant", "content": f"answered by {model}"})
            return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if body.get("tools") else "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}}

        self.app = app


def _start(app) -> tuple[str, callable]:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # so asyncio sets TCP_NODELAY
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)

    def stop():
        server.should_exit = True
        thread.join(10)
        sock.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", stop


class FolderVolume:
    """The seam's stand-in: the Volume is a folder; the URL and key are the stand-in server's."""

    def __init__(self, url: str, volume: Path, base: str = BASE):
        self._url, self.volume, self._base = url, volume, base
        self.uploads: list[str] = []

    def url(self) -> str:
        return self._url

    def key(self) -> str:
        return KEY

    def base_model(self) -> str:
        return self._base

    def adapter_path(self, run_id: str, local: Path | None) -> str:
        target = self.volume / run_id
        if not target.exists():
            shutil.copytree(local, target)
            self.uploads.append(run_id)
        return f"{platform_defaults.MODAL_VOLUME_MOUNT}/{run_id}"


@pytest.fixture
def deployment(tmp_path, home):
    volume = tmp_path / "volume"
    volume.mkdir()
    fake = FakeVllm(volume)
    url, stop_fake = _start(fake.app)
    platform = serve_in_thread()
    backend = FolderVolume(url, volume)
    remote = RemoteServing(backend)
    remote.reload_wait = 0.01
    serving.configure_serving(platform.app, remote=remote)
    _, key = platform.store.create_account("alice")
    api = httpx.Client(base_url=platform.base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30)
    try:
        yield {"fake": fake, "backend": backend, "platform": platform, "key": key, "api": api,
               "account": api.get("/api/v1/me").json()["account_id"], "tmp": tmp_path}
    finally:
        api.close()
        platform.stop()
        stop_fake()


def _adapter(tmp: Path, run_id: str) -> Path:
    from whileai.core.paths import adapter_dir

    folder = adapter_dir(run_id)  # where a job of the platform leaves a run's adapter
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": 16, "base_model_name_or_path": BASE}))
    (folder / "adapter_model.safetensors").write_bytes(b"weights")
    return folder


def _serve(d, name: str, base: str = BASE) -> dict:
    """Register ``name`` on a new run whose adapter folder is on this machine (named by the run, as jobs write it)."""
    run_id = d["api"].post("/api/v1/runs", json={"name": f"train-{name}"}).json()["id"]
    folder = _adapter(d["tmp"], run_id)
    answer = d["api"].post("/api/v1/models", json={"name": name, "baseModel": base, "adapter": str(folder),
                                                   "adapterRunId": run_id})
    assert answer.status_code in (200, 201), answer.text
    return answer.json()


# --------------------------------------------------------------------------- forwarding


def test_a_tool_call_comes_back_through_the_platform_from_the_deployment(deployment):
    d = deployment
    row = _serve(d, "weather-agent")
    run_id = row["adapterRunId"]
    client = openai.OpenAI(base_url=row["endpoint"], api_key=d["key"], max_retries=0)
    lora = vllm_adapter_name(d["account"], "weather-agent", 1)

    reply = client.chat.completions.create(model="weather-agent", messages=ASK, tools=TOOLS, temperature=0)
    assert reply.model == "weather-agent"  # the caller's name, never the deployment's adapter id
    assert reply.choices[0].finish_reason == "tool_calls"
    call = reply.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    # first try 404 (cold deployment), then the upload and load, then the retry
    assert [(kind, model) for kind, model, _ in d["fake"].calls] == [("chat", lora), ("load", lora), ("chat", lora)]
    assert all(bearer == f"Bearer {KEY}" for *_, bearer in d["fake"].calls)  # the account key never leaves
    assert d["backend"].uploads == [run_id]
    assert (d["backend"].volume / run_id / "adapter_config.json").is_file()

    d["fake"].calls.clear()
    again = client.chat.completions.create(model="weather-agent", messages=ASK)
    assert again.choices[0].message.content == "answered by weather-agent"  # renamed inside texts too
    assert [kind for kind, *_ in d["fake"].calls] == ["chat"]  # warm: no second load, no second upload
    assert d["backend"].uploads == [run_id]

    chunks = list(client.chat.completions.create(model="weather-agent", messages=ASK, tools=TOOLS, stream=True))
    assert {c.model for c in chunks} == {"weather-agent"}
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert deltas and deltas[0].function.name == "get_weather"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_a_new_version_is_its_own_adapter_and_unserve_answers_404_at_once(deployment):
    d = deployment
    _serve(d, "agent")
    client = openai.OpenAI(base_url=f"{d['platform'].base_url}/v1", api_key=d["key"], max_retries=0)
    client.chat.completions.create(model="agent", messages=ASK)
    bumped = _serve(d, "agent")
    assert bumped["version"] == 2
    client.chat.completions.create(model="agent", messages=ASK)
    assert set(d["fake"].loaded) == {vllm_adapter_name(d["account"], "agent", 1),
                                     vllm_adapter_name(d["account"], "agent", 2)}
    assert d["fake"].loaded[vllm_adapter_name(d["account"], "agent", 2)] == \
        f"{platform_defaults.MODAL_VOLUME_MOUNT}/{bumped['adapterRunId']}"

    assert d["api"].delete("/api/v1/models/agent").json() == {"name": "agent", "deleted": True}
    calls = len(d["fake"].calls)
    with pytest.raises(openai.NotFoundError, match="agent"):
        client.chat.completions.create(model="agent", messages=ASK)
    assert len(d["fake"].calls) == calls  # refused by the registry; nothing reached the deployment


def test_another_account_cannot_reach_a_name_it_does_not_serve(deployment):
    d = deployment
    _serve(d, "private-agent")
    _, other = d["platform"].store.create_account("bob")
    client = openai.OpenAI(base_url=f"{d['platform'].base_url}/v1", api_key=other, max_retries=0)
    with pytest.raises(openai.NotFoundError, match="private-agent"):
        client.chat.completions.create(model="private-agent", messages=ASK)
    assert d["fake"].calls == []


def test_a_base_the_deployment_does_not_serve_is_refused_naming_both(deployment):
    d = deployment
    _serve(d, "llama-agent", base="meta-llama/Llama-3.2-1B-Instruct")
    client = openai.OpenAI(base_url=f"{d['platform'].base_url}/v1", api_key=d["key"], max_retries=0)
    with pytest.raises(openai.ConflictError) as caught:
        client.chat.completions.create(model="llama-agent", messages=ASK)
    message = str(caught.value)
    assert "meta-llama/Llama-3.2-1B-Instruct" in message and BASE in message
    assert platform_defaults.MODAL_SERVE_BASE_ENV in message and d["fake"].calls == []


def test_an_adapter_the_deployment_cannot_load_is_a_502_with_vllms_reason(deployment):
    d = deployment
    d["backend"].adapter_path = lambda run_id, local: f"{platform_defaults.MODAL_VOLUME_MOUNT}/missing"
    _serve(d, "broken")
    client = openai.OpenAI(base_url=f"{d['platform'].base_url}/v1", api_key=d["key"], max_retries=0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="broken", messages=ASK)
    assert caught.value.status_code == 502 and "No adapter found" in str(caught.value)
    loads = [c for c in d["fake"].calls if c[0] == "load"]
    assert len(loads) == platform_defaults.MODAL_SERVE_LOAD_RETRIES + 1  # retried across Volume reloads, then refused


def test_an_unreachable_deployment_is_a_503_saying_how_to_redeploy(deployment):
    d = deployment
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    serving.configure_serving(d["platform"].app,
                              remote=RemoteServing(FolderVolume(f"http://127.0.0.1:{closed}", d["tmp"] / "v")))
    _serve(d, "agent")
    client = openai.OpenAI(base_url=f"{d['platform'].base_url}/v1", api_key=d["key"], max_retries=0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="agent", messages=ASK)
    assert caught.value.status_code == 503 and "modal deploy -m whileai.platform.serving.modal" in str(caught.value)


# --------------------------------------------------------------------------- configuration


def test_the_serve_target_comes_from_the_environment_or_config_json(home, monkeypatch):
    assert serve_target() == "platform"
    (home / "config.json").write_text(json.dumps({"serve_target": "modal"}))
    assert serve_target() == "modal"
    monkeypatch.setenv(platform_defaults.SERVE_TARGET_ENV, "platform")
    assert serve_target() == "platform"
    monkeypatch.setenv(platform_defaults.SERVE_TARGET_ENV, "gpu-box")
    with pytest.raises(ValueError, match=r"'gpu-box'.*platform, modal"):
        serve_target()


def test_an_app_picks_its_forwarder_from_the_serve_target_once(home, monkeypatch):
    from fastapi import FastAPI as App

    monkeypatch.setenv(platform_defaults.SERVE_TARGET_ENV, "modal")
    app = App()
    remote = serving.serving_remote(app)
    assert isinstance(remote, RemoteServing) and isinstance(remote.backend, ModalServeCloud)
    assert serving.serving_remote(app) is remote
    monkeypatch.setenv(platform_defaults.SERVE_TARGET_ENV, "platform")
    assert serving.serving_remote(App()) is None


def test_the_modal_backend_names_what_is_missing(monkeypatch):
    monkeypatch.delenv(platform_defaults.MODAL_SERVE_KEY_ENV, raising=False)
    with pytest.raises(ChatRequestError, match=platform_defaults.MODAL_SERVE_KEY_ENV) as caught:
        ModalServeCloud().key()
    assert caught.value.status == 503
    monkeypatch.setenv(platform_defaults.MODAL_SERVE_URL_ENV, "https://ws--whileai-serve-serve.modal.run/")
    assert ModalServeCloud().url() == "https://ws--whileai-serve-serve.modal.run"
    monkeypatch.setenv(platform_defaults.MODAL_SERVE_BASE_ENV, "Qwen/Qwen3-1.7B")
    assert ModalServeCloud().base_model() == "Qwen/Qwen3-1.7B"


def test_the_deployment_runs_vllm_with_lora_tool_parsing_and_the_key(monkeypatch):
    from whileai.platform.serving import modal as serving_modal

    argv = serving_modal.vllm_argv("Qwen/Qwen3-0.6B")
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen3-0.6B"] and "--enable-lora" in argv
    flag = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}
    assert int(flag["--max-lora-rank"]) >= max(core_defaults.TRAIN_LORA_R, kit_defaults.KIT_SFT_LORA_R)
    assert flag["--tool-call-parser"] == "hermes" and "--enable-auto-tool-choice" in argv
    assert flag["--port"] == str(platform_defaults.MODAL_SERVE_PORT) and flag["--host"] == "0.0.0.0"
    assert KEY not in " ".join(argv)  # the key travels in the environment, not on a command line
    with pytest.raises(RuntimeError, match=platform_defaults.MODAL_SERVE_KEY_ENV):
        serving_modal.vllm_env({})
    env = serving_modal.vllm_env({platform_defaults.MODAL_SERVE_KEY_ENV: KEY})
    assert env["VLLM_API_KEY"] == KEY and env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"
    assert serving_modal.deployed_base({}) == platform_defaults.MODAL_SERVE_BASE
    assert serving_modal.app.name == platform_defaults.MODAL_SERVE_APP_NAME
    assert platform_defaults.MODAL_SERVE_BASE in defaults.SERVED_BASES


def test_an_adapter_that_cannot_reach_the_volume_is_a_503_naming_the_cause(deployment):
    d = deployment

    def no_token(run_id, local):
        raise PermissionError("Token missing. Could not authenticate client.")

    d["backend"].adapter_path = no_token
    _serve(d, "agent")
    client = openai.OpenAI(base_url=f"{d['platform'].base_url}/v1", api_key=d["key"], max_retries=0)
    with pytest.raises(openai.InternalServerError) as caught:
        client.chat.completions.create(model="agent", messages=ASK)
    assert caught.value.status_code == 503 and "Token missing" in str(caught.value)
    assert "modal token new" in str(caught.value)
