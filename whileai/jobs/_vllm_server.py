"""GRPO's vLLM server (``generation_backend=vllm``, ``vllm_mode=server``): TRL's own command, on a GPU of its own.

Rank 0 of node 0 starts it before the trainer and ends it after; the trainer's ranks reach it
at ``trainer_config.vllm_server_host`` on VLLM_SERVER_PORT (TRL's ``vllm_server_*`` arguments).
The command is TRL's (``trl vllm-serve`` builds vLLM's ``vllm serve`` line with the endpoints
the trainer's weight sync needs), so what runs is what a user would type. The server takes the
GPU after the trainer's (index ``processes``: ranks use ``cuda:LOCAL_RANK``, 0 .. processes-1),
and dies with the rank that started it (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any

from whileai.core.spec import GRPOSpec
from whileai.jobs import defaults
from whileai.jobs.trainer_config import vllm_server_host

__all__ = ["server_mode", "server_command", "server_env", "VLLMServer"]


def server_mode(spec: Any) -> bool:
    """Whether ``spec`` generates on a vLLM server of its own (GRPO with vllm in server mode)."""
    return isinstance(spec, GRPOSpec) and spec.vllm_server


def server_command(spec: GRPOSpec, model: str) -> list[str]:
    """The server's argv for the base folder ``model``: TRL's ``vllm-serve`` command, on loopback for one node."""
    from trl.scripts.vllm_serve import ScriptArguments, build_command

    host = "127.0.0.1" if spec.nodes <= 1 else "0.0.0.0"  # past one node the other nodes' ranks must reach it
    args = ScriptArguments(model=model, host=host, port=defaults.VLLM_SERVER_PORT)
    return [str(part) for part in build_command(args, None)]


def server_env(spec: GRPOSpec) -> dict[str, str]:
    """The server's environment: the GPU after the trainer's, and vLLM's dev endpoints TRL's weight sync uses."""
    return {**os.environ, "CUDA_VISIBLE_DEVICES": str(spec.processes), "VLLM_SERVER_DEV_MODE": "1"}


def _die_with_parent() -> None:
    from whileai.jobs.distributed import end_with_parent

    end_with_parent()


class VLLMServer:
    """``with VLLMServer(spec, model):`` runs the job's vLLM server for the block (its output in the job's log)."""

    def __init__(self, spec: GRPOSpec, model: str):
        self.command = server_command(spec, model)
        self.env = server_env(spec)
        self.host = vllm_server_host(spec)
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> VLLMServer:
        print(f"starting the vLLM server on GPU {self.env['CUDA_VISIBLE_DEVICES']}: {' '.join(self.command)}",
              flush=True)
        self.proc = subprocess.Popen(self.command, env=self.env, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent)  # noqa: PLW1509 - only sets PDEATHSIG
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(defaults.VLLM_SERVER_END_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
