"""What the platform adds when it forwards chat completions to a remote (Modal vLLM) deployment.

    python benchmarks/serving_forward_overhead.py              # 200 requests each way
    python benchmarks/serving_forward_overhead.py --requests 500

Both sides use the official ``openai`` client on loopback against the same
stand-in deployment (tests/test_serving_modal.py's FakeVllm, which answers at
once, so only the path is measured, not generation):

- baseline: the client calls the deployment directly with the deployment key;
- forwarded: the client calls the platform's ``/v1`` with an account key; the
  platform checks the key, reads the registry row and forwards the request
  under the adapter's vLLM name, then renames the reply.

The adapter is loaded before timing (the first request's 404, upload and load
are a one-off). Printed: median and p90 milliseconds per request each way, the
ratio, and the milliseconds the platform adds. vLLM's own time for a short tool
call is a few hundred milliseconds on a GPU, so a few milliseconds added is
the figure to watch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    os.environ["WHILEAI_HOME"] = tempfile.mkdtemp(prefix="whileai-bench-")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

    import httpx
    import openai
    from test_serving_modal import ASK, KEY, TOOLS, FakeVllm, FolderVolume, _adapter, _start

    from whileai.platform import serving
    from whileai.platform.serving._remote import RemoteServing, vllm_adapter_name
    from whileai.platform.server import serve_in_thread

    tmp = Path(tempfile.mkdtemp(prefix="whileai-bench-"))
    (tmp / "volume").mkdir()
    fake = FakeVllm(tmp / "volume")
    url, stop_fake = _start(fake.app)
    platform = serve_in_thread()
    try:
        serving.configure_serving(platform.app, remote=RemoteServing(FolderVolume(url, tmp / "volume")))
        _, key = platform.store.create_account("bench")
        with httpx.Client(base_url=platform.base_url, headers={"Authorization": f"Bearer {key}"}) as api:
            account = api.get("/api/v1/me").json()["account_id"]
            run_id = api.post("/api/v1/runs", json={"name": "bench"}).json()["id"]
            folder = _adapter(tmp, run_id)
            api.post("/api/v1/models", json={"name": "agent", "baseModel": "Qwen/Qwen3-0.6B",
                                             "adapter": str(folder), "adapterRunId": run_id})
        forwarded = openai.OpenAI(base_url=f"{platform.base_url}/v1", api_key=key, max_retries=0)
        direct = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        lora = vllm_adapter_name(account, "agent", 1)
        forwarded.chat.completions.create(model="agent", messages=ASK, tools=TOOLS)  # loads the adapter

        def timed(client, model: str) -> float:
            start = time.perf_counter()
            client.chat.completions.create(model=model, messages=ASK, tools=TOOLS)
            return (time.perf_counter() - start) * 1000

        times = {"direct": [], "forwarded": []}
        for _ in range(10):  # warm both paths
            timed(direct, lora), timed(forwarded, "agent")
        for _ in range(args.requests):  # alternate, so both see the same machine
            times["direct"].append(timed(direct, lora))
            times["forwarded"].append(timed(forwarded, "agent"))
    finally:
        platform.stop()
        stop_fake()

    def p90(values):
        return sorted(values)[int(0.9 * (len(values) - 1))]

    base, fwd = statistics.median(times["direct"]), statistics.median(times["forwarded"])
    print(f"{args.requests} requests each way, openai client on loopback, load average {os.getloadavg()[0]:.1f}")
    print(f"  direct to the deployment    median {base:6.2f} ms   p90 {p90(times['direct']):6.2f} ms")
    print(f"  through the platform        median {fwd:6.2f} ms   p90 {p90(times['forwarded']):6.2f} ms")
    print(f"  ratio {fwd / base:.2f}x; the platform adds {fwd - base:.2f} ms per request "
          f"({(fwd - base) / 300:.1%} of a 300 ms generation)")


if __name__ == "__main__":
    main()
