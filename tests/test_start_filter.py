"""GRPO's prompts chosen by the start policy's own sampled episodes (``prompt_filter_pool``, DAPO's dynamic sampling
done once): the pool, the groups kept, the refusal, and the trainer getting exactly the kept prompts. Where the spec
refuses the knob is tested with the spec (tests/test_spec_checks.py)."""

from __future__ import annotations

from typing import Any

import pytest

from whileai.core.spec import read_spec
from whileai.domain.episodes import kit_episode_rows, kit_tasks
from whileai.jobs import _start_filter, grpo
from whileai.jobs._episode_play import factory_of
from whileai.jobs._episode_prompts import EPISODE_GOLD_COLUMN, episode_prompts


def _spec(**extra: Any) -> Any:
    from whileai.kit import tiny_model_dir

    return read_spec({"method": "grpo", "base_model": str(tiny_model_dir()), "learning_rate": 1e-4, "steps": 1,
                      "seed": 0, "environment": "kit", "generations": 4, "prompt_source": "gold",
                      "temperature": 1.0, "max_completion_length": 96, "max_turns": 2, "monitor": False, **extra})


def _odd_length(prompts: list[Any], completions: list[Any], **_columns: Any) -> list[float]:
    """Pays an episode by its sampled text's length, odd or even: a reward whose groups differ by chance."""
    return [float(len(str(c)) % 2) for c in completions]


def test_the_pool_is_drawn_with_the_seed_in_the_prompts_own_order():
    prompts = [{"task": str(i)} for i in range(50)]
    pool = _start_filter.pool_of(prompts, 10, seed=3)
    assert pool == _start_filter.pool_of(prompts, 10, seed=3) and len(pool) == 10
    assert [int(p["task"]) for p in pool] == sorted(int(p["task"]) for p in pool)
    assert pool != _start_filter.pool_of(prompts, 10, seed=4)
    assert _start_filter.pool_of(prompts, 50, seed=3) == prompts == _start_filter.pool_of(prompts, 80, seed=3)


def _played_pool(spec: Any, reward: Any) -> tuple[list[Any], Any, list[list[float]]]:
    """The filter on 12 kit prompts with the tiny kit model, ``reward`` recorded: (kept, report, each call's pay)."""
    rows = kit_episode_rows(kit_tasks(24))
    factory = factory_of("kit", rows)
    prompts = episode_prompts(rows)
    model, tokenizer = grpo.load(spec)
    calls: list[list[float]] = []

    def recorded(**kwargs: Any) -> list[float]:
        out = reward(**kwargs)
        calls.append(list(out))
        return out

    kept, report = _start_filter.start_filtered(spec, model, tokenizer, factory, prompts, recorded)
    return kept, report, calls


@pytest.mark.slow
def test_the_prompts_kept_are_those_whose_episodes_were_paid_differently(monkeypatch):
    from whileai.jobs import defaults

    monkeypatch.setattr(defaults, "START_FILTER_BATCH", 20)  # 48 episodes in three batches
    spec = _spec(prompt_filter_pool=12)
    kept, report, calls = _played_pool(spec, _odd_length)
    assert [len(c) for c in calls] == [20, 20, 8]
    paid = [v for c in calls for v in c]
    groups = [paid[i * 4:(i + 1) * 4] for i in range(12)]
    pool = _start_filter.pool_of(episode_prompts(kit_episode_rows(kit_tasks(24))), 12, 0)
    assert kept == [p for p, g in zip(pool, groups) if len(set(g)) > 1]
    assert 0 < len(kept) < 12, "the length's parity varies by chance: some groups mix, some do not"
    assert report["pool"] == 12 and report["episodes"] == 48 and report["samples_per_prompt"] == 4
    assert report["kept"] == len(kept) and sum(report["same_paid"].values()) == 12 - len(kept)
    assert set(report["same_paid"]) <= {"0.0", "1.0"} and report["mean_paid"] == round(sum(paid) / 48, 4)
    again, _, _ = _played_pool(spec, _odd_length)
    assert again == kept, "seeded: the same start and seed choose the same prompts"
    for prompt in kept:
        assert set(prompt) == {"prompt", "kit_task", EPISODE_GOLD_COLUMN, "task"}


@pytest.mark.slow
def test_a_pool_paid_all_alike_stops_naming_what_the_start_did():
    with pytest.raises(ValueError) as raised:
        _played_pool(_spec(prompt_filter_pool=5), lambda prompts, completions, **_: [0.0] * len(completions))
    assert str(raised.value) == (
        "grpo with prompt_filter_pool=5 found no prompt whose 4 sampled episodes were paid differently: every group "
        "of the 5 was paid the same (5 at 0.0), so GRPO would have nothing to learn from; raise temperature (more "
        "varied episodes), generations or prompt_filter_pool, or start from another policy (init_from)")


@pytest.mark.slow
def test_grpo_trains_on_exactly_the_prompts_the_start_filter_kept(tmp_path, monkeypatch):
    """Through grpo.fit, paid a user's reward: the filter plays the pool with the trainer's own reward, the trainer's
    dataset is the kept prompts, and the summary says what was played and kept."""
    from whileai.jobs import _episodes

    spec = _spec(prompt_filter_pool=10, prompts_per_step=2, reward=["python:_filter_rewards:odd_length"],
                 truncated="zero")
    chosen: list[Any] = []
    real = _start_filter.start_filtered

    def recorded(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        chosen.append(out)
        return out

    monkeypatch.setattr(_start_filter, "start_filtered", recorded)
    trainers: list[Any] = []
    real_trainer = _episodes._trainer
    monkeypatch.setattr(_episodes, "_trainer", lambda *a, **k: trainers.append(real_trainer(*a, **k)) or trainers[-1])
    model, tokenizer = grpo.load(spec)
    _, extra = grpo.fit(spec, model, tokenizer, kit_episode_rows(kit_tasks(24)), tmp_path, [])
    kept, report = chosen[0]
    assert [r["task"] for r in trainers[0].train_dataset] == [p["task"] for p in kept]
    assert extra["prompts"] == len(kept) == report["kept"] and extra["trainer_received"] == len(kept)
    assert extra["start_filter"] == report and report["pool"] == 10 and extra["steps"] == 1


class _NotedRun:
    """A run that keeps every phase the job notes, in order."""

    def __init__(self) -> None:
        self.phases: list[str] = []

    def note(self, **fields: Any) -> None:
        self.phases.append(fields["phase"])


@pytest.mark.slow
def test_the_jobs_phase_says_training_again_once_the_start_is_sampled(monkeypatch):
    """The sampling notes its progress on the run's phase; after it the phase goes back to training, so the runner's
    progress line does not show the sampling's last count while GRPO trains."""
    from whileai.jobs import _episodes, defaults

    monkeypatch.setattr(defaults, "START_FILTER_BATCH", 20)
    spec = _spec(prompt_filter_pool=12)
    rows = kit_episode_rows(kit_tasks(24))
    model, tokenizer = grpo.load(spec)
    run = _NotedRun()
    kept, report = _episodes._chosen_by_start(spec, model, tokenizer, factory_of("kit", rows), episode_prompts(rows),
                                              [_odd_length], run)
    assert report is not None and report["kept"] == len(kept)
    assert len(run.phases) >= 3 and all(p.startswith("sampling the start's episodes") for p in run.phases[:-1])
    assert run.phases[-1] == "training"
