"""OpenAI-compatible serving of finished adapters: /v1/chat/completions and /v1/models.

Mounted at the root of the platform app, beside ``/api/v1``. The caller sends
its account's API key as the bearer and a served model's name as ``model``
(``wai.serve(run, name)`` registers one). The first request for a model loads
its base and adapter; a few stay in memory and an idle one is dropped (see
:mod:`whileai.platform.serving._pool`). Generation runs in a worker thread, one
request per model at a time. Errors answer in OpenAI's shape,
``{"error": {"message", "type", "param", "code"}}``, so the official ``openai``
client raises its usual exceptions (``NotFoundError`` for an unknown model).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypedDict

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from whileai.platform.serving import _chat as chat
from whileai.platform.serving._chat import ChatRequestError
from whileai.platform.serving._pool import Loader, ModelPool
from whileai.platform.store.records import ModelRecord

__all__ = ["configure_serving", "router", "serving_pool", "serving_remote"]

_POOL_LOCK = threading.Lock()
_UNSET: Any = object()  # "not configured yet", distinct from None ("the platform generates itself")


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    yield
    pool = getattr(app.state, "serving_pool", None)
    if pool is not None:
        pool.close()
    remote = getattr(app.state, "serving_remote", None)
    if remote is not None and remote is not _UNSET:
        await remote.aclose()


router = APIRouter(lifespan=_lifespan)


def configure_serving(app: FastAPI, *, max_loaded: int | None = None, idle_s: float | None = None,
                      loader: Loader | None = None, remote: Any = _UNSET) -> ModelPool:
    """Give ``app`` a fresh model pool (``None`` keeps each default); returns it.

    ``loader(base_model, adapter) -> (model, tokenizer)`` replaces how models are
    loaded (default :func:`whileai.platform.serving._pool.load_model`).
    ``remote`` (a :class:`whileai.platform.serving._remote.RemoteServing`, or
    None for the platform's own generation) overrides the serve target.
    """
    with _POOL_LOCK:
        old = getattr(app.state, "serving_pool", None)
        app.state.serving_pool = ModelPool(max_loaded=max_loaded, idle_s=idle_s, loader=loader)
        if remote is not _UNSET:
            app.state.serving_remote = remote
    if old is not None:
        old.close()
    return app.state.serving_pool


def serving_remote(app: Any) -> Any:
    """The app's forwarder to a remote deployment, or None when the platform generates itself.

    Decided once per app from the serve target (SERVE_TARGET_ENV or config.json).
    """
    remote = getattr(app.state, "serving_remote", _UNSET)
    if remote is _UNSET:
        with _POOL_LOCK:
            remote = getattr(app.state, "serving_remote", _UNSET)
            if remote is _UNSET:
                from whileai.platform.serving._remote import ModalServeCloud, RemoteServing, serve_target

                remote = RemoteServing(ModalServeCloud()) if serve_target() == "modal" else None
                app.state.serving_remote = remote
    return remote


def serving_pool(app: Any) -> ModelPool:
    """The app's model pool, created with the defaults on first use."""
    pool = getattr(app.state, "serving_pool", None)
    if pool is None:
        with _POOL_LOCK:
            pool = getattr(app.state, "serving_pool", None)
            if pool is None:
                pool = app.state.serving_pool = ModelPool()
    return pool


# --------------------------------------------------------------------------- helpers


def _error(exc: ChatRequestError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status)


def _caller(request: Request) -> str:
    """The caller's account id, or a ChatRequestError in OpenAI's 401 shape."""
    from whileai.platform.api.common import ApiError, account_id

    try:
        return account_id(request)
    except ApiError as exc:
        raise ChatRequestError(exc.message, status=exc.status, code="invalid_api_key") from None


def _model_row(request: Request, acct: str, name: str) -> ModelRecord:
    from whileai.platform.api.common import store
    from whileai.platform.store import NotFoundError

    try:
        return store(request).get_model(acct, name)
    except NotFoundError:
        raise ChatRequestError(
            f"The model {name!r} does not exist in this account. List the served models with GET /v1/models "
            "(wai.models() in Python), or serve a finished run under that name with wai.serve(run, name).",
            status=404, param="model", code="model_not_found",
        ) from None


def _base_of(row: ModelRecord) -> str:
    base = row.get("baseModel")
    if not base:
        raise ChatRequestError(
            f"the model {row.get('name')!r} has no base model on its registry row; serve it again with "
            "wai.serve(run, name, base_model=...)", status=409, param="model", code="model_misconfigured",
        )
    return base


class ModelObject(TypedDict):
    """OpenAI's model object for a served name, with its registry ``version`` and whether it is ``loaded`` now."""

    id: str
    object: str  #: always ``model``
    created: int
    owned_by: str
    version: int | None
    loaded: bool


def _model_object(row: ModelRecord, pool: ModelPool) -> ModelObject:
    """OpenAI's model object, plus ``version`` and ``loaded`` (whether its weights are in memory now)."""
    base = row.get("baseModel")
    return {
        "id": row["name"],
        "object": "model",
        "created": int(row.get("created_at") or 0),
        "owned_by": "whileai",
        "version": row.get("version"),
        "loaded": isinstance(base, str) and bool(base) and pool.is_loaded(base, row.get("adapter")),
    }


# --------------------------------------------------------------------------- routes


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    """The caller's served models, as OpenAI's model list."""
    from whileai.platform.api.common import store

    try:
        acct = await run_in_threadpool(_caller, request)
    except ChatRequestError as exc:
        return _error(exc)
    rows = await run_in_threadpool(store(request).list_models, acct)
    pool = serving_pool(request.app)
    return JSONResponse({"object": "list", "data": [_model_object(r, pool) for r in rows]})


@router.get("/v1/models/{name:path}")
async def get_model(name: str, request: Request) -> Response:
    """One served model; 404 naming it when the caller's account has no such name."""
    try:
        acct = await run_in_threadpool(_caller, request)
        row = await run_in_threadpool(_model_row, request, acct, name)
    except ChatRequestError as exc:
        return _error(exc)
    return JSONResponse(_model_object(row, serving_pool(request.app)))


@router.post("/v1/chat/completions")
async def chat_completions(request: Request) -> Response:
    """One chat completion (or an SSE stream of chunks when ``stream`` is true)."""
    try:
        acct = await run_in_threadpool(_caller, request)
        try:
            body = json.loads(await request.body() or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ChatRequestError(f"the request body is not valid JSON ({exc}); send a chat completion object") from exc
        req = chat.parse_request(body)
        row = await run_in_threadpool(_model_row, request, acct, req.model)
        base, adapter = _base_of(row), row.get("adapter")
    except ChatRequestError as exc:
        return _error(exc)
    try:
        remote = serving_remote(request.app)
    except ValueError as exc:  # a serve target the platform does not know: the operator's setting
        return _error(ChatRequestError(str(exc), status=500, type="server_error", code="serving_misconfigured"))
    if remote is not None:  # the serve target is a remote deployment: it generates, the platform forwards
        return await remote.complete(acct, row, body)
    pool = serving_pool(request.app)
    tools_on = bool(req.tools) and req.tool_choice != "none"
    if req.stream:
        return await _stream(pool, row, base, adapter, req, tools_on)
    try:
        prompt_len, replies = await run_in_threadpool(_complete, pool, base, adapter, req, tools_on)
    except ChatRequestError as exc:
        return _error(exc)
    return JSONResponse(chat.completion_body(req.model, row.get("version"), prompt_len, replies, tools_on))


def _load_failed(base: str, adapter: str | None, exc: Exception) -> ChatRequestError:
    where = f"base {base!r}" + (f" with adapter {adapter!r}" if adapter else "")
    return ChatRequestError(f"the model could not be loaded ({where}): {type(exc).__name__}: {exc}",
                        status=500, type="server_error", code="model_load_failed")


def _complete(pool: ModelPool, base: str, adapter: str | None, req: chat.ChatRequest,
              tools_on: bool) -> tuple[int, list[chat.Completion]]:
    try:
        ctx = pool.use(base, adapter)
        entry = ctx.__enter__()
    except Exception as exc:
        raise _load_failed(base, adapter, exc) from exc
    try:
        prompt = chat.render_prompt(entry.tokenizer, req.messages, req.tools if tools_on else None)
        return len(prompt), chat.generate(entry.model, entry.tokenizer, prompt, req)
    except ChatRequestError:
        raise
    except Exception as exc:
        raise ChatRequestError(f"generation failed: {type(exc).__name__}: {exc}", status=500,
                           type="server_error") from exc
    finally:
        ctx.__exit__(None, None, None)


# --------------------------------------------------------------------------- streaming


class _QueueStreamer:
    """A transformers streamer that hands each new token id to the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue):
        self._loop, self._queue, self._prompt_seen = loop, queue, False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:  # generate() first pushes the prompt itself
            self._prompt_seen = True
            return
        ids = [int(t) for t in value.reshape(-1).tolist()]
        self._loop.call_soon_threadsafe(self._queue.put_nowait, ("tokens", ids))

    def end(self) -> None:
        pass


def _stream_worker(pool: ModelPool, base: str, adapter: str | None, req: chat.ChatRequest, tools_on: bool,
                   loop: asyncio.AbstractEventLoop, queue: asyncio.Queue, cancel: threading.Event) -> None:
    def send(kind: str, value: Any) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

    try:
        ctx = pool.use(base, adapter)
        entry = ctx.__enter__()
    except Exception as exc:
        send("error", _load_failed(base, adapter, exc))
        return
    try:
        prompt = chat.render_prompt(entry.tokenizer, req.messages, req.tools if tools_on else None)
        send("ready", (len(prompt), entry.tokenizer))
        replies = chat.generate(entry.model, entry.tokenizer, prompt, req,
                                streamer=_QueueStreamer(loop, queue), cancel=cancel)
        send("done", replies[0])
    except ChatRequestError as exc:
        send("error", exc)
    except Exception as exc:  # a failure mid-stream still ends the stream with an error event
        send("error", ChatRequestError(f"generation failed: {type(exc).__name__}: {exc}", status=500,
                                   type="server_error"))
    finally:
        ctx.__exit__(None, None, None)


def _stream_markers(req: chat.ChatRequest, tokenizer: Any, tools_on: bool) -> list[str]:
    """What a streamed reply's text is held back at: the request's stop strings, and with tools on the reply
    format's tool-call markers (a call is sent whole at the end, never as content)."""
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    from whileai.core.toolcalls import CALL_MARKERS
    from whileai.kit import reply_format

    return stops + (list(CALL_MARKERS.get(reply_format(tokenizer), CALL_MARKERS["hermes"])) if tools_on else [])


def _chunk_writer(req: chat.ChatRequest, row: ModelRecord, include_usage: bool) -> Callable[..., str]:
    """A function writing one server-sent event of the stream: ``chunk(delta, finish=None, usage=None,
    choices=True)`` returns the ``data:`` line of a ``chat.completion.chunk`` with this stream's id, time and model
    (``usage`` only where the request asked for it, ``choices`` False for the usage-only chunk)."""
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": req.model, "system_fingerprint": f"whileai-{req.model}-v{row.get('version')}"}

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None, choices: bool = True) -> str:
        body = dict(head, choices=[{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]
                    if choices else [])
        if include_usage:
            body["usage"] = usage
        return f"data: {json.dumps(body)}\n\n"

    return chunk


def _final_chunks(chunk: Callable[..., str], reply: chat.Completion, sent: int, prompt_len: int, tools_on: bool,
                  include_usage: bool) -> Iterator[str]:
    """The stream's last events once generation is done, ``sent`` characters of content already streamed: the rest
    of the content, the tool calls (whole), the finish reason, and the usage where the request asked for it."""
    message, is_call = chat.reply_message(reply.text, tools_on, reply.tool_format)
    content = message.get("content") or ""
    if content.startswith(reply.text[:sent]) and len(content) > sent:
        yield chunk({"content": content[sent:]})
    if is_call:
        calls = [dict(call, index=i) for i, call in enumerate(message["tool_calls"])]
        yield chunk({"tool_calls": calls})
    yield chunk({}, "tool_calls" if is_call else reply.ended)
    if include_usage:
        usage = {"prompt_tokens": prompt_len, "completion_tokens": reply.completion_tokens,
                 "total_tokens": prompt_len + reply.completion_tokens}
        yield chunk({}, usage=usage, choices=False)


async def _stream(pool: ModelPool, row: ModelRecord, base: str, adapter: str | None,
                  req: chat.ChatRequest, tools_on: bool) -> Response:
    """Answer a ``stream: true`` request as server-sent events: generation runs in a worker thread that hands each
    new token to the event loop, and the text is sent as it grows, held back at a stop string or tool-call marker;
    a failure before generation starts (loading the model, rendering the prompt) answers a plain error instead."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    cancel = threading.Event()
    worker = threading.Thread(target=_stream_worker, name="whileai-serving-stream", daemon=True,
                              args=(pool, base, adapter, req, tools_on, loop, queue, cancel))
    worker.start()
    kind, value = await queue.get()
    if kind == "error":  # nothing was sent yet: answer a plain error
        return _error(value)
    prompt_len, tokenizer = value
    markers = _stream_markers(req, tokenizer, tools_on)
    include_usage = bool((req.stream_options or {}).get("include_usage"))
    chunk = _chunk_writer(req, row, include_usage)

    async def events() -> AsyncIterator[str]:
        ids: list[int] = []
        sent = 0
        try:
            yield chunk({"role": "assistant", "content": ""})
            while True:
                kind, value = await queue.get()
                if kind == "tokens":
                    ids.extend(value)
                    text = chat.decode(tokenizer, ids)
                    if text.endswith("\ufffd"):  # half a character: wait for the rest
                        continue
                    safe = chat.safe_prefix_length(text, markers)
                    if safe > sent:
                        yield chunk({"content": text[sent:safe]})
                        sent = safe
                    continue
                if kind == "error":
                    yield f"data: {json.dumps(value.body())}\n\n"
                    break
                for event in _final_chunks(chunk, value, sent, prompt_len, tools_on, include_usage):
                    yield event
                break
            yield "data: [DONE]\n\n"
        finally:
            cancel.set()  # the client left early: stop generating at the next token

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
