"""GRPO over whole episodes: TRL's ``GRPOTrainer(environment_factory=...)`` rolls each prompt out in the spec's
environment, and the episode judge's verdict is the reward.

``grpo.fit`` hands over here when the spec names an environment. The steps:

- the prompts (:func:`episode_prompts`): one per distinct training episode, each row of TRL's dataset carrying
  the prompt, the environment's ``reset`` arguments (TRL passes every column to ``reset``), the episode's gold
  (``episode_gold``, JSON) and its task; a prompt whose tokens plus ``max_completion_length`` exceed the model's
  context is left out and counted;
- the environment: the spec's factory, or TRL's dict of them (BFCL's: one class per environment name the rows' golds
  name, each TRL row routed by its ``environment`` column and shown its own class's tools);
- the trainer: TRL's tool-calling loop plays each rollout for at most ``max_turns`` rounds
  (``max_tool_calling_iterations``; None: EPISODE_MAX_TURNS); a tool that raises is answered with the error as the
  tool's message; the tool answers' tokens get no loss (TRL's ``tool_mask``). An episode of several user turns
  (BFCL's) is trained on its first user turn only: TRL's loop has no next user turn (``whileai.domain.episodes.bfcl``
  says why), where the held-out measure plays every turn (``_episode_play``);
- the reward (:func:`episode_reward`): 1.0 when the rollout's end state equals the gold calls replayed on a fresh
  environment and its final reply says what the task asks (``judge_episode``), else 0.0; where the environment's
  episode judges itself (BFCL's multi-turn check on the turn played), its verdict (``EpisodeJudge``). An
  environment's own ``get_reward``, which TRL would add beside it, is hidden (:func:`judge_only`);
- with ``turn_reward`` set, a second reward beside it (:func:`turn_reward`, named ``turn_first_action`` or
  ``turn_fine_grained``): the rollout's calls scored place by place against the gold calls
  (``whileai.domain.episodes.turn_scores``), weighted ``turn_reward_weight`` (TRL's ``reward_weights=[1.0, w]``),
  so TRL logs each reward's mean on its own and the sampled pass rate stays the episode judge's;
- with ``reward`` naming ``python:MODULE:FUNCTION`` rewards, those are paid in the judge's place (TRL calls each
  with the rollouts' messages and ``environments=``; ``reward_weights`` weigh them), and the sampled pass rate is the
  episode judge's verdicts on the same rollouts, never paid (``_rewards.tallied``).

TRL 1.16 gives one advantage per episode: the rewards are summed into the episode's one scalar, its group
normalises that, and every sampled token of the episode gets the same advantage. The per-turn scores shape that
scalar (an episode that got further scores higher among its group's failures); they are not per-turn advantages.

The HackMonitor watches sampled held-out episodes against the episode judge (``_episode_watch``); the summary's
``monitor`` says what it watched.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from whileai.core.spec import GRPOSpec
from whileai.jobs._episode_prompts import EPISODE_GOLD_COLUMN, episode_prompts, turn_cap
from whileai.jobs._training_fields import GRPOFit, StartFilterReport
from whileai.jobs.trainer_config import grpo_reward_weights

__all__ = ["EPISODE_JUDGE_KEY", "episode_reward", "turn_reward", "judge_only", "fit_episodes"]

#: TRL's log key of the episode judge's per-step mean (``rewards/<the function's name>/mean``): the sampled pass
#: rate where a per-turn reward is paid beside it.
EPISODE_JUDGE_KEY = "rewards/episode_judge/mean"


def judge_only(factory: Any) -> Any:
    """``factory``'s class with its own ``get_reward`` hidden, so TRL adds no reward beside the episode judge (TRL
    adds a class's ``get_reward`` as a reward of weight 1); its tools, state and ``reset`` are the class's own.
    TRL's dict of factories: each entry so."""
    if isinstance(factory, Mapping):
        return {name: judge_only(entry) for name, entry in factory.items()}
    if not isinstance(factory, type) or not callable(getattr(factory, "get_reward", None)):
        return factory
    return type(factory.__name__, (factory,), {"get_reward": None, "__module__": factory.__module__,
                                               "__doc__": factory.__doc__})


