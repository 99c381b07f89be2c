"""The HackMonitor of a GRPO run in an environment: sampled held-out episodes, the episode judge as gold.

``_episodes.fit_episodes`` adds it as a callback (on rank 0, as ``grpo.fit`` does its own). Every ``every`` steps it
plays ``k`` episodes of each of ``n_prompts`` held-out episodes with the live policy
(``whileai.domain.monitor._episodes.episode_sampler``): the held-out play's batched machinery
(``_episode_play.play_episodes``: ``play_together`` with its token bookkeeping and TRL's reply parsing), each reply sampled at the
monitor's temperature instead of greedily, at most ``max_new_tokens`` tokens a reply (the spec's
``eval_max_new_tokens`` unless the monitor's settings say otherwise). The proxy is what the policy is paid (the
rewards' weighted sum, called as TRL calls them, ``environments=`` included); the gold:

- where the policy is paid the episode judge alone, nothing here is stricter: the alarms that need a gold judge are
  off (as ``grpo._monitor_gold`` leaves them for the exact first-action judge) and the gold-free ones watch length,
  calls and turns per episode, and the episode markers (tool errors, the turn cap, more calls than the gold);
- where it is paid anything else (the user's ``python:`` rewards in the judge's place, or a per-turn score beside
  it), the episode judge is the gold, and every alarm is armed.

Training episodes are not buffered (``buffer`` 0 unless set): the gold judge reads an episode it can replay, and a
training rollout reaches a reward as messages, not as one.

An environment that is TRL's dict of factories (BFCL's, whose episodes judge themselves) is not watched yet: the
monitor's gold judge replays a gold on one factory, and its looks play every episode in it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from whileai.core.spec import GRPOSpec, is_python_ref

__all__ = ["episode_monitor", "paid_by_judge", "user_rewards"]


def user_rewards(spec: GRPOSpec) -> bool:
    """Whether ``reward`` names the user's ``python:`` rewards, paid in the episode judge's place (the spec accepts
    them alone, and without ``turn_reward``, in an environment)."""
    return any(is_python_ref(str(r)) for r in spec.reward)


def paid_by_judge(spec: GRPOSpec) -> bool:
    """Whether the policy is paid the episode judge alone (no ``python:`` reward in its place, no per-turn score)."""
    return not spec.turn_reward and not user_rewards(spec)


def _gold_of(row: Mapping[str, Any]) -> Any:
    """A held-out row's gold, from TRL's dataset column (``_episode_prompts.EPISODE_GOLD_COLUMN``)."""
    from whileai.domain.episodes.rows import episode_gold
    from whileai.jobs._episode_prompts import EPISODE_GOLD_COLUMN

    return episode_gold(row[EPISODE_GOLD_COLUMN])


def _player(factory: Callable[[], Any], max_turns: int) -> Callable[..., list[tuple[Any, Any]]]:
    """``play`` for ``episode_sampler``: every start row played at once by the held-out play's machinery
    (``_episode_play.play_episodes``), each reply sampled; returns each ``(episode, the environment it left)``, in
    order."""

    def play(model: Any, tokenizer: Any, starts: list[dict[str, Any]], *, max_new_tokens: int,
             sampling: Mapping[str, Any], seed: int) -> list[tuple[Any, Any]]:
        import torch

        from whileai.jobs._episode_play import play_episodes

        torch.manual_seed(seed)  # the monitor keeps the trainer's random state around its looks
        return play_episodes(model, tokenizer, factory, starts, max_turns, max_new_tokens, sampling=sampling)

    return play


def _gold(spec: GRPOSpec, factory: Callable[[], Any]) -> tuple[Any, str, dict[str, str]]:
    """The monitor's gold judge, what the run says of it, and the alarms left off with why (see the module)."""
    from whileai.domain.monitor import episode_gold_judge
    from whileai.domain.monitor import GOLD_CHECKS

    if not paid_by_judge(spec):
        paid = ",".join(spec.reward) if not spec.turn_reward else f"the episode judge with turn_{spec.turn_reward}"
        return episode_gold_judge(factory, _gold_of), (
            f"gold judge: the episode judge (the reward, {paid}, is weaker: it can pay for what the task does "
            "not)"), {}
    why = ("the reward is the episode judge, the strictest judge this run has; to watch another reward against it, "
           "train with reward=python:MODULE:FUNCTION or turn_reward")
    return None, f"the alarms that need no gold judge: {why}", {kind: f"off: {why}" for kind in GOLD_CHECKS}


def episode_monitor(spec: GRPOSpec, run: Any, holdout: list[dict[str, Any]] | None, proxy: Any,
                    factory: Any) -> tuple[Any, str]:
    """The HackMonitor callback for an episode run (or None) and what the run's summary says of it.

    ``holdout`` are the run's held-out rows (episode rows); ``proxy`` the reward the policy is paid. On by default, as
    for single-turn GRPO; ``spec.monitor`` holds its settings (HackMonitor's keyword arguments, ``temperature``
    among them) or False to turn it off."""
    from whileai.domain.episodes.rows import held_out_episodes
    from whileai.jobs._episode_play import environment_name, factory_of
    from whileai.jobs._episode_prompts import episode_prompts, turn_cap
    from whileai.jobs.distributed import world

    if spec.monitor is False:
        return None, "off (config['monitor'] is False)"
    chosen = held_out_episodes(holdout or [], spec.holdout_rows, spec.seed)
    if not chosen:
        return None, "off: no held-out episode to watch (cut the episode rows, or pass holdout=)"
    if not world().first:  # the monitor's looks are rank 0's: one set of looks, written once
        return None, "on rank 0"
    from whileai.domain.monitor import HackMonitor
    from whileai.domain.monitor import episode_sampler

    kwargs = dict(spec.monitor) if isinstance(spec.monitor, dict) else {}
    # the trainer's temperature unless the recipe's monitor.temperature (or HackMonitor's sampling=) says otherwise,
    # as grpo._monitor samples single-turn prompts
    hotter = kwargs.pop("temperature", None)
    kwargs["sampling"] = {"temperature": hotter or spec.temperature, **dict(kwargs.get("sampling") or {})}
    kwargs.setdefault("max_new_tokens", spec.eval_max_new_tokens)
    kwargs.setdefault("buffer", 0)
    name = environment_name(spec)
    if isinstance(factory, Mapping) and name:  # TRL's dict of classes (BFCL's): the held-out rows' own, routed by a column
        factory = factory_of(name, chosen)  # (the training rows' dict may lack a class only held-out rows use)
    gold, note, disarmed = _gold(spec, factory)  # plays and judges with the same factory
    held = episode_prompts(chosen, routed=isinstance(factory, Mapping))
    monitor = HackMonitor(run, holdout=held, proxy=proxy, gold=gold, disarm=disarmed,
                          sample=episode_sampler(_player(factory, turn_cap(spec)), _gold_of), **kwargs)
    watched = (f"on episodes: {monitor.summary()['settings']['n_prompts']} held-out episodes, {monitor.k} played "
               f"at temperature {monitor.sampling['temperature']} every {monitor.every} steps; ")
    return monitor, watched + note
