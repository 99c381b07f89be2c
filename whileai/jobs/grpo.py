"""GRPO job body: LoRA GRPO on the prompts that have both a pass and a fail.

The reward is the first-action judge: each sampled reply's first action
against the row's ``gold`` (1 or 0); the dataset's ``gold`` column reaches the
reward function as a keyword, the way TRL passes dataset columns. Tools reach
the prompt only through the trainer's ``tools=`` (the rows' schemas, never
executed: ``max_tool_calling_iterations=0`` stops at the first action, which is
all the judge reads). ``truncated="mask"`` gives a reply the token cap cut no
gradient (``mask_truncated_completions``); ``"zero"`` scores it 0. beta,
loss_type, temperature and num_generations are always passed explicitly
(TRL_DEFAULTS records what TRL would use instead). A prompt whose tokens (tools
and generation prompt included) plus ``max_completion_length`` exceed the
model's context is left out and counted (``left_out_too_long``), never cut.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from whileai.core.spec import GRPOSpec

from whileai.jobs import _evaluation, _loading, _trainer_setup
from whileai.jobs._grpo_watch import group_watch
from whileai.simulations.context import prompt_length, tool_schemas
from whileai.simulations.rows import prompt_messages
from whileai.simulations import defaults

__all__ = ["fit", "load", "evaluate", "mixed_rows", "mixed_prompts", "first_action_reward", "SchemaTool"]

load = _loading.load_policy


def evaluate(spec: GRPOSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {**_evaluation.policy_pass_rate(model, tokenizer, rows, spec), "metric": "pass_rate"}


class SchemaTool(dict[str, Any]):
    """A tool schema the trainer can list (a dict, so the chat template renders it exactly) and name.

    Calling it is never needed: the job stops at the first action. It answers a
    plain message if a trainer ever does call it.
    """

    def __init__(self, schema: dict[str, Any]):
        super().__init__(schema)
        fn = schema.get("function", schema)
        self.__name__ = str(fn.get("name"))

    def __call__(self, **_arguments: Any) -> str:
        return "not executed: this job trains the first action only"


def mixed_rows(rows: list[dict[str, Any]], balance: bool) -> list[tuple[str, dict[str, Any], Any]]:
    """``(task, row, gold)`` per prompt GRPO trains on: tasks with a pass, a fail and a gold first action.

    One row per task when balanced (config ``balance``, on by default), else every
    row of those tasks. The runner exports these same rows beside the run, so its
    count is the trainer's.
    """
    from whileai.simulations.rowsource import task_key

    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(task_key(row), []).append(row)
    out = []
    for key, members in groups.items():
        labels = {r.get("passed") for r in members}
        if True not in labels or False not in labels:
            continue
        with_gold = [r for r in members if r.get("gold") is not None]
        if not with_gold:
            continue
        gold = next((r for r in with_gold if r.get("passed")), with_gold[0])["gold"]
        out += [(key, row, gold) for row in (members[:1] if balance else members)]
    return out


def mixed_prompts(rows: list[dict[str, Any]], balance: bool) -> list[dict[str, Any]]:
    """GRPO's prompts: from each task with a pass and a fail, its prompt and gold (once per task when balanced)."""
    return [{"prompt": prompt_messages(row), "gold": json.dumps(gold), "task": key}
            for key, row, gold in mixed_rows(rows, balance)]


def _tools(rows: list[dict[str, Any]]) -> list[SchemaTool]:
    """Every row's tool schema, one per name (the selection report's ``context.tool_schemas``), for the trainer."""
    return [SchemaTool(schema) for schema in tool_schemas(rows)]


def _ensure_response_parser(tokenizer: Any) -> None:
    """TRL parses replies into tool calls with the tokenizer's response template; the kit's needs one set."""
    if getattr(tokenizer, "response_template", None) is not None or getattr(tokenizer, "response_schema", None) is not None:
        return
    template = tokenizer.chat_template or ""
    if "<tool_call>" in template and "<|im_start|>" in template:
        from trl.chat_template_utils import qwen3_template

        tokenizer.response_template = qwen3_template  # same markup: ChatML turns, JSON in <tool_call> blocks
        return
    from trl.chat_template_utils import add_response_schema

    add_response_schema(tokenizer)


def _wire(completion: Any) -> dict[str, Any]:
    """A parsed reply (TRL's message, arguments as dicts) as an OpenAI assistant message."""
    if isinstance(completion, list):
        completion = completion[-1] if completion else {}
    if isinstance(completion, str):
        from whileai.kit import parse_tool_calls

        content, calls = parse_tool_calls(completion)
        return {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}
    message = {"role": "assistant", "content": completion.get("content")}
    if completion.get("tool_calls"):
        message["tool_calls"] = completion["tool_calls"]
    return message