def _episode(prompt: Sequence[Mapping[str, Any]], completion: Sequence[Mapping[str, Any]], environment: Any) -> Any:
    """A TRL rollout as the episode judge reads it: the conversation, the environment's end state, the rounds."""
    from whileai.domain.episodes import Episode, end_state

    messages = [dict(m) for m in prompt] + [dict(m) for m in completion]
    rounds = sum(1 for m in completion if m.get("role") == "assistant" and m.get("tool_calls"))
    capped = messages[-1].get("role") == "assistant" and bool(messages[-1].get("tool_calls"))  # calls never run
    return Episode(messages=messages, end_state=end_state(environment), rounds=rounds - int(capped),
                   stopped="cap" if capped else "answered")


def episode_reward(factory: Any) -> Callable[..., list[float]]:
    """A TRL reward function: each rollout's episode verdict (1.0 pass, 0.0 fail): the environment's own where it
    judges itself, else against its gold replayed on a fresh environment from ``factory`` (TRL's dict: the gold's
    environment's entry; each task's replay kept, it never changes)."""
    from whileai.domain.episodes.judge import EpisodeJudge
    from whileai.domain.episodes.rows import episode_gold

    judge = EpisodeJudge(factory)

    def episode_judge(prompts: list[Any], completions: list[Any], environments: list[Any],
                      **columns: Any) -> list[float]:
        golds = columns[EPISODE_GOLD_COLUMN]
        return [1.0 if judge(_episode(prompt, completion, environment), environment, episode_gold(text),
                             prompt).passed else 0.0
                for prompt, completion, environment, text in zip(prompts, completions, environments, golds,
                                                                 strict=True)]

    return episode_judge


def turn_reward(judge: str) -> Callable[..., list[float]]:
    """A TRL reward function named ``turn_<judge>``: each rollout's per-turn score, the mean over max(calls made,
    gold calls) of its calls scored against the gold calls at their places by ``judge`` (``turn_scores``)."""
    from whileai.domain.episodes import turn_scores
    from whileai.domain.episodes.rows import episode_gold

    def turns(prompts: list[Any], completions: list[Any], **columns: Any) -> list[float]:
        golds = columns[EPISODE_GOLD_COLUMN]
        return [turn_scores(completion, episode_gold(text).calls, judge).mean
                for completion, text in zip(completions, golds, strict=True)]

    turns.__name__ = turns.__qualname__ = f"turn_{judge}"
    return turns


def _rewards(spec: GRPOSpec, factory: Any) -> list[Any]:
    """TRL's reward functions: the user's ``python:`` rewards where ``reward`` names them (in the judge's place), else
    the episode judge, then the per-turn score where ``turn_reward`` names one."""
    from whileai.jobs._episode_watch import user_rewards

    if user_rewards(spec):
        from whileai.jobs._rewards import reward_functions

        return reward_functions(spec, None, None, set())[0]  # python: rewards read no tokenizer, tools or stop ids
    return [episode_reward(factory), *([turn_reward(spec.turn_reward)] if spec.turn_reward else [])]


def paid_proxy(spec: GRPOSpec) -> Any:
    """What the policy is paid where the user's ``python:`` rewards are paid in the episode judge's place (their
    weighted sum, as the trainer sums them), else None: the held-out episodes are then scored by it too, so the run
    says whether that reward rose more than the judge's verdicts (``training["reward_vs_exact"]``)."""
    from whileai.jobs._episode_watch import user_rewards
    from whileai.jobs._rewards import proxy_reward, reward_functions

    if not user_rewards(spec):
        return None
    funcs, weights = reward_functions(spec, None, None, set())  # python: rewards read no tokenizer, tools or stop ids
    return proxy_reward(funcs, weights)


