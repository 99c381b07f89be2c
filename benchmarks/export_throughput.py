"""Export throughput: export_dataset with the gate on, against a plain JSONL read+write, in the same run.

    python benchmarks/export_throughput.py            # 100,000 rows
    python benchmarks/export_throughput.py --rows 20000 --repeat 1
    python benchmarks/export_throughput.py --privileged   # rows carry a privileged block: the leak check runs

The export pauses Python's cyclic garbage collector while it works (see
jsonl.gc_paused), so the baseline is measured both as plain code runs and
with the collector paused too; the ratio against each is printed.

The input is a file of 3-turn tool-use rows (system, user, then three assistant
turns: two tool calls with their tool outputs, and a final answer), the shape
a simulator writes. The baseline reads every line and writes it back with the
fastest JSON library installed (orjson when present), with no checks at all.
Targets: at least 20,000 rows/s, and within 3x of the baseline's time.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path

TARGET_ROWS_PER_S = 20_000
TARGET_RATIO = 3.0

CITIES = ["Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Quito", "Perth", "Dakar"]


def make_row(i: int, privileged: bool = False) -> dict:
    city = CITIES[i % len(CITIES)]
    row = {
        "messages": [
            {"role": "system", "content": "You are a weather agent. Use the tools; answer in one sentence."},
            {"role": "user", "content": f"Is it warmer in {city} than yesterday? Answer in celsius. #{i}"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_0", "type": "function", "function": {
                "name": "get_weather", "arguments": f'{{"city": "{city}", "unit": "celsius"}}'}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": f'{{"city": "{city}", "temp": {i % 35}}}'},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
                "name": "get_history", "arguments": f'{{"city": "{city}", "days_ago": 1}}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": f'{{"city": "{city}", "temp": {(i + 3) % 35}}}'},
            {"role": "assistant", "content": f"No: {i % 35} °C today against {(i + 3) % 35} °C yesterday in {city}."},
        ],
        "tools": [
            {"type": "function", "function": {"name": "get_weather", "description": "Current weather.", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                "required": ["city"]}}},
            {"type": "function", "function": {"name": "get_history", "description": "Past weather.", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}, "days_ago": {"type": "integer"}},
                "required": ["city", "days_ago"]}}},
        ],
        "reward": float(i % 2),
        "passed": bool(i % 2),
        "gold": {"name": "get_weather", "arguments": {"city": city, "unit": "celsius"}},
        "markers": {"proxy_reward": 0.5, "difficulty": "easy"},
        "task_id": f"weather-{i // 4:05d}",
        "rollout_index": i % 4,
        "sampling": {"temperature": 0.7},
    }
    if privileged:  # what a simulator hides: a booking code and a note, neither recited by the replies
        row["privileged"] = {
            "booking_code": f"QX{i % 10}-{i:06d}K",
            "note": f"The grader accepts {(i + 1) % 35} °C for {city} only when both tools were called.",
        }
    return row


def plain_read_write(src: Path, dst: Path) -> int:
    """The baseline: parse every line and write it back with the fastest JSON library, nothing else."""
    try:
        import orjson

        loads, dumps = orjson.loads, orjson.dumps
    except ImportError:
        import json

        loads, dumps = json.loads, lambda row: json.dumps(row).encode()
    rows = [loads(line) for line in src.read_bytes().split(b"\n") if line]
    dst.write_bytes(b"\n".join(dumps(row) for row in rows) + b"\n")
    return len(rows)


def best_of(repeat: int, fn) -> tuple[float, float]:
    """The best wall-clock and the best CPU seconds of ``repeat`` runs (CPU time is steadier on a shared machine)."""
    wall = cpu = float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs per measurement")
    parser.add_argument("--privileged", action="store_true", help="give every row a privileged block to check")
    args = parser.parse_args()

    import warnings

    import whileai.simulations as wai
    from whileai.domain.rows.jsonl import JSONL_CODEC, write_jsonl

    with tempfile.TemporaryDirectory(prefix="whileai-bench-") as tmp:
        src = Path(tmp) / "rollouts.jsonl"
        write_jsonl(src, (make_row(i, args.privileged) for i in range(args.rows)))
        size_mb = os.path.getsize(src) / 1e6

        baseline = best_of(args.repeat, lambda: plain_read_write(src, Path(tmp) / "plain.jsonl"))
        gc.disable()  # the same baseline with the collector paused, as the export does
        try:
            paused = best_of(args.repeat, lambda: plain_read_write(src, Path(tmp) / "plain.jsonl"))
        finally:
            gc.enable()
        results = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the file carries its own system prompt and tools
            for fmt in ("openai", "trl"):
                out = Path(tmp) / f"export-{fmt}.jsonl"
                results[fmt] = best_of(
                    args.repeat, lambda out=out, fmt=fmt: wai.export_dataset(src, out, format=fmt, validate=True)
                )

    print(f"rows: {args.rows:,} ({size_mb:.1f} MB, 3 assistant turns each{', privileged block' if args.privileged else ''}); JSON codec: {JSONL_CODEC}; "
          f"best of {args.repeat}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'':32}{'wall s':>9}{'rows/s':>10}{'cpu s':>9}{'rows/cpu-s':>12}{'ratio (wall, cpu)':>20}")
    print(f"{'plain read+write (' + JSONL_CODEC + ')':32}{baseline[0]:9.2f}{args.rows / baseline[0]:10,.0f}"
          f"{baseline[1]:9.2f}{args.rows / baseline[1]:12,.0f}")
    print(f"{'  the same, collector paused':32}{paused[0]:9.2f}{args.rows / paused[0]:10,.0f}"
          f"{paused[1]:9.2f}{args.rows / paused[1]:12,.0f}")
    ok = True
    for fmt, (wall, cpu) in results.items():
        rate = args.rows / wall
        ratio = wall / baseline[0]
        verdict = rate >= TARGET_ROWS_PER_S and ratio <= TARGET_RATIO
        ok &= verdict
        print(f"{'export_dataset format=' + repr(fmt):32}{wall:9.2f}{rate:10,.0f}{cpu:9.2f}{args.rows / cpu:12,.0f}"
              f"{ratio:11.2f}x{cpu / baseline[1]:7.2f}x  {'ok' if verdict else 'MISSED'}")
        print(f"{'':32}{'vs the paused baseline:':>39}{wall / paused[0]:8.2f}x{cpu / paused[1]:7.2f}x")
    print(f"targets: >= {TARGET_ROWS_PER_S:,} rows/s and <= {TARGET_RATIO:.0f}x the plain read+write (wall): "
          f"{'met' if ok else 'missed'}")


if __name__ == "__main__":
    main()
