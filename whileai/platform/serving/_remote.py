"""Serving from Modal: the platform's endpoint forwards generation to a vLLM deployment.

With the serve target ``"modal"`` (SERVE_TARGET_ENV, or ``serve_target`` in the
data root's config.json) the platform keeps everything a caller sees: the
account keys, the registry, the model names and the 404 for a name that is not
served. Only generation moves: ``/v1/chat/completions`` is forwarded to the
``whileai-serve`` app (:mod:`whileai.platform.serving.modal`), vLLM with LoRA
on a GPU that scales to zero on its own.

How a request travels:

- The registry row gives the adapter's run. Its adapter lives on the adapters
  Volume under ``<run_id>/``: a Modal-trained run's already does; a local run's
  is uploaded on first use.
- Each (account, name, version) is its own vLLM adapter, so accounts never share
  a name and a re-served name never answers with the old weights. The platform
  sends the request with that adapter's vLLM name; when vLLM does not know it
  (a cold container, a new version) vLLM answers 404, the platform loads it
  with ``POST /v1/load_lora_adapter`` and sends the request once more.
- vLLM checks one bearer, the deployment's key (MODAL_SERVE_KEY_ENV, the same
  value as in the Modal Secret); callers never see it. Replies come back with
  the caller's model name in them.
- unserve removes the row, so the platform refuses the name at once; the
  adapter leaves vLLM when its container scales down (MODAL_SERVE_SCALEDOWN_S).
  Nothing is sent to Modal on unserve: a call to a cold deployment would start a
  GPU only to unload nothing.

Everything that reaches Modal's cloud goes through :class:`RemoteBackend`
(``url``, ``key``, ``base_model``, ``adapter_path``); :class:`ModalServeCloud` is
the real one and tests install a fake through
:func:`whileai.platform.serving.configure_serving`.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import httpx
from fastapi.responses import JSONResponse, Response, StreamingResponse

from whileai.platform.serving._chat import ChatRequestError
from whileai.platform import defaults
from whileai.platform.store.records import ModelRecord

__all__ = ["RemoteBackend", "ModalServeCloud", "RemoteServing", "serve_target", "vllm_adapter_name"]

def serve_target() -> str:
    """Where generation runs: SERVE_TARGET_ENV, else ``serve_target`` in config.json, else "platform"."""
    from whileai.core.paths import setting

    value = setting(defaults.SERVE_TARGET_ENV, "serve_target") or defaults.SERVE_TARGET_DEFAULT
    if value not in defaults.SERVE_TARGETS:
        raise ValueError(
            f"serve target {value!r} is not a place models are served; set {defaults.SERVE_TARGET_ENV} (or "
            f"serve_target in config.json) to one of {', '.join(defaults.SERVE_TARGETS)}"
        )
    return value


def vllm_adapter_name(account_id: str, name: str, version: Any) -> str:
    """The adapter's name inside vLLM: one per account, served name and version."""
    return f"{account_id}/{name}/v{version}"


class RemoteBackend(Protocol):
    def url(self) -> str:
        """The deployment's base URL (vLLM's server, without ``/v1``)."""

    def key(self) -> str:
        """The bearer the deployment checks."""

    def base_model(self) -> str:
        """The base the deployment serves (one base per deployment)."""

    def adapter_path(self, run_id: str, local: Path | None) -> str:
        """The adapter's folder as the deployment sees it; uploads ``local`` when the Volume lacks it."""