def _watched(spec: GRPOSpec, funcs: list[Any], factory: Any, holdout: list[dict[str, Any]] | None,
             run: Any) -> tuple[list[Any], Any, Any, str]:
    """``(the trainer's reward functions, the group watch, the monitor or None, what the summary says of it)``.

    The monitor's proxy is what the policy is paid (the rewards' weighted sum). Where the user's rewards are paid,
    the sampled pass rate is the episode judge's verdicts on the same rollouts, tallied beside the first reward."""
    from whileai.jobs._episode_watch import episode_monitor, user_rewards
    from whileai.jobs._grpo_watch import group_watch
    from whileai.jobs._rewards import proxy_reward, tallied

    weights = grpo_reward_weights(spec) or [1.0] * len(funcs)
    monitor, note = episode_monitor(spec, run, holdout, proxy_reward(funcs, weights), factory)
    if not user_rewards(spec):
        # the sampled pass rate is the episode judge's mean: TRL's reward itself, or its own column beside a per-turn one
        return funcs, group_watch(exact_key=EPISODE_JUDGE_KEY if spec.turn_reward else None), monitor, note
    tally: list[float] = []
    return [tallied(funcs[0], episode_reward(factory), tally), *funcs[1:]], group_watch(tally=tally), monitor, note


def _tools_by_prompt(factory: Any, prompts: list[dict[str, Any]]) -> list[list[Any]]:
    """The tools each prompt is shown, as TRL renders them: its environment's tool methods (TRL's dict: those of the
    class its environment column routes to), each class made once."""
    from whileai.domain.episodes import tool_methods
    from whileai.domain.episodes.protocol import route

    made: dict[int, list[Any]] = {}
    out = []
    for prompt in prompts:
        make, _ = route(factory, prompt)
        if id(make) not in made:
            made[id(make)] = tool_methods(make())
        out.append(made[id(make)])
    return out


def _fitting(tokenizer: Any, prompts: list[dict[str, Any]], tools: list[list[Any]], limit: int,
             reply_cap: int) -> tuple[list[dict[str, Any]], int]:
    """The prompts whose tokens (with their environment's tools, ``tools`` in the same order, and the generation
    prompt) plus ``reply_cap`` fit ``limit``, and how many were left out (counted, never cut)."""
    from whileai.domain.rows.context import prompt_length

    kept = [p for p, shown in zip(prompts, tools, strict=True)
            if prompt_length(tokenizer, p["prompt"], shown) + reply_cap <= limit]
    if not kept:
        raise ValueError(f"grpo has no episode to train on: each of the {len(prompts)} prompts plus "
                         f"max_completion_length={reply_cap} is longer than the model's context of {limit} tokens; "
                         "lower max_completion_length, or use a base with a longer context")
    return kept, len(prompts) - len(kept)


def _config(spec: GRPOSpec, folder: Path, per_rank: int, micro: int) -> Any:
    """TRL's ``GRPOConfig``: the shared trainer settings, the batch shape, the turn cap, and the rewards' weights
    (the episode judge's 1.0 and ``turn_reward_weight``, with a per-turn reward; else TRL's one weight)."""
    from trl import GRPOConfig

    from whileai.jobs import _trainer_setup

    settings = _trainer_setup.trainer_settings(spec, folder)  # reward_weights: trainer_config.grpo_reward_weights
    return GRPOConfig(**settings,
                      per_device_train_batch_size=spec.generations * micro,
                      gradient_accumulation_steps=per_rank // micro,
                      max_tool_calling_iterations=turn_cap(spec), log_completions=False)


def _reward_names(spec: GRPOSpec) -> list[str]:
    """What the summary says was paid: the user's ``python:`` rewards, or the episode judge and the per-turn score's
    reward function if asked."""
    from whileai.jobs._episode_watch import user_rewards

    if user_rewards(spec):
        return list(spec.reward)
    return ["episode", *([f"turn_{spec.turn_reward}"] if spec.turn_reward else [])]


