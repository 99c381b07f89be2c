"""The GPU paths: a hosted job on a local CUDA device (bf16, its price), and the endpoint generating on it.

The ``gpu`` tests are skipped on a machine without CUDA (conftest); run them
where one is present with ``python -m pytest -m gpu``. Naming the device's
price row needs no GPU and always runs.
"""

from __future__ import annotations

import json
import warnings

import pytest

from whileai.jobs._environment import price_key
from whileai.core import defaults as core_defaults

GIB = 2**30


@pytest.mark.parametrize("device, memory, key", [
    ("NVIDIA H200", 141 * GIB, "H200"),
    ("NVIDIA H100 80GB HBM3", 80 * GIB, "H100"),
    ("NVIDIA A100-SXM4-40GB", 40 * GIB, "A100-40GB"),
    ("NVIDIA A100-SXM4-80GB", 80 * GIB, "A100-80GB"),
    ("NVIDIA A100 PCIe", 80 * GIB, "A100-80GB"),
    ("NVIDIA A10G", 24 * GIB, "A10G"),
    ("NVIDIA L40S", 48 * GIB, "L40S"),
    ("NVIDIA L4", 24 * GIB, "L4"),
    ("Tesla T4", 16 * GIB, "T4"),
    ("NVIDIA GeForce RTX 4090", 24 * GIB, "NVIDIA GeForce RTX 4090"),  # not priced: the name, and no estimate
])
def test_a_cuda_device_name_finds_its_price_row(device, memory, key):
    assert price_key(device, memory) == key
    assert (key in core_defaults.GPU_USD_PER_HOUR) == (key != "NVIDIA GeForce RTX 4090")


@pytest.mark.parametrize("gpu, processes, nodes, counted", [
    ("H100", 1, 1, "H100"), ("H100", 8, 1, "H100:8"), ("H100", 8, 2, "H100:16"),
    ("H100:8", 8, 2, "H100:16"), ("A10G:4", 1, 1, "A10G:4"), ("H100:1", 1, 1, "H100"),
])
def test_a_job_past_one_gpu_is_priced_for_every_gpu_it_held(gpu, processes, nodes, counted):
    from whileai.jobs._environment import with_count
    from whileai.platform.store.values import run_cost

    assert with_count(gpu, processes, nodes) == counted
    one, _ = run_cost({"training": {"gpu": counted.partition(":")[0], "seconds": 3600}})
    many, basis = run_cost({"training": {"gpu": counted, "seconds": 3600}})
    total = int(counted.partition(":")[2] or 1)
    assert basis["count"] == total and many == pytest.approx(one * total)


@pytest.mark.gpu
@pytest.mark.slow
def test_a_hosted_sft_job_trains_on_the_local_gpu_in_bf16_and_prices_it(session_home, push_sample):
    import torch

    import whileai.simulations as wai
    from whileai.kit._base import tiny_model_dir

    sets = push_sample("gpu-sample", tasks=40, holdout=0.25)
    passes, held = sets["passes"], sets["holdout"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = wai.train(passes, method="sft", steps=8, holdout=held, base_model=str(tiny_model_dir()), wait=True,
                        config={"holdout_rows": 8})
    assert run.status == "done", run.error
    training = run.training
    assert training["device"] == "cuda"
    name = torch.cuda.get_device_name(0)
    assert training["gpu"] == price_key(name, torch.cuda.get_device_properties(0).total_memory)
    if training["gpu"] in core_defaults.GPU_USD_PER_HOUR:
        assert run.cost_usd is not None and run.cost_basis["gpu"] == training["gpu"]
    else:
        assert run.cost_usd is None and run.cost_basis
    assert json.loads((session_home / "adapters" / run.id / "adapter_config.json").read_text())["r"] > 0


@pytest.mark.gpu
def test_the_endpoint_generates_on_the_gpu(tmp_path):
    from whileai.kit._base import tiny_model_dir
    from whileai.platform.serving import _chat as chat
    from whileai.platform.serving._pool import load_model

    model, tokenizer = load_model(str(tiny_model_dir()), None)
    assert next(model.parameters()).device.type == "cuda"
    req = chat.parse_request({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                              "temperature": 0})
    prompt = chat.render_prompt(tokenizer, req.messages, None)
    replies = chat.generate(model, tokenizer, prompt, req)
    assert len(replies) == 1 and replies[0].completion_tokens <= 4
