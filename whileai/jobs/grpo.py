"""GRPO job body: LoRA GRPO on the prompts that have both a pass and a fail (or, with ``prompt_source="gold"``,
every prompt with a gold first action).

The reward is what the spec's ``reward`` names (``whileai.jobs._rewards``): by
default the exact first-action judge, each sampled reply's first action
against the row's ``gold`` (1 or 0); the dataset's ``gold`` column reaches the
reward functions as a keyword, the way TRL passes dataset columns. Several
rewards are summed by TRL with ``reward_weights``. Tools reach
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
from typing import Any, TypedDict, cast

from whileai.core.spec import GRPOSpec

from whileai.jobs import _episode_play, _evaluation, _loading, _rewards, _trainer_setup
from whileai.jobs._grpo_batch import batch_shape
from whileai.jobs._measure import HeldOutMeasure
from whileai.jobs._trainer_setup import ensure_response_parser
from whileai.jobs._grpo_watch import GroupStats, group_watch
from whileai.jobs._rewards import first_action_reward
from whileai.jobs._training_fields import GRPOFit
from whileai.domain.rows.context import prompt_length, prompt_tools, shared_tools, tool_schemas
from whileai.domain.judges.rewards import reward_strength
from whileai.domain.rows.rollouts import prompt_messages

__all__ = ["fit", "load", "evaluate", "keeps_measure", "mixed_rows", "mixed_prompts", "first_action_reward",
           "SchemaTool", "GRPOPrompt", "GRPOTextPrompt", "GRPOFit"]

load = _loading.load_policy


class GRPOPrompt(TypedDict):
    """One prompt GRPO trains on, as its dataset's columns hold it (TRL passes each column to every reward
    function by name): the conversation up to the first action, the gold first action and the row's tools as
    JSON text, and the task it came from."""

    prompt: list[dict[str, Any]]
    gold: str
    task: str
    row_tools: str


class GRPOTextPrompt(TypedDict):
    """A :class:`GRPOPrompt` whose conversation is rendered to text with its own row's tools (:func:`_as_text`)."""

    prompt: str
    gold: str
    task: str
    row_tools: str


def _exact_verdicts(spec: GRPOSpec, funcs: list[Any], exact: Any) -> tuple[list[Any], str | None, list[float] | None]:
    """Where the sampled pass rate comes from: ``(the trainer's reward functions, exact_key, tally)`` for
    ``group_watch``. A graded reward's mean is no pass rate, so where the paid reward is not the exact judge alone,
    the pass rate is the paid ``first_action`` term's column, or the verdicts of ``exact`` on the same completions
    as the first paid reward (never paid: TRL's weights and sums are untouched). ``funcs`` are the trainer's, the
    monitor's wrap already on: the tally goes around it, so the monitor still sees its own proxy."""
    if reward_strength(spec.reward) == "exact":
        return funcs, None, None
    if "first_action" in spec.reward:
        return funcs, "rewards/first_action/mean", None
    tally: list[float] = []
    return [_rewards.tallied(funcs[0], exact, tally), *funcs[1:]], None, tally