def _trainer(spec: GRPOSpec, model: Any, tokenizer: Any, args: Any, prompts: list[dict[str, Any]],
             factory: Any, callbacks: list[Any], funcs: list[Any]) -> Any:
    """TRL's ``GRPOTrainer`` over the episodes, paid by ``funcs`` (:func:`_rewards`, as :func:`_watched` hands
    them on)."""
    import os
    import warnings

    from trl import GRPOTrainer

    from whileai.domain.export import to_hf_dataset
    from whileai.jobs import _loading

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL 1.x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return GRPOTrainer(model=model, reward_funcs=cast(Any, funcs), args=args,
                           train_dataset=to_hf_dataset(prompts), processing_class=tokenizer,
                           peft_config=_loading.peft_config(model, spec), environment_factory=judge_only(factory),
                           callbacks=callbacks)


def _chosen_by_start(spec: GRPOSpec, model: Any, tokenizer: Any, factory: Any, prompts: list[dict[str, Any]],
                     funcs: list[Any], run: Any) -> tuple[list[dict[str, Any]], StartFilterReport | None]:
    """The prompts GRPO trains on: with ``prompt_filter_pool``, those whose episodes sampled from the start were not
    all paid the same by ``funcs`` weighted as the trainer weighs them (``_start_filter``), and what it played;
    else every prompt, and None."""
    from whileai.jobs._rewards import proxy_reward
    from whileai.jobs._start_filter import start_filtered

    if spec.prompt_filter_pool is None:
        return prompts, None
    weights = grpo_reward_weights(spec) or [1.0] * len(funcs)
    note = (lambda phase: run.note(phase=phase)) if run is not None else None
    chosen = start_filtered(spec, model, tokenizer, factory, prompts, proxy_reward(funcs, weights), note=note)
    if note is not None:
        note("training")  # the sampling's last progress is not what the job does from here
    return chosen


def fit_episodes(spec: GRPOSpec, model: Any, tokenizer: Any, rows: list[dict[str, Any]], folder: Path,
                 callbacks: list[Any], run: Any = None,
                 holdout: list[dict[str, Any]] | None = None) -> tuple[Any, GRPOFit]:
    """GRPO over ``rows``' episodes in ``spec.environment`` (see the module), watched on ``holdout``'s episodes;
    returns the trained model and what the run's training summary adds."""
    from whileai.jobs import _loading, _trainer_setup
    from whileai.jobs._episode_play import factory_of, routed
    from whileai.jobs._grpo_batch import batch_shape

    factory = factory_of(str(spec.environment), rows)
    every = episode_prompts(rows, routed=routed(factory))
    shown = _tools_by_prompt(factory, every)
    prompts, too_long = _fitting(tokenizer, every, shown, _loading.max_length(model, episodes=True),
                                 spec.max_completion_length)
    _trainer_setup.ensure_response_parser(tokenizer)
    paid = _rewards(spec, factory)
    prompts, chosen_by = _chosen_by_start(spec, model, tokenizer, factory, prompts, paid, run)
    per_step, per_rank, micro = batch_shape(spec, len(prompts))
    funcs, watch, monitor, monitor_note = _watched(spec, paid, factory, holdout, run)
    trainer = _trainer(spec, model, tokenizer, _config(spec, folder, per_rank, micro), prompts, factory,
                       [watch, *callbacks, *([monitor] if monitor is not None else [])], funcs)
    _trainer_setup.fit_trainer(trainer)
    tools = list(dict.fromkeys(t.__name__ for methods in shown for t in methods))  # every environment's, first seen first
    extra: GRPOFit = {"rows": len(prompts), "prompts": len(prompts), "left_out_too_long": too_long,
                      "trainer_received": int(getattr(trainer.train_dataset, "num_rows", -1)), "unit": "episodes",
                      "steps": trainer.state.global_step, "tools": tools,
                      "environment": str(spec.environment), "max_turns": turn_cap(spec), "generations": spec.generations,
                      "prompts_per_step": per_step, "reward": _reward_names(spec),
                      "reward_weights": grpo_reward_weights(spec), **watch.summary(), "monitor": monitor_note}  # the monitor notes its own summary on the run
    if chosen_by is not None:
        extra["start_filter"] = chosen_by
    if run is not None and extra.get("groups_note"):
        run.note(grpo_groups=extra["groups_note"])
    return trainer.model, extra
