"""Launch fuzz: launch bodies drawn from the spec's own JSON schema, with values mutated, sent to the real app.

    python benchmarks/launch_fuzz.py                 # 5,000 bodies, seed 0
    python benchmarks/launch_fuzz.py --bodies 20000 --seed 3

Each body starts from a resolved spec of a random method (every knob at its declared default, the kit's base, a
dataset of the account) and changes a few fields, picked from the method model's ``model_json_schema()``, to a
value of another JSON type, past or at a knob's bounds, very long, or of odd unicode (NULs, lone surrogates,
paths, ids); some bodies change the launch's own fields instead. The bodies go to the platform's ASGI app in
this process (httpx over the app, with its middleware), on a SQLite store under a temporary data root; a launch
that is accepted is spawned on a fake Modal backend, so no job process starts. Every answer must be 201, 400
or 422, and a run whose launch was refused must read ``failed`` with its reason (at most
LAUNCH_REFUSAL_MAX_CHARS). Prints the answers by status and the bodies a second; exits 1 on any other answer.
tests/test_launch_rules.py runs a smaller sample of the same bodies.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["bodies", "fuzz_app", "check", "main"]

#: values of odd shape, any field may get one
_ODD_STRINGS = ["", " ", "10", "0", "-1", "1e400", "NaN", "true", "null", "\x00", "\ud800", "\u202etxt", "💥" * 40,
                "../../adapters/x", "/etc/passwd", "~/.ssh", "trainer/checkpoint-1", "worker.log", "ranks/0",
                "adapters", "jobs/x", "run_0123456789abcdef", "job_0123456789abcdef", "python:os:system",
                "wandb,mlflow", "H100:99999", "H100:0", "H100:8", "A10G", "a" * 300, "é" * 200 + "/x"]
_ODD_NUMBERS = [0, -1, 1, 2, 3, 7, 8, 64, 4096, 4097, 2**31, 2**53 + 1, 2**63, 10**30, -(10**30), 0.5, -0.0, 1e-300,
                1e308, -1e308, math.inf, -math.inf]


def _schema_fields(method: str) -> dict[str, dict[str, Any]]:
    from whileai.core.spec import SPEC_MODELS

    props = SPEC_MODELS[method].model_json_schema()["properties"]
    return {name: prop for name, prop in props.items()}


def _bounds(method: str, name: str) -> list[Any]:
    """A knob's ends, just past them and far past them (empty for a field without a range)."""
    from whileai.core.spec import SPEC_MODELS, knob_fields, knob_of

    model = SPEC_MODELS[method]
    if name not in knob_fields(model) or knob_of(model, name).range is None:
        return []
    lo, hi = knob_of(model, name).range  # type: ignore[misc]
    step = 1 if isinstance(lo, int) and isinstance(hi, int) else (hi - lo) / 1000 or 1e-9
    return [lo, hi, lo - step, hi + step, hi * 2 + 1, -hi - 1, str(hi), [lo], {"value": lo}]


def _odd(rng: random.Random, method: str, name: str) -> Any:
    """One mutated value for field ``name``: another JSON type, a bound, a size, or unicode."""
    kind = rng.choice(["type", "bound", "bound", "size", "unicode", "nested"])
    bounds = _bounds(method, name)
    if kind == "bound" and bounds:
        return rng.choice(bounds)
    if kind == "size":
        return rng.choice(["x" * rng.choice([256, 4096, 120_000]), list(range(rng.choice([100, 5000]))),
                           {f"k{i}": i for i in range(rng.choice([50, 2000]))}])
    if kind == "unicode":
        return "".join(chr(rng.choice([rng.randrange(0, 0x80), rng.randrange(0x80, 0xD800),
                                       rng.randrange(0xD800, 0xE000), rng.randrange(0xE000, 0x110000)]))
                       for _ in range(rng.randrange(1, 40)))
    if kind == "nested":
        value: Any = rng.choice(_ODD_NUMBERS + _ODD_STRINGS)
        for _ in range(rng.randrange(1, 6)):
            value = rng.choice([[value], {"v": value}])
        return value
    return rng.choice([*_ODD_STRINGS, *_ODD_NUMBERS, True, False, None, [], {}, ["first_action", 1], [None]])


def _base_model(rng: random.Random) -> Any:
    return rng.choice(["a" * 300, "a" * 300 + "/b", "é" * 130, "trainer", "trainer/checkpoint-5", "worker.log",
                       "train.trl.jsonl", "ranks/rank-0", "adapters/run_0123456789abcdef", "jobs", "platform.db",
                       "/", "/tmp", "~", "..", "org/name", "Qwen/Qwen2.5-0.5B-Instruct", "\x00", "x/\x00", "\ud800"])