def evaluate(spec: GRPOSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> HeldOutMeasure:
    """The exact judge's held-out pass rate; where the reward is another, that reward on the same greedy replies
    too (``proxy_scores``, per prompt), so the run can say whether the reward rose more than the task. In an
    environment: the held-out episodes played whole and judged (``_episode_play.episode_pass_rate``)."""
    if spec.environment is not None:
        from whileai.jobs._episodes import paid_proxy

        return _episode_play.episode_pass_rate(spec, model, tokenizer, rows, proxy=paid_proxy(spec))
    proxy = None
    if reward_strength(spec.reward) != "exact":
        stop_ids = {i for i in (tokenizer.eos_token_id, tokenizer.pad_token_id) if i is not None}
        tools = shared_tools(rows) or []  # rows whose tools differ: each judged without a shared schema
        proxy = _rewards.proxy_reward(*_rewards.reward_functions(spec, tokenizer, tools, stop_ids))
    return _evaluation.policy_pass_rate(model, tokenizer, rows, spec, proxy=proxy)


def keeps_measure(spec: GRPOSpec) -> bool:
    """The held-out episode pass rate is kept beside the adapter (a greedy measure with nothing added) and read back
    as this stage's start, unless the user's rewards are paid in the judge's place: then their scores of the same
    episodes are added (``proxy_scores``), as the single-turn measure always adds the proxy's, so it is measured
    again."""
    from whileai.jobs._episode_watch import user_rewards

    return spec.environment is not None and not user_rewards(spec)


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


def mixed_rows(rows: list[dict[str, Any]], balance: bool,
               source: str = "mixed") -> list[tuple[str, dict[str, Any], Any]]:
    """``(task, row, gold)`` per prompt GRPO trains on: tasks with a pass, a fail and a gold first action, or with
    ``source="gold"`` (config ``prompt_source``) every task with a gold first action.

    One row per task when balanced (config ``balance``, on by default), else every
    row of those tasks. The runner exports these same rows beside the run, so its
    count is the trainer's.
    """
    from whileai.domain.rows.rowsource import task_key

    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(task_key(row), []).append(row)
    out = []
    for key, members in groups.items():
        labels = {r.get("passed") for r in members}
        if source == "mixed" and (True not in labels or False not in labels):
            continue
        with_gold = [r for r in members if r.get("gold") is not None]
        if not with_gold:
            continue
        gold = next((r for r in with_gold if r.get("passed")), with_gold[0])["gold"]
        out += [(key, row, gold) for row in (members[:1] if balance else members)]
    return out


def mixed_prompts(rows: list[dict[str, Any]], balance: bool, source: str = "mixed") -> list[GRPOPrompt]:
    """GRPO's prompts: from each task :func:`mixed_rows` keeps, its prompt and gold (once per task when balanced)."""
    return [{"prompt": prompt_messages(row), "gold": json.dumps(gold), "task": key,
             "row_tools": json.dumps(row.get("tools") or [])}
            for key, row, gold in mixed_rows(rows, balance, source)]


def _as_text(tokenizer: Any, prompt: GRPOPrompt) -> GRPOTextPrompt:
    """``prompt`` rendered to text with its own row's tools and the generation prompt: TRL gives one ``tools=`` to
    every prompt, so rows whose tools differ reach the trainer as text (completions are judged from their token
    ids either way)."""
    own = json.loads(prompt["row_tools"]) or None
    return {"prompt": tokenizer.apply_chat_template(prompt["prompt"], tools=own, add_generation_prompt=True,
                                                    tokenize=False),
            "gold": prompt["gold"], "task": prompt["task"], "row_tools": prompt["row_tools"]}


def _gold_judge(spec: GRPOSpec) -> Any:
    """The independent judge named by ``config["gold_judge"]`` (a finished rm run's id), or None."""
    from whileai.jobs._loading import gold_judge

    return gold_judge(spec)  # what the platform resolved at launch, never the run's own summary


def _monitor(spec: GRPOSpec, run: Any, held: list[dict[str, Any]], proxy: Any) -> tuple[Any, str]:
    """The HackMonitor callback for this run (or None) and what the run's summary should say about it.

    On by default for GRPO, watching the held-out prompts; ``spec.monitor`` holds its settings (HackMonitor's
    keyword arguments) or False to turn it off. ``proxy`` (the reward the policy is paid) is its proxy; its gold
    is never a judge weaker than that reward (:func:`_monitor_gold`).
    """
    settings = spec.monitor
    if settings is False:
        return None, "off (config['monitor'] is False)"
    if not held:
        return None, "off: no held-out prompts to watch (pass holdout= or cut the dataset)"
    from whileai.domain.monitor import HackMonitor

    kwargs = dict(settings) if isinstance(settings, dict) else {}
    # the monitor samples the held-out prompts at the trainer's temperature, so its gold reads the policy being
    # trained (at the monitor's own 1.0 the kit's SFT policy passed 0.03 of its samples, greedy 0.38);
    # monitor.temperature (a recipe's) or sampling= (HackMonitor's own setting) wins
    hotter = kwargs.pop("temperature", None)
    kwargs["sampling"] = {"temperature": hotter or spec.temperature, **dict(kwargs.get("sampling") or {})}
    gold, note, disarmed = _monitor_gold(spec)
    monitor = HackMonitor(run, holdout=held, proxy=proxy, gold=gold, disarm=disarmed, **kwargs)
    return monitor, note


def _monitor_gold(spec: GRPOSpec) -> tuple[Any, str, dict[str, str]]:
    """The monitor's gold judge, what the run says of it, and the alarms left off with why.

    A reward other than the exact first-action judge (partial credit, a reward model, the user's code) is
    watched against the exact judge, unless ``gold_judge`` names another. Where the reward is the exact judge
    itself, no judge here is stronger: a reward model named as gold is weaker, and its alarms could only be
    false, so the alarms that need a gold judge are off and the gold-free ones (length, KL, format) stay on.
    """
    from whileai.domain.judges.judging import first_action_judge
    from whileai.domain.monitor import GOLD_CHECKS

    if reward_strength(spec.reward) != "exact":
        if spec.gold_judge:
            return _gold_judge(spec), f"on, gold judge {spec.gold_judge} (named by gold_judge)", {}
        return first_action_judge, ("on, gold judge: the exact first-action judge (the reward, "
                                    f"{','.join(spec.reward)}, is weaker: it can pay for what the task does not)"), {}
    why = ("the reward is the exact first-action judge, the strictest judge this run has" +
           (f"; gold_judge={spec.gold_judge} is a learned reward model, weaker than it, so its alarms could only be "
            "false" if spec.gold_judge else "") +
           "; to watch another reward against it, train with reward=fine_grained, rm or python:MODULE:FUNCTION")
    off = {kind: f"off: {why}" for kind in GOLD_CHECKS}
    return None, f"on with the alarms that need no gold judge (length, kl, format): {why}", off




def _within_context(tokenizer: Any, prompts: list[GRPOPrompt], shared: list[dict[str, Any]] | None, limit: int,
                    reply_cap: int) -> tuple[list[GRPOPrompt], int]:
    """The prompts whose tokens (with their tools and the generation prompt) plus ``reply_cap`` fit ``limit``, and how
    many were left out: a longer prompt is counted, never cut, like a too-long row in the other methods."""
    kept = [p for p in prompts if prompt_length(tokenizer, p["prompt"], prompt_tools(
        {"tools": json.loads(p["row_tools"])}, shared)) + reply_cap <= limit]
    if not kept:
        raise ValueError(f"grpo has no prompt to train on: each of the {len(prompts)} prompts plus "
                         f"max_completion_length={reply_cap} is longer than the model's context of {limit} tokens; "
                         "shorten the prompts, lower max_completion_length, or use a base with a longer context")
    return kept, len(prompts) - len(kept)


def _rank_monitor(spec: GRPOSpec, run: Any, holdout: list[dict[str, Any]] | None,
                  proxy: Any) -> tuple[Any, str]:
    """The hack monitor on rank 0, over the held-out prompts, and what the run says of it; on other ranks none."""
    from whileai.jobs.distributed import world

    if not world().first:  # the monitor's looks are rank 0's: one set of looks, written once
        return None, "on rank 0"
    held = [{"prompt": prompt_messages(r), "gold": r["gold"], "tools": r.get("tools")}
            for r in _evaluation.distinct_prompts(holdout or [], spec.holdout_rows, spec.seed)]
    return _monitor(spec, run, held, proxy)


def _training_prompts(spec: GRPOSpec, rows: list[dict[str, Any]]) -> list[GRPOPrompt]:
    """The prompts GRPO trains on (:func:`mixed_prompts`); raises, saying what to push, where there is none."""
    prompts = mixed_prompts(rows, spec.balance, spec.prompt_source)
    if not prompts and spec.prompt_source == "gold":
        raise ValueError("grpo with prompt_source='gold' found no task with a gold first action to train on; grade "
                         "the rows with a gold (docs/rows.md)")
    if not prompts:
        raise ValueError("grpo found no task with both a pass and a fail (and a gold first action) to train on; "
                         "push rollouts with several samples per task and mixed outcomes, or pass "
                         "prompt_source='gold' to sample every task that has a gold")
    return prompts


def _fitting_prompts(spec: GRPOSpec, model: Any, tokenizer: Any, prompts: list[GRPOPrompt],
                     shared: list[dict[str, Any]] | None) -> tuple[Sequence[GRPOPrompt | GRPOTextPrompt], int]:
    """The prompts that fit the model's context with a full reply (:func:`_within_context`), each rendered as text
    with its own row's tools where the rows' tools differ (``shared`` None), and how many were left out."""
    fitting, too_long = _within_context(tokenizer, prompts, shared, _loading.max_length(model),
                                        spec.max_completion_length)
    if shared is None:
        return [_as_text(tokenizer, p) for p in fitting], too_long
    return fitting, too_long


def _grpo_config(spec: GRPOSpec, folder: Path, per_rank: int, micro: int) -> Any:
    """TRL's ``GRPOConfig`` for the run: the shared trainer settings, with ``micro`` prompts' groups per device
    batch, accumulated to ``per_rank`` prompts a step, stopping at the first action."""
    from trl import GRPOConfig

    return GRPOConfig(
        **_trainer_setup.trainer_settings(spec, folder),
        per_device_train_batch_size=spec.generations * micro,
        gradient_accumulation_steps=per_rank // micro,
        max_tool_calling_iterations=0,
        log_completions=False,
    )


def _train(spec: GRPOSpec, model: Any, tokenizer: Any, args: Any, prompts: Sequence[GRPOPrompt | GRPOTextPrompt],
           reward_funcs: list[Any], tools: list[SchemaTool], callbacks: list[Any]) -> Any:
    """Build TRL's ``GRPOTrainer`` and train it (with node 0's vLLM server up for the run where the spec serves
    generation from one); returns the trained trainer."""
    from contextlib import ExitStack

    from trl import GRPOTrainer

    from whileai.jobs._vllm_server import VLLMServer, server_mode
    from whileai.jobs.distributed import world
    from whileai.domain.export import to_hf_dataset

    ends = ExitStack()
    if server_mode(spec) and world().rank == 0:  # node 0's server, up before the trainer connects to it
        ends.enter_context(VLLMServer(spec, _loading.base_path(_loading.base_of(spec), spec)))
    with ends, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=cast(Any, reward_funcs),
            args=args,
            train_dataset=to_hf_dataset(prompts),
            processing_class=tokenizer,
            peft_config=_loading.peft_config(model, spec),
            tools=cast(list[Callable[..., Any]], list(tools)) or None,  # TRL takes callables; a SchemaTool is one
            callbacks=callbacks,
        )
        _trainer_setup.fit_trainer(trainer)
    return trainer