class ModalServeCloud:
    """The real backend: the deployed ``whileai-serve`` app and the adapters Volume."""

    def __init__(self) -> None:
        self._url: str | None = None
        self._lock = threading.Lock()

    def url(self) -> str:
        if self._url is None:
            given = os.environ.get(defaults.MODAL_SERVE_URL_ENV, "").strip()
            if not given:
                import modal

                try:
                    function = modal.Function.from_name(defaults.MODAL_SERVE_APP_NAME, defaults.MODAL_SERVE_FUNCTION)
                    given = function.get_web_url() or ""
                except Exception as exc:
                    raise ChatRequestError(
                        f"the Modal serving app {defaults.MODAL_SERVE_APP_NAME!r} could not be found "
                        f"({type(exc).__name__}: {exc}); deploy it with `modal deploy -m "
                        f"whileai.platform.serving.modal` (docs/serving.md), or set {defaults.MODAL_SERVE_URL_ENV}",
                        status=503, type="server_error", code="serving_unavailable",
                    ) from exc
            self._url = given.rstrip("/")
        return self._url

    def key(self) -> str:
        value = os.environ.get(defaults.MODAL_SERVE_KEY_ENV, "")
        if not value:
            raise ChatRequestError(
                f"{defaults.MODAL_SERVE_KEY_ENV} is not set where the platform runs; set it to the same value as "
                f"in the Modal Secret {defaults.MODAL_SECRET_NAME!r} (docs/serving.md)",
                status=503, type="server_error", code="serving_unavailable",
            )
        return value

    def base_model(self) -> str:
        return os.environ.get(defaults.MODAL_SERVE_BASE_ENV, "").strip() or defaults.MODAL_SERVE_BASE

    def adapter_path(self, run_id: str, local: Path | None) -> str:
        import modal

        remote = f"/{run_id}"
        volume = modal.Volume.from_name(defaults.MODAL_VOLUME_NAME, create_if_missing=True)
        with self._lock:
            try:
                present = any(True for _ in volume.iterdir(remote))
            except Exception:  # not found: a local run's adapter, not uploaded yet
                present = False
            if not present:
                if local is None or not Path(local).is_dir():
                    raise ChatRequestError(
                        f"run {run_id}'s adapter is neither on the Modal volume {defaults.MODAL_VOLUME_NAME!r} nor "
                        f"on this machine ({local}); train the run again or serve another run",
                        status=409, type="invalid_request_error", code="adapter_missing",
                    )
                with volume.batch_upload() as batch:
                    batch.put_directory(str(local), remote)
        return f"{defaults.MODAL_VOLUME_MOUNT}{remote}"


