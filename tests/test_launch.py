"""The one launch function and what is built from it (local, SLURM, Modal), the strategy mapping and the
refusals of what a machine cannot run: nothing here starts a process or trains."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from whileai.core import defaults as core_defaults
from whileai.core.errors import TrainingConfigError
from whileai.core.launch import launch_command, machine_problems
from whileai.core.spec import read_spec, spec_problems
from whileai.jobs import _slurm, distributed, modal_app
from whileai.jobs.trainer_config import strategy_settings, trl_settings


def _spec(method: str = "sft", **fields):
    return read_spec({"method": method, "base_model": "kit", **fields})


def test_one_process_is_the_plain_worker_command():
    assert launch_command("job_1") == [sys.executable, "-m", "whileai.jobs.worker", "job_1"]


def test_past_one_process_torchrun_starts_the_worker_at_a_c10d_rendezvous():
    argv = launch_command("job_1", processes=2, nodes=3, endpoint="10.0.0.1:29500")
    assert argv[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert argv[-3:] == ["-m", "whileai.jobs.worker", "job_1"]
    pairs = dict(zip(argv[3:-3:2], argv[4:-3:2]))
    assert pairs["--nproc-per-node"] == "2" and pairs["--nnodes"] == "3"
    assert pairs["--rdzv-backend"] == "c10d" and pairs["--rdzv-endpoint"] == "10.0.0.1:29500"
    assert pairs["--rdzv-id"] == "job_1" and pairs["--max-restarts"] == "0"
    # torchrun reads it: the argv parses as its own
    from torch.distributed.run import get_args_parser

    parsed = get_args_parser().parse_args(argv[3:])
    assert parsed.nproc_per_node == "2" and parsed.nnodes == "3" and parsed.module and parsed.training_script == \
        "whileai.jobs.worker"


def test_past_one_node_the_endpoint_is_required():
    with pytest.raises(ValueError, match="rendezvous endpoint"):
        launch_command("job_1", nodes=2)
    with pytest.raises(ValueError, match="at least 1"):
        launch_command("job_1", processes=0)


def test_the_local_launcher_builds_one_command_per_node_from_the_launch_function():
    from whileai.platform.launcher.jobs import local_commands

    assert local_commands("job_1", {}) == [launch_command("job_1")]
    two = local_commands("job_1", {"processes": 2})
    endpoint = two[0][two[0].index("--rdzv-endpoint") + 1]
    assert endpoint.startswith("127.0.0.1:") and two == [launch_command("job_1", processes=2, endpoint=endpoint)]
    nodes = local_commands("job_1", {"processes": 1, "nodes": 2})
    endpoint = nodes[0][nodes[0].index("--rdzv-endpoint") + 1]
    assert nodes == [launch_command("job_1", nodes=2, endpoint=endpoint)] * 2


class _Executor:
    """submitit's AutoExecutor as far as slurm_submit uses it (SLURM is not reachable here)."""

    def __init__(self):
        self.parameters: dict = {}
        self.submitted: list = []

    def update_parameters(self, **kwargs):
        self.parameters.update(kwargs)

    def submit(self, fn):
        self.submitted.append(fn)
        return "slurm-job"


def test_slurm_runs_one_task_per_node_each_the_launch_command_at_node_0():
    executor = _Executor()
    assert distributed.slurm_submit("job_1", processes=8, nodes=2, executor=executor) == "slurm-job"
    assert executor.parameters["nodes"] == 2 and executor.parameters["tasks_per_node"] == 1
    task = executor.submitted[0]
    command = task.command({"SLURM_JOB_NODELIST": "gpu01"})
    assert command == launch_command("job_1", processes=8, nodes=2, endpoint=f"gpu01:{core_defaults.RDZV_PORT}")
    assert _slurm.first_node({"SLURM_NODELIST": "gpu07"}) == "gpu07"
    import pickle

    assert pickle.loads(pickle.dumps(task)).command({"SLURM_JOB_NODELIST": "gpu01"}) == command