def _fit_summary(spec: GRPOSpec, trainer: Any, rows: list[dict[str, Any]], prompts: Sequence[GRPOPrompt | GRPOTextPrompt],
                 too_long: int, shared: list[dict[str, Any]] | None, per_step: int, weights: list[float],
                 groups: GroupStats) -> GRPOFit:
    """What the run's training summary says of the fit: the prompts trained on and left out, the steps, the tools,
    the batch shape, the rewards and what the group watch saw."""
    return {
        "rows": len(prompts),
        "prompts": len(prompts),
        "left_out_too_long": too_long,
        "trainer_received": int(getattr(trainer.train_dataset, "num_rows", -1)),  # the Dataset the trainer holds
        "unit": "prompts",
        "steps": trainer.state.global_step,
        "tools": [str(t.get("function", t).get("name")) for t in tool_schemas(rows)],  # every row's, first seen first
        "tools_per_prompt": shared is None,  # each prompt rendered with its own row's tools
        "generations": spec.generations,
        "prompts_per_step": per_step,
        "reward": list(spec.reward),
        "reward_weights": weights,
        **groups,
    }


def fit(spec: GRPOSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
        callbacks: list[Any], holdout: list[dict[str, Any]] | None = None, run: Any = None) -> tuple[Any, GRPOFit]:
    """Train ``model`` with GRPO on the rows' prompts (see the module docstring); returns the trained model and what
    the run's training summary adds (prompts, steps, batch shape, rewards, the groups' and the monitor's notes).
    In an environment, whole episodes are rolled out and judged instead (``_episodes.fit_episodes``)."""
    if spec.environment is not None:
        from whileai.jobs._episodes import fit_episodes

        return fit_episodes(spec, model, tokenizer, rows, folder, callbacks, run=run, holdout=holdout)
    chosen = _training_prompts(spec, rows)
    shared = shared_tools(rows)  # None: the rows' tools differ, and each prompt goes as text with its own
    tools = [SchemaTool(schema) for schema in shared or []]
    prompts, too_long = _fitting_prompts(spec, model, tokenizer, chosen, shared)
    ensure_response_parser(tokenizer)
    per_step, per_rank, micro = batch_shape(spec, len(prompts))
    args = _grpo_config(spec, folder, per_rank, micro)
    stop_ids = {i for i in (tokenizer.eos_token_id, tokenizer.pad_token_id) if i is not None}
    schemas = [dict(t) for t in tools]
    funcs, weights = _rewards.reward_functions(spec, tokenizer, schemas, stop_ids)
    proxy = _rewards.proxy_reward(funcs, weights)
    monitor, monitor_note = _rank_monitor(spec, run, holdout, proxy)
    trainer_funcs, exact_key, tally = _exact_verdicts(
        spec, [monitor.wrap(f) if monitor is not None and f is proxy else f for f in funcs],
        _rewards.first_action_reward(spec.truncated, stop_ids, tokenizer, schemas))
    watch = group_watch(exact_key, tally)  # first, so its figures join each step's log before the run's callback sends it
    trainer = _train(spec, model, tokenizer, args, prompts, trainer_funcs, tools,
                     [watch, *callbacks, *([monitor] if monitor is not None else [])])
    extra = _fit_summary(spec, trainer, rows, prompts, too_long, shared, per_step, weights, watch.summary())
    if run is not None and extra.get("groups_note"):
        run.note(grpo_groups=extra["groups_note"])
    extra["monitor"] = monitor_note  # the monitor notes its own summary on the run (summary["monitor"])
    return trainer.model, extra
