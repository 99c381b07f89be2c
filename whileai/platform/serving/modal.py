"""The Modal app that serves adapters with vLLM, for a platform whose serve target is "modal".

Deploy once per Modal workspace and base (docs/serving.md)::

    modal deploy -m whileai.platform.serving.modal
    WHILEAI_MODAL_SERVE_BASE=Qwen/Qwen3-1.7B modal deploy -m whileai.platform.serving.modal

The container runs vLLM's OpenAI-compatible server for one base with LoRA on,
runtime adapter loading allowed, Hermes-style ``<tool_call>`` parsing, and the
deployment key from the Modal Secret as its only accepted bearer. The adapters
Volume is mounted where hosted training writes adapters, and re-read every
MODAL_SERVE_VOLUME_RELOAD_S so that adapters the platform uploads appear. The
platform is the only client: it loads each served (account, name, version)
on first use and forwards requests (:mod:`whileai.platform.serving._remote`).

:func:`vllm_argv` builds the command line; it is plain Python, so the flags are
checked without a GPU.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping

import modal

from whileai.platform import defaults
from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults

__all__ = ["app", "serve", "vllm_argv", "vllm_env", "deployed_base"]


def deployed_base(environ: Mapping[str, str] = os.environ) -> str:
    """The base this deployment serves: MODAL_SERVE_BASE_ENV at deploy time, else MODAL_SERVE_BASE."""
    return environ.get(defaults.MODAL_SERVE_BASE_ENV, "").strip() or defaults.MODAL_SERVE_BASE


def vllm_argv(base: str, *, port: int = defaults.MODAL_SERVE_PORT, max_lora_rank: int | None = None,
              max_loras: int = defaults.MODAL_SERVE_MAX_LORAS,
              max_cpu_loras: int = defaults.MODAL_SERVE_MAX_CPU_LORAS,
              max_model_len: int = defaults.MODAL_SERVE_MAX_MODEL_LEN) -> list[str]:
    """``vllm serve`` for ``base``: LoRA on, tool calls parsed, the key read from the environment by vLLM."""
    rank = max_lora_rank if max_lora_rank is not None else max(core_defaults.TRAIN_LORA_R, kit_defaults.KIT_SFT_LORA_R)
    return [
        "vllm", "serve", base,
        "--host", "0.0.0.0", "--port", str(port),
        "--enable-lora",
        "--max-lora-rank", str(rank),
        "--max-loras", str(max_loras),
        "--max-cpu-loras", str(max_cpu_loras),
        "--max-model-len", str(max_model_len),
        "--enable-auto-tool-choice", "--tool-call-parser", defaults.MODAL_SERVE_TOOL_PARSER,
    ]


def vllm_env(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The server's environment: runtime LoRA loading on, the deployment key as VLLM_API_KEY."""
    env = dict(environ)
    env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    key = environ.get(defaults.MODAL_SERVE_KEY_ENV, "")
    if not key:
        raise RuntimeError(
            f"the Modal Secret {defaults.MODAL_SECRET_NAME!r} has no {defaults.MODAL_SERVE_KEY_ENV}; add it "
            f"(modal secret create {defaults.MODAL_SECRET_NAME} {defaults.MODAL_SERVE_KEY_ENV}=<a long random "
            "value> --force) and give the platform the same value"
        )
    env["VLLM_API_KEY"] = key  # vLLM refuses any other bearer
    return env


def _image() -> modal.Image:
    return modal.Image.debian_slim(python_version=defaults.MODAL_PYTHON_VERSION).pip_install(
        *defaults.MODAL_SERVE_PIP_PINS
    )


# Modal finds the app by importing this module; these objects are descriptions, built without contacting Modal.
_BASE = deployed_base()
app = modal.App(defaults.MODAL_SERVE_APP_NAME)
_volume = modal.Volume.from_name(defaults.MODAL_VOLUME_NAME, create_if_missing=True)


def _reload_forever() -> None:
    while True:
        time.sleep(defaults.MODAL_SERVE_VOLUME_RELOAD_S)
        try:
            _volume.reload()
        except Exception:  # a file in use; the next round tries again
            pass


@app.function(
    image=_image(),
    gpu=defaults.MODAL_SERVE_GPU,
    volumes={defaults.MODAL_VOLUME_MOUNT: _volume},
    secrets=[modal.Secret.from_name(defaults.MODAL_SECRET_NAME)],
    env={defaults.MODAL_SERVE_BASE_ENV: _BASE},
    scaledown_window=int(defaults.MODAL_SERVE_SCALEDOWN_S),
    timeout=defaults.MODAL_SERVE_TIMEOUT_S,
)
@modal.concurrent(max_inputs=defaults.MODAL_SERVE_MAX_INPUTS)
@modal.web_server(port=defaults.MODAL_SERVE_PORT, startup_timeout=defaults.MODAL_SERVE_STARTUP_S)
def serve() -> None:
    """vLLM's OpenAI-compatible server for the deployed base, LoRA adapters loaded at run time."""
    threading.Thread(target=_reload_forever, daemon=True).start()
    subprocess.Popen(vllm_argv(deployed_base()), env=vllm_env())