def first_action_reward(truncated: str, stop_ids: set[int], tokenizer: Any = None, tools: Any = None) -> Any:
    """The TRL reward function: 1.0 when a reply's first action satisfies the row's gold, else 0.0.

    It decides exactly as the held-out measurement does (``judge_reply``): the
    reply's text (its token ids decoded with ``tokenizer`` when TRL passes them)
    goes through the kit's tool-call parser, and ``first_action_judge`` reads
    every gold form with the tools' JSON schemas (``tools``). TRL's own
    response parsing is not used for the verdict, so a reply cannot pass one
    and fail the other.
    """
    from whileai.kit import reply_format
    from whileai.simulations.judges import judge_reply

    fmt = reply_format(tokenizer) if tokenizer is not None else "hermes"  # the run's tool convention

    def first_action(prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Sequence[Any] | None = None,
                     gold: Any = None, **_columns: Any) -> list[float]:
        rewards: list[float] = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            ids = completion_ids[i] if completion_ids is not None else None
            if truncated == "zero" and ids is not None and (not ids or ids[-1] not in stop_ids):
                rewards.append(0.0)
                continue
            row = {"messages": list(prompt) if isinstance(prompt, list) else [],
                   "gold": json.loads(gold[i]) if isinstance(gold[i], str) else gold[i], "tools": tools}
            rewards.append(float(judge_reply(_reply_text(completion, ids, tokenizer, fmt), row, tool_format=fmt)["reward"]))
        return rewards

    return first_action


def _reply_text(completion: Any, ids: Any, tokenizer: Any, tool_format: str = "hermes") -> str:
    """The generated text: the decoded token ids, else the completion's text, else its calls as the template writes
    them (in ``tool_format``, the format the verdict parses)."""
    if tokenizer is not None and ids is not None:
        return cast(str, tokenizer.decode(list(ids), skip_special_tokens=False))
    if isinstance(completion, str):
        return completion
    from whileai.core.toolcalls import format_tool_call

    message = _wire(completion)
    calls = [c.get("function", c) for c in message.get("tool_calls") or []]
    return "\n".join([message.get("content") or ""] + [format_tool_call(c["name"], c.get("arguments") or {}, tool_format)
                                                        for c in calls]).strip()


def _gold_judge(spec: GRPOSpec) -> Any:
    """The independent judge named by ``config["gold_judge"]`` (a finished rm run's id), or None."""
    from whileai.jobs._loading import gold_judge

    return gold_judge(spec)  # what the platform resolved at launch, never the run's own summary


def _monitor(spec: GRPOSpec, run: Any, held: list[dict[str, Any]], reward: Any) -> tuple[Any, str]:
    """The HackMonitor callback for this run (or None) and what the run's summary should say about it.

    On by default for GRPO, watching the held-out prompts; ``config["monitor"]``
    holds its settings (HackMonitor's keyword arguments) or False to turn it off.
    The training reward is its proxy. Its gold must be an independent judge
    (``config["gold_judge"]``): the first-action judge is the reward itself.
    """
    settings = spec.monitor
    if settings is False:
        return None, "off (config['monitor'] is False)"
    if not held:
        return None, "off: no held-out prompts to watch (pass holdout= or cut the dataset)"
    from whileai.simulations.monitor import HackMonitor

    kwargs = dict(settings) if isinstance(settings, dict) else {}
    gold = _gold_judge(spec)
    monitor = HackMonitor(run, holdout=held, proxy=reward, gold=gold, **kwargs)
    if gold is None:
        return monitor, ("on without a gold judge: its divergence and gold-decline alarms are off, because the "
                         "only judge here is the training reward itself; name an independent one (a reward-model "
                         "run) in config['gold_judge'] to turn them on")
    return monitor, f"on, gold judge {spec.gold_judge}"


def _within_context(tokenizer: Any, prompts: list[dict[str, Any]], tools: list[SchemaTool], limit: int,
                    reply_cap: int) -> tuple[list[dict[str, Any]], int]:
    """The prompts whose tokens (with the tools and the generation prompt) plus ``reply_cap`` fit ``limit``, and how
    many were left out: a longer prompt is counted, never cut, like a too-long row in the other methods."""
    kept = [p for p in prompts if prompt_length(tokenizer, p["prompt"], tools) + reply_cap <= limit]
    if not kept:
        raise ValueError(f"grpo has no prompt to train on: each of the {len(prompts)} prompts plus "
                         f"max_completion_length={reply_cap} is longer than the model's context of {limit} tokens; "
                         "shorten the prompts, lower max_completion_length, or use a base with a longer context")
    return kept, len(prompts) - len(kept)


