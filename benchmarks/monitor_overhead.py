"""HackMonitor's cost: its own work per look against the look's sampling, and wrap against a reward call.

    python benchmarks/monitor_overhead.py           # default look size (MONITOR_N_PROMPTS x MONITOR_K)
    python benchmarks/monitor_overhead.py --looks 3 --max-new-tokens 64

1. A real HackMonitor samples the kit's tiny model (LoRA on, the default
   sampler) on held-out rows of the kit's sample task, scores with the
   first-action reward as the proxy and ``first_action_judge`` as gold, and a
   training batch goes through the wrapped reward between looks. Each look's
   time splits into sampling, the judges (user code), the KL forward passes,
   and the monitor's own work (reading features, the statistics, the scan,
   the report). Target: own work under 5% of sampling.
2. ``wrap``: what the watched reward adds to a call, measured on a reward that
   does nothing (so the difference is the wrapper alone, best of many
   repeats), against the time of one call of the first-action reward GRPO
   trains with, on the same 64 TRL-shaped completions. Target: under 1%.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402


def first_action_reward(prompts, completions, gold, **_):
    """The proxy GRPO trains with: the completion's first action against the row's gold."""
    from whileai.domain.judges.judging import first_action_judge

    out = []
    for prompt, completion in zip(prompts, completions):
        messages = list(prompt) + [_message(completion)]
        out.append(first_action_judge({"messages": messages, "gold": gold_of(gold, len(out))})["reward"])
    return out


def gold_of(gold, i):
    g = gold[i]
    return json.loads(g) if isinstance(g, str) else g


def _message(completion):
    from whileai.kit import parse_tool_calls

    text = completion[0]["content"] if isinstance(completion, list) else completion
    content, calls = parse_tool_calls(text)
    return {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}


def held_out(n: int) -> list[dict]:
    from whileai.kit import load_sample
    from whileai.domain.rows.rollouts import prompt_messages

    rows, seen = [], set()
    for row in load_sample():
        if row["task_id"] in seen:
            continue
        seen.add(row["task_id"])
        rows.append({"prompt": prompt_messages(row), "gold": row["gold"]})
        if len(rows) == n:
            break
    return rows


def look_costs(args) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    from whileai.kit import build_tokenizer, tiny_model
    from whileai.domain import defaults
    from whileai.domain.judges.judging import first_action_judge
    from whileai.domain.monitor import HackMonitor

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    tokenizer = build_tokenizer()
    model = get_peft_model(tiny_model(tokenizer), LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    rows = held_out(defaults.MONITOR_N_PROMPTS + 16)
    holdout, train = rows[: defaults.MONITOR_N_PROMPTS], rows[defaults.MONITOR_N_PROMPTS :]
    monitor = HackMonitor(holdout=holdout, gold=first_action_judge, max_new_tokens=args.max_new_tokens)
    reward = monitor.wrap(first_action_reward)
    print(f"look: {defaults.MONITOR_N_PROMPTS} prompts x {defaults.MONITOR_K} samples, "
          f"up to {args.max_new_tokens} new tokens, kit tiny model with LoRA, {args.looks} looks")
    parts = []
    for look in range(args.looks):
        entry = monitor.evaluate(step=look, model=model, tokenizer=tokenizer)
        parts.append(entry["seconds"])
        batch = [r for r in train for _ in range(4)]
        completions = [[{"role": "assistant", "content": f"reply {i}"}] for i in range(len(batch))]
        reward(prompts=[r["prompt"] for r in batch], completions=completions, gold=[r["gold"] for r in batch])
    later = parts[1:] or parts  # the first look also builds caches
    mean = {key: float(np.mean([p[key] for p in later])) for key in later[0]}
    print(f"{'part':12s} {'seconds':>9s}")
    for key in ("sampling", "judges", "kl", "monitor", "total"):
        print(f"{key:12s} {mean[key]:9.3f}")
    ratio = mean["monitor"] / mean["sampling"]
    print(f"monitor's own work / sampling = {ratio:.2%} (target < 5%); "
          f"with the KL passes {(mean['monitor'] + mean['kl']) / mean['sampling']:.2%}")


def wrap_cost(args) -> None:
    from whileai.domain.monitor import HackMonitor

    rows = held_out(16)
    batch = [r for r in rows for _ in range(4)]
    kwargs = {
        "prompts": [r["prompt"] for r in batch],
        "completions": [[{"role": "assistant", "content": '<tool_call>{"name": "get_time", "arguments": '
                          '{"city": "Tokyo"}}</tool_call>'}] for _ in batch],
        "gold": [r["gold"] for r in batch],
    }

    def trivial(prompts, completions, **_):
        return [1.0] * len(completions)

    def timed(fn, calls: int = 20) -> float:
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            for _ in range(calls):
                fn(**kwargs)
            best = min(best, (time.perf_counter() - start) / calls)
        return best

    monitor = HackMonitor(holdout=["q"] * 8)
    bare_trivial, watched_trivial = timed(trivial), timed(monitor.wrap(trivial))
    added = watched_trivial - bare_trivial  # what the wrapper adds per call, whatever the reward does
    reward_call = timed(first_action_reward, calls=3)
    print(f"wrap adds {added * 1e6:.2f} us per call ({len(batch)} completions; bare trivial reward "
          f"{bare_trivial * 1e6:.2f} us, watched {watched_trivial * 1e6:.2f} us)")
    print(f"first-action reward call: {reward_call * 1e6:.0f} us -> wrap adds {added / reward_call:.3%} "
          "(target < 1%)")


def main() -> None:
    from whileai.domain import defaults

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--looks", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=defaults.MONITOR_MAX_NEW_TOKENS)
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    wrap_cost(args)
    look_costs(args)


if __name__ == "__main__":
    main()