def test_modal_containers_run_the_launch_command_at_node_0():
    payload = {"job_id": "job_1", "spec": {"method": "grpo", "base_model": "kit", "processes": 8, "nodes": 2}}
    ips = ["10.1.0.5", "10.1.0.6"]
    assert modal_app.node_command(payload, ips) == launch_command(
        "job_1", processes=8, nodes=2, endpoint=f"10.1.0.5:{core_defaults.RDZV_PORT}")
    ran: list = []

    def run(command, env, check):  # what the container would start, and rank 0 writing its result
        ran.append(command)
        Path(env[modal_app.PAYLOAD_ENV]).with_suffix(".result.json").write_text(json.dumps({"status": "done"}))
        assert json.loads(Path(env[modal_app.PAYLOAD_ENV]).read_text()) == payload
        return subprocess.CompletedProcess(command, 0)

    assert modal_app.execute_ranks(payload, ips, node_rank=0, run=run) == {"status": "done"}
    assert ran == [modal_app.node_command(payload, ips)]
    lost = modal_app.execute_ranks(payload, ips, node_rank=0, run=lambda c, env, check: subprocess.CompletedProcess(c, 1))
    assert lost["status"] == "failed" and "exit code 1" in lost["error"]
    assert modal_app.run_job_clustered is not None


def test_strategies_map_onto_trl_and_accelerate_and_batches_stay_global():
    one = _spec(batch_size=8)
    assert strategy_settings(one) == {} and trl_settings(one)["per_device_train_batch_size"] == 8
    two = _spec(batch_size=8, processes=2, nodes=2)
    assert trl_settings(two)["per_device_train_batch_size"] == 2
    assert strategy_settings(two) == {"ddp_find_unused_parameters": False}
    assert strategy_settings(_spec(processes=2, strategy="fsdp"))["fsdp"] == "full_shard auto_wrap"
    assert strategy_settings(_spec(processes=2, strategy="zero2"))["deepspeed"]["zero_optimization"]["stage"] == 2
    assert strategy_settings(_spec(processes=2, strategy="zero3"))["deepspeed"]["zero_optimization"]["stage"] == 3
    assert trl_settings(_spec("grpo", generation_backend="vllm"))["use_vllm"] is True
    assert "use_vllm" not in trl_settings(_spec("grpo"))


def test_a_batch_that_does_not_divide_is_refused_naming_the_sizes_that_do():
    problems = spec_problems({"method": "dpo", "base_model": "kit", "batch_size": 6, "processes": 4})
    assert problems == [p for p in problems if "batch_size=6 does not divide across 4" in p] and problems
    assert "4, 8, 12" in problems[0]
    assert spec_problems({"method": "dpo", "base_model": "kit", "batch_size": 8, "processes": 4}) == []
    assert any("processes" in p for p in spec_problems({"method": "sft", "base_model": "kit", "processes": 0}))


def test_grpo_prompts_per_step_are_divided_across_processes():
    from whileai.jobs._grpo_batch import prompts_per_rank as _prompts_per_rank

    per_step = int(core_defaults.TRAIN_GRPO_PROMPTS_PER_STEP)
    assert _prompts_per_rank(per_step, 1, 100) == per_step
    assert _prompts_per_rank(per_step, 2, 100) == per_step // 2
    assert _prompts_per_rank(5, 2, 5) == 2  # a step capped by the data rounds down to whole shares
    with pytest.raises(ValueError, match="does not divide across 3"):
        _prompts_per_rank(per_step, 3, 100)
    with pytest.raises(ValueError, match="fewer than the 4 processes"):
        _prompts_per_rank(3, 4, 3)


def test_what_this_machine_cannot_run_is_refused_naming_why():
    cpu = {"cuda": False, "devices": 0}
    assert machine_problems(_spec(processes=2), **cpu) == []
    assert machine_problems(_spec(strategy="zero3"), **cpu) == []  # one process does not read strategy
    zero = machine_problems(_spec(processes=2, strategy="zero2"), **cpu)
    assert any("DeepSpeed" in p for p in zero) and any("no CUDA" in p for p in zero)
    assert any("no CUDA" in p for p in machine_problems(_spec(processes=2, strategy="fsdp"), **cpu))
    assert any("vllm" in p and "CPU" in p for p in machine_problems(_spec("grpo", generation_backend="vllm"), **cpu))
    gpus = machine_problems(_spec(processes=4), cuda=True, devices=2)
    assert gpus == ["processes=4 is more than this node's 2 GPUs (nccl needs one each); pass processes=2 or fewer"]