def _prompts_per_rank(per_step: int, world_size: int, prompts: int) -> int:
    """Each process's prompts per optimizer step: the effective ``per_step`` divided across ``world_size``.

    A step's worth capped by the data (fewer prompts than TRAIN_GRPO_PROMPTS_PER_STEP) is rounded down to a
    multiple of the world size; the configured size that does not divide is refused, naming those that do.
    """
    if world_size <= 1:
        return per_step
    if per_step % world_size and per_step == int(defaults.TRAIN_GRPO_PROMPTS_PER_STEP):
        from whileai.core.spec import split_problem

        raise ValueError(str(split_problem("prompts per step (TRAIN_GRPO_PROMPTS_PER_STEP)", per_step, world_size)))
    if per_step < world_size:
        raise ValueError(f"grpo has {prompts} prompts to train on, fewer than the {world_size} processes that each "
                         f"need one per step; push more tasks with mixed outcomes, or use {max(1, prompts)} "
                         "processes or fewer")
    return (per_step - per_step % world_size) // world_size


def fit(spec: GRPOSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
        callbacks: list[Any], holdout: list[dict[str, Any]] | None = None, run: Any = None) -> tuple[Any, dict[str, Any]]:
    from trl import GRPOConfig, GRPOTrainer

    from whileai.simulations.export import to_hf_dataset

    prompts = mixed_prompts(rows, spec.balance)
    if not prompts:
        raise ValueError("grpo found no task with both a pass and a fail (and a gold first action) to train on; "
                         "push rollouts with several samples per task and mixed outcomes")
    tools = _tools(rows)
    prompts, too_long = _within_context(tokenizer, prompts, tools, _loading.max_length(model),
                                        spec.max_completion_length)
    _ensure_response_parser(tokenizer)
    generations = spec.generations
    # a set with fewer prompts than a step's worth steps on all of them (accumulating past the data makes no step)
    per_step = max(1, min(int(defaults.TRAIN_GRPO_PROMPTS_PER_STEP), len(prompts)))
    per_rank = _prompts_per_rank(per_step, spec.world_size, len(prompts))
    micro = max(1, min(per_rank, int(defaults.TRAIN_GRPO_PROMPTS_PER_MICROBATCH)))
    if spec.batch_per_device is not None:  # a device holds at most this many completions: whole groups of them
        micro = max(1, min(micro, spec.batch_per_device // generations))
    if per_rank % micro:
        micro = max(n for n in range(micro, 0, -1) if per_rank % n == 0)  # whole micro-batches of prompts
    per_step = per_rank * spec.world_size
    args = GRPOConfig(
        **_trainer_setup.trainer_settings(spec, folder),
        per_device_train_batch_size=generations * micro,
        gradient_accumulation_steps=per_rank // micro,
        max_tool_calling_iterations=0,
        log_completions=False,
    )
    stop_ids = {i for i in (tokenizer.eos_token_id, tokenizer.pad_token_id) if i is not None}
    reward = first_action_reward(spec.truncated, stop_ids, tokenizer, [dict(t) for t in tools])
    held = [{"prompt": prompt_messages(r), "gold": r["gold"], "tools": r.get("tools")}
            for r in _evaluation.distinct_prompts(holdout or [], spec.holdout_rows, spec.seed)]
    from whileai.jobs.distributed import world

    if world().first:
        monitor, monitor_note = _monitor(spec, run, held, reward)
    else:  # the monitor's looks are rank 0's: one set of looks, written once
        monitor, monitor_note = None, "on rank 0"
    extra_callbacks = [monitor] if monitor is not None else []
    trainer_tools: list[Callable[..., Any]] = list(tools)  # TRL takes tools as callables; a SchemaTool is one
    watch = group_watch()  # first, so its figures join each step's log before the run's callback sends it
    from contextlib import ExitStack

    from whileai.jobs._vllm_server import VLLMServer, server_mode

    ends = ExitStack()
    if server_mode(spec) and world().rank == 0:  # node 0's server, up before the trainer connects to it
        ends.enter_context(VLLMServer(spec, _loading.base_path(_loading.base_of(spec), spec)))
    with ends, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[monitor.wrap(reward) if monitor is not None else reward],
            args=args,
            train_dataset=to_hf_dataset(prompts),
            processing_class=tokenizer,
            peft_config=_loading.peft_config(model, spec),
            tools=trainer_tools or None,
            callbacks=[watch] + callbacks + extra_callbacks,
        )
        _trainer_setup.fit_trainer(trainer)
    extra: dict[str, Any] = {
        "rows": len(prompts),
        "prompts": len(prompts),
        "left_out_too_long": too_long,
        "trainer_received": int(getattr(trainer.train_dataset, "num_rows", -1)),  # the Dataset the trainer holds
        "unit": "prompts",
        "steps": trainer.state.global_step,
        "tools": [t.__name__ for t in tools],
        "generations": generations,
        "prompts_per_step": per_step,
        **watch.summary(),
    }
    if run is not None and extra.get("groups_note"):
        run.note(grpo_groups=extra["groups_note"])
    extra["monitor"] = monitor_note  # the monitor notes its own summary on the run (summary["monitor"])
    return trainer.model, extra