def bodies(seed: int, n: int, dataset: str, run_ids: Iterator[str]) -> Iterator[dict[str, Any]]:
    """``n`` launch bodies drawn with ``seed``: a resolved spec of a random method on ``dataset``, mutated."""
    from whileai.core.spec import SPEC_MODELS
    from whileai.kit import defaults as kit_defaults

    rng = random.Random(seed)
    methods = list(SPEC_MODELS)
    for _ in range(n):
        method = rng.choice(methods)
        model = SPEC_MODELS[method]
        spec: dict[str, Any] = {**model(base_model=kit_defaults.KIT_BASE_NAME).knobs(), "method": method,
                                "base_model": kit_defaults.KIT_BASE_NAME, "dataset": dataset}
        body: dict[str, Any] = {"run_id": next(run_ids), "kind": method, "target": "modal", "spec": spec}
        fields = list(_schema_fields(method))
        for _ in range(rng.choice([0, 1, 1, 2, 3, 5])):
            name = rng.choice(fields + ["base_model", "gpu", "not_a_field", "ÿ" * 10])
            spec[name] = _base_model(rng) if name == "base_model" and rng.random() < 0.5 else _odd(rng, method, name)
        if rng.random() < 0.08:
            spec.pop(rng.choice(fields), None)
        if rng.random() < 0.08:
            body[rng.choice(["kind", "target", "spec", "extra"])] = _odd(rng, method, "kind")
        yield body


class _FakeModal:
    """Modal's seam, answering at once: an accepted launch spawns nothing (the fuzz is about the checks)."""

    def spawn(self, payload: dict[str, Any], gpu: str) -> str:
        return f"fc-{payload['job_id']}"

    def poll(self, call_id: str) -> dict[str, Any] | None:
        return None

    def pull(self, job_id: str, start: int) -> list[dict[str, Any]]:
        return []

    def put_adapter(self, run_id: str, local: Path) -> str:
        return f"/adapters/{run_id}"

    def fetch_adapter(self, remote: str, dest: Path) -> Path:
        return dest

    def cancel(self, call_id: str) -> None:
        return None


@contextlib.contextmanager
def fuzz_app(home: Path) -> Iterator[tuple[Any, Any, str, str]]:
    """``(httpx client, store, account, dataset id)`` over the platform's app on a SQLite store under ``home``,
    with launches spawned on a fake Modal backend."""
    import httpx

    from whileai.platform.api import create_app
    from whileai.platform.launcher import modal_backend
    from whileai.platform.store import Store

    from whileai.core.defaults import TRAIN_TARGET_ENV

    target = os.environ.get(TRAIN_TARGET_ENV)
    os.environ[TRAIN_TARGET_ENV] = "modal"  # a launch with no target may not start a local worker
    store = Store(f"sqlite:///{home / 'platform.db'}")
    acct, key = store.create_account("fuzz")
    dataset, _ = store.create_dataset(acct, [{"task_id": "t", "passed": True, "messages": []}], name="rows")
    before = modal_backend._BACKEND
    modal_backend._BACKEND = _FakeModal()
    try:
        transport = httpx.ASGITransport(app=create_app(store))
        with _sync(transport, key) as client:
            yield client, store, acct, dataset["id"]
    finally:
        modal_backend._BACKEND = before
        store.close()
        if target is None:
            os.environ.pop(TRAIN_TARGET_ENV, None)
        else:
            os.environ[TRAIN_TARGET_ENV] = target


@contextlib.contextmanager
def _sync(transport: Any, key: str) -> Iterator[Any]:
    """A blocking client over an ASGI transport (one event loop, kept for every request)."""
    import asyncio

    import httpx

    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1",
                               headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})

    class Client:
        def post(self, path: str, content: bytes) -> httpx.Response:
            return loop.run_until_complete(client.post(path, content=content))

    try:
        yield Client()
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


def check(client: Any, store: Any, acct: str, body: dict[str, Any]) -> tuple[int, str | None]:
    """Send one launch: its status, and what is wrong with its answer (None when it is 201, 400 or 422 and a
    refused launch's run reads failed with a bounded reason)."""
    from whileai.platform import defaults

    answer = client.post("/api/v1/jobs/launch", json.dumps(body).encode())
    status = answer.status_code
    if status not in (201, 400, 422):
        return status, f"{status}: {answer.text[:300]}"
    if status == 201:
        return status, None
    message = answer.json()["error"]["message"]
    cap = defaults.LAUNCH_REFUSAL_MAX_CHARS + 200  # the cap, and the words saying what was cut
    if len(message) > cap:
        return status, f"a refusal of {len(message):,} characters"
    run = store.get_run(acct, body["run_id"], series=False)
    if status == 422 and (run["status"] != "failed" or len(run["error"] or "") > cap + 100):
        return status, f"a refused launch left its run {run['status']} ({(run['error'] or '')[:200]!r})"
    return status, None


def run_fuzz(seed: int, n: int, home: Path) -> tuple[Counter[int], list[str], float]:
    """Send ``n`` bodies; ``(answers by status, what went wrong with which body, seconds)``."""
    statuses: Counter[int] = Counter()
    wrong: list[str] = []
    with fuzz_app(home) as (client, store, acct, dataset):
        runs = (store.create_run(acct, name="fuzz", status="running", config={"method": "sft"})["id"]
                for _ in iter(int, 1))
        start = time.perf_counter()
        for body in bodies(seed, n, dataset, runs):
            status, problem = check(client, store, acct, body)
            statuses[status] += 1
            if problem:
                wrong.append(f"{problem} <- {json.dumps(body)[:400]}")
        return statuses, wrong, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bodies", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WHILEAI_HOME"] = tmp
        statuses, wrong, seconds = run_fuzz(args.seed, args.bodies, Path(tmp))
    print(f"{args.bodies} launch bodies (seed {args.seed}) in {seconds:.1f} s ({args.bodies / seconds:.0f} a second): "
          f"{dict(sorted(statuses.items()))} by status; {len(wrong)} answered wrong")
    for line in wrong[:20]:
        print("  " + line)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