class RemoteServing:
    """Forwards chat completions for registry rows to a vLLM deployment, loading adapters on demand."""

    def __init__(self, backend: RemoteBackend, *, timeout: float | None = None,
                 transport: httpx.AsyncBaseTransport | None = None):
        self.backend = backend
        self._timeout = timeout if timeout is not None else defaults.MODAL_SERVE_REQUEST_TIMEOUT_S
        self._transport = transport
        self.reload_wait = defaults.MODAL_SERVE_VOLUME_RELOAD_S
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            from whileai.core.defaults import NO_NAGLE

            transport = self._transport or httpx.AsyncHTTPTransport(socket_options=NO_NAGLE)
            self._client = httpx.AsyncClient(timeout=self._timeout, transport=transport)
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- the request ----------------------------------------------------------

    def _target(self, account_id: str, row: ModelRecord) -> tuple[str, str | None]:
        """(vLLM model id, the adapter's run id or None) for a registry row; refuses a base the deployment lacks."""
        base = self.backend.base_model()
        if row.get("baseModel") != base:
            raise ChatRequestError(
                f"the model {row['name']!r} is on base {row.get('baseModel')!r}, but the Modal deployment serves "
                f"{base!r}; deploy one for that base ({defaults.MODAL_SERVE_BASE_ENV}={row.get('baseModel')} "
                "modal deploy -m whileai.platform.serving.modal) or serve a run trained on it",
                status=409, param="model", code="model_base_not_deployed",
            )
        run_id, adapter = row.get("adapterRunId"), row.get("adapter")
        if not run_id and not adapter:
            return base, None  # the bare base: vLLM answers to the base's own name
        lora = vllm_adapter_name(account_id, row["name"], row.get("version"))
        return lora, run_id or (Path(adapter).name if adapter else None)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.backend.key()}"}

    def _unreachable(self, exc: Exception) -> ChatRequestError:
        return ChatRequestError(
            f"the Modal serving deployment did not answer ({type(exc).__name__}: {exc}); check it with "
            f"`modal app list` and redeploy with `modal deploy -m whileai.platform.serving.modal` (docs/serving.md)",
            status=503, type="server_error", code="serving_unavailable",
        )

    async def _load(self, lora: str, row: ModelRecord, run_id: str | None) -> None:
        from starlette.concurrency import run_in_threadpool

        adapter = row.get("adapter")
        local = Path(adapter) if adapter else None
        try:
            path = await run_in_threadpool(self.backend.adapter_path, str(run_id), local)
        except ChatRequestError:
            raise
        except Exception as exc:  # Modal's client: no token, no network, no such volume
            raise ChatRequestError(
                f"the adapter of {row['name']!r} could not be put on the Modal volume "
                f"{defaults.MODAL_VOLUME_NAME!r} ({type(exc).__name__}: {exc}); check Modal's credentials where "
                "the platform runs (`modal token new`, or MODAL_TOKEN_ID/MODAL_TOKEN_SECRET)",
                status=503, type="server_error", code="serving_unavailable",
            ) from exc
        for attempt in range(defaults.MODAL_SERVE_LOAD_RETRIES + 1):
            answer = await self._http().post(f"{self.backend.url()}/v1/load_lora_adapter", headers=self._headers(),
                                             json={"lora_name": lora, "lora_path": path})
            if answer.status_code < 400 or "already" in answer.text.lower():  # or a concurrent request loaded it
                return
            if answer.status_code in (401, 403) or attempt == defaults.MODAL_SERVE_LOAD_RETRIES:
                break
            # an adapter uploaded a moment ago shows in the container after its next Volume reload
            await asyncio.sleep(self.reload_wait)
        raise ChatRequestError(
            f"the Modal deployment refused to load the adapter of {row['name']!r} from {path} "
            f"(HTTP {answer.status_code}: {answer.text[:300]})",
            status=502, type="server_error", code="adapter_load_failed",
        )

    async def complete(self, account_id: str, row: ModelRecord, body: dict[str, Any]) -> Response:
        """Answer one chat completion request for ``row`` from the deployment (a stream when ``body`` asks)."""
        try:
            model, run_id = self._target(account_id, row)
            sent = dict(body, model=model)
            url = f"{self.backend.url()}/v1/chat/completions"
            headers = self._headers()
        except ChatRequestError as exc:
            return JSONResponse(exc.body(), status_code=exc.status)
        name = row["name"]
        for attempt in range(2):
            try:
                request = self._http().build_request("POST", url, headers=headers, json=sent)
                answer = await self._http().send(request, stream=True)
            except httpx.HTTPError as exc:
                err = self._unreachable(exc)
                return JSONResponse(err.body(), status_code=err.status)
            if answer.status_code == 404 and attempt == 0 and run_id is not None:
                await answer.aread()
                await answer.aclose()
                try:
                    await self._load(model, row, run_id)
                except ChatRequestError as exc:
                    return JSONResponse(exc.body(), status_code=exc.status)
                except httpx.HTTPError as exc:
                    err = self._unreachable(exc)
                    return JSONResponse(err.body(), status_code=err.status)
                continue
            break
        if answer.status_code >= 400 or not body.get("stream"):
            raw = await answer.aread()
            await answer.aclose()
            return JSONResponse(_renamed(_json_or_error(raw, answer.status_code), model, name),
                                status_code=answer.status_code)
        return StreamingResponse(_renamed_events(answer, model, name), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _json_or_error(raw: bytes, status: int) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return {"error": {"message": f"the Modal deployment answered HTTP {status}: {raw[:300].decode(errors='replace')}",
                          "type": "server_error", "param": None, "code": "bad_upstream_reply"}}


def _renamed(value: Any, lora: str, name: str) -> Any:
    """``value`` with the deployment's model id replaced by the caller's model name (in ``model`` and in texts)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "model" and item == lora:
                out[key] = name
            else:
                out[key] = _renamed(item, lora, name)
        return out
    if isinstance(value, list):
        return [_renamed(v, lora, name) for v in value]
    if isinstance(value, str) and lora in value:
        return value.replace(lora, name)
    return value


async def _renamed_events(answer: httpx.Response, lora: str, name: str) -> AsyncIterator[bytes]:
    try:
        async for line in answer.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                try:
                    line = "data: " + json.dumps(_renamed(json.loads(line[6:]), lora, name))
                except ValueError:
                    pass
            yield (line + "\n").encode()
    finally:
        await answer.aclose()