def test_vllm_server_mode_is_trls_own_server_on_the_gpu_after_the_trainers():
    from trl import GRPOConfig

    from whileai.jobs import defaults as job_defaults
    from whileai.jobs._vllm_server import server_command, server_env, server_mode

    spec = _spec("grpo", generation_backend="vllm", vllm_mode="server", processes=3)
    assert server_mode(spec) and not server_mode(_spec("grpo", generation_backend="vllm"))
    settings = trl_settings(spec)
    assert settings["vllm_mode"] == "server" and settings["vllm_server_host"] == "127.0.0.1"
    assert settings["vllm_server_port"] == job_defaults.VLLM_SERVER_PORT
    # TRL takes them as its own config, here on a CPU too
    config = GRPOConfig(output_dir="unused", use_cpu=True, **{k: v for k, v in settings.items() if k.startswith("vllm")})
    assert config.vllm_mode == "server" and config.vllm_server_port == job_defaults.VLLM_SERVER_PORT
    argv = server_command(spec, "/models/base")
    served = argv[argv.index("serve"):]
    assert served[1] == "/models/base"
    pairs = dict(zip(served[2::2], served[3::2]))
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == str(job_defaults.VLLM_SERVER_PORT)
    env = server_env(spec)
    assert env["CUDA_VISIBLE_DEVICES"] == "3" and env["VLLM_SERVER_DEV_MODE"] == "1"  # ranks use GPUs 0-2
    # past one node the server listens beyond loopback, where the other nodes' ranks reach node 0
    wide = server_command(_spec("grpo", generation_backend="vllm", vllm_mode="server", nodes=2), "/m")
    assert wide[wide.index("--host") + 1] == "0.0.0.0"
    # server mode needs a GPU of its own on node 0
    full = machine_problems(_spec("grpo", generation_backend="vllm", vllm_mode="server", processes=2),
                            cuda=True, devices=2)
    assert any("vllm_mode='server'" in p and "pass processes=1" in p for p in full)
    # vllm_mode alone does nothing: generating with hf, no server is started and no GPU is held back for one
    hf = _spec("grpo", vllm_mode="server", processes=2)
    assert not server_mode(hf) and "vllm_server_host" not in trl_settings(hf)
    assert not any("vllm_mode" in p for p in machine_problems(hf, cuda=True, devices=2))


def test_train_refuses_a_strategy_this_machine_cannot_run_before_any_job(home):
    import whileai.simulations as wai

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TrainingConfigError) as caught:
            wai.train("ds_0123456789abcdef", method="sft", steps=2,
                      config={"processes": 2, "strategy": "zero3", "batch_size": 3})
    text = str(caught.value)
    assert "DeepSpeed" in text and "batch_size=3 does not divide across 2" in text


def test_other_ranks_lines_carry_their_rank():
    out = io.StringIO()
    stream = distributed._Prefixed(out, "[rank 1] ")
    stream.write("one\ntw")
    stream.write("o\nthree\n")
    assert out.getvalue() == "[rank 1] one\n[rank 1] two\n[rank 1] three\n"


def test_a_failed_rank_is_named_from_torchrun_s_summary(home):
    from whileai.platform.launcher.jobs import job_log, rank_failure

    log = job_log("job_1")
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("\n".join([
        "[    1.0 s] training sft",
        "[rank 1] [    1.1 s] training sft",
        "[rank 1] loading shard 3",
        "E1202 11:16:08.398000 10948 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9)",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-12-02_11:16:08",
        "  host      : localhost",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : -9 (pid: 10955)  (SIGKILL)",
    ]))
    error = rank_failure("job_1")
    assert error.startswith("rank 1 of the job failed (killed by SIGKILL)")
    assert "[rank 1] loading shard 3" in error and "training sft\n" not in error.split("lines:")[1].split("[rank")[0]
    log.write_text("no summary here")
    assert rank_failure("job_1") is None


def test_reproduce_takes_processes_and_nodes_as_the_target_group():
    from whileai.runner.reproduce import _placement

    assert _placement(["--processes", "2", "seed=1", "--nodes=2"]) == ["target.processes=2", "seed=1",
                                                                       "target.nodes=2"]


def test_the_runner_target_group_takes_processes_and_nodes():
    from whileai.runner.schema import Target

    assert Target(processes=2, nodes=2).processes == 2 and Target().nodes == 1
    with pytest.raises(ValueError):
        Target(processes=0)
