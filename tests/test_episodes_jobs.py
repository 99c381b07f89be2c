"""The jobs over episodes: SFT clones the gold episodes with the loss on the assistant turns only; GRPO rolls each
prompt out in the environment with TRL's own loop, the episode judge its only reward, and trains on exactly the
tokens the policy sampled, turn after turn, never on a tool's answer (whileai/jobs/_episodes.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from whileai.core.spec import read_spec
from whileai.domain.episodes import KitEnvironment, episode_gold, kit_episode_rows, kit_tasks
from whileai.domain.episodes.kit import KIT_KINDS
from whileai.jobs import _episode_prompts, _episodes


def _rows(n: int = 60) -> list[dict[str, Any]]:
    tasks = kit_tasks(n)
    return kit_episode_rows([next(t for t in tasks if t.kind == kind) for kind in KIT_KINDS])


def _trl_turns(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The row's gold completion as TRL's loop writes it: parsed calls (arguments a dict), tool messages by name."""
    out = []
    for message in row["messages"][1:]:
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls = [{"type": "function", "function": {"name": c["function"]["name"],
                                                       "arguments": json.loads(c["function"]["arguments"])}}
                     for c in message["tool_calls"]]
            out.append({"role": "assistant", "content": "", "tool_calls": calls})
        elif message["role"] == "tool":
            out.append({"role": "tool", "name": message["name"], "content": message["content"]})
        else:
            out.append(dict(message))
    return out


def _played(row: dict[str, Any], turns: list[dict[str, Any]]) -> KitEnvironment:
    """An environment the completion's calls were run in, as TRL's loop runs them."""
    env = KitEnvironment()
    env.reset(**episode_gold(row).reset)
    for message in turns:
        for call in message.get("tool_calls") or []:
            try:
                getattr(env, call["function"]["name"])(**call["function"]["arguments"])
            except ValueError:
                pass
    return env


def test_the_prompts_carry_the_reset_columns_and_the_gold_once_per_episode():
    rows = _rows()
    prompts = _episode_prompts.episode_prompts(rows + rows)
    assert len(prompts) == len(rows)
    assert set(prompts[0]) == {"prompt", "kit_task", _episode_prompts.EPISODE_GOLD_COLUMN, "task"}
    assert prompts[0]["prompt"] == [rows[0]["messages"][0]] and prompts[0]["task"] == rows[0]["task_id"]
    with pytest.raises(ValueError, match="no episode row among 1 rows"):
        _episode_prompts.episode_prompts([{"messages": [{"role": "user", "content": "x"}]}])


def test_the_reward_is_the_episode_verdict_state_and_reply():
    reward = _episodes.episode_reward(KitEnvironment)
    rows = _rows()
    prompts, completions, envs, golds, want = [], [], [], [], []
    for row in rows:
        turns = _trl_turns(row)
        gold = episode_gold(row)
        wrong = turns[:-1] + [{"role": "assistant", "content": "All set."}]  # the state right, the reply silent
        stopped = turns[:2]  # one call made and answered, then nothing
        for completion, passed in ((turns, 1.0), (wrong, 0.0 if gold.responses else 1.0), (stopped, 0.0)):
            prompts.append([row["messages"][0]])
            completions.append(completion)
            envs.append(_played(row, completion))
            golds.append(gold.to_json())
            want.append(passed)
    assert reward(prompts=prompts, completions=completions, environments=envs,
                  **{_episode_prompts.EPISODE_GOLD_COLUMN: golds, "trainer_state": None}) == want


def test_only_the_judge_pays_the_environments_own_reward_is_hidden():
    hidden = _episodes.judge_only(KitEnvironment)
    assert issubclass(hidden, KitEnvironment) and hidden.get_reward is None
    assert _episodes.judge_only(hidden) is hidden and _episodes.judge_only(lambda: KitEnvironment()) is not None
    assert _episode_prompts.turn_cap(read_spec({"method": "grpo", "environment": "kit", "max_turns": 3})) == 3


def _spec(method: str, **extra: Any) -> Any:
    from whileai.kit import tiny_model_dir

    return read_spec({"method": method, "base_model": str(tiny_model_dir()), "learning_rate": 1e-4, "steps": 1,
                      "seed": 0, "environment": "kit", **extra})


@pytest.mark.slow
def test_sft_on_an_episode_trains_its_assistant_turns_and_no_tool_answer(tmp_path, monkeypatch):
    """Every token SFT's trainer has a label for lies in an assistant turn ({% generation %} in the kit template),
    and every assistant token has one; the tool answers' tokens have none."""
    from whileai.jobs import _trainer_setup, sft

    seen: dict[str, Any] = {}
    monkeypatch.setattr(_trainer_setup, "fit_trainer", lambda trainer: seen.setdefault("trainer", trainer))
    spec = _spec("sft", batch_size=1)
    model, tokenizer = sft.load(spec)
    row = next(r for r in _rows() if r["category"] == "merge")
    sft.fit(spec, model, tokenizer, [row], tmp_path, [])
    example = seen["trainer"].train_dataset[0]
    ids, labels = example["input_ids"], example["labels"]
    rendered = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True, return_dict=True,
                                             return_assistant_tokens_mask=True)
    assert ids == rendered["input_ids"]
    assert [label != -100 for label in labels] == [bool(m) for m in rendered["assistant_masks"]]
    trained = tokenizer.decode([t for t, label in zip(ids, labels) if label != -100])
    assert "<tool_response>" not in trained and "moved " not in trained and trained.count("<tool_call>") == 4
    opened = tokenizer.convert_tokens_to_ids("<tool_response>")
    closed = tokenizer.convert_tokens_to_ids("</tool_response>")
    inside, spans = False, 0
    for token, label in zip(ids, labels):  # each tool answer, its tags included, is read and never trained
        inside, spans = inside or token == opened, spans + (token == opened)
        assert not (inside and label != -100)
        inside = inside and token != closed
    assert spans == 4


def _script_first_turn(monkeypatch: Any, tokenizer: Any, text: str) -> list[tuple[list[int], list[int]]]:
    """Make the first turn of every rollout ``text`` (as ids), sample the later turns with the model as TRL does,
    and record every (input ids, sampled ids) pair the trainer got back."""
    from trl import GRPOTrainer

    real = GRPOTrainer._generate_single_turn
    scripted = tokenizer(text, add_special_tokens=False)["input_ids"]
    call = tokenizer.convert_tokens_to_ids("<tool_call>")
    sampled: list[tuple[list[int], list[int]]] = []

    def turn(self: Any, prompt_ids: list[list[int]], *args: Any, **kwargs: Any) -> Any:
        if any(call in ids for ids in prompt_ids):  # a later turn: the model samples it
            out, logprobs = real(self, prompt_ids, *args, **kwargs)
        else:
            out, logprobs = [list(scripted) for _ in prompt_ids], None
        sampled.extend((list(p), list(o)) for p, o in zip(prompt_ids, out, strict=True))
        return out, logprobs

    monkeypatch.setattr(GRPOTrainer, "_generate_single_turn", turn)
    return sampled


def _capture(monkeypatch: Any, owner: Any, name: str, into: list[Any], result: bool = True) -> None:
    real = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        into.append(out if result else (args, kwargs))
        return out

    monkeypatch.setattr(owner, name, wrapped)


@pytest.mark.slow
def test_grpo_trains_the_tokens_sampled_each_turn_and_a_raising_tool_is_the_models_to_read(tmp_path, monkeypatch):
    """A real GRPOTrainer step in the kit environment through grpo.fit: each rollout's first turn calls a tool that
    raises, the tool's error comes back as its message, the model samples the next turn; the completion ids the loss
    reads where TRL's tool_mask is 1 are exactly the ids sampled in each turn, and the tool answers are mask 0."""
    from trl import GRPOTrainer

    from whileai.jobs import _episode_play, grpo

    # truncated=zero: an untrained model's later turn runs to the cap, and "mask" would hide the whole rollout
    spec = _spec("grpo", generations=2, prompts_per_step=2, max_completion_length=160, prompt_source="gold",
                 max_turns=2, monitor=False, truncated="zero")
    model, tokenizer = grpo.load(spec)
    sampled = _script_first_turn(monkeypatch, tokenizer, '<tool_call>{"name": "get_balance", "arguments": '
                                 '{"account": "nobody"}}</tool_call><|im_end|>')
    batches: list[Any] = []
    _capture(monkeypatch, GRPOTrainer, "_generate_and_score_completions", batches)
    scored: list[Any] = []
    real_reward = _episodes.episode_reward

    def recording_reward(factory: Any) -> Any:
        judge = real_reward(factory)

        def episode_judge(**kwargs: Any) -> Any:
            scored.append(kwargs)
            return judge(**kwargs)
        return episode_judge

    monkeypatch.setattr(_episodes, "episode_reward", recording_reward)
    trainers: list[Any] = []
    _capture(monkeypatch, _episodes, "_trainer", trainers)
    _, extra = grpo.fit(spec, model, tokenizer, _rows(), tmp_path, [])
    assert trainers[0].reward_func_names == ["episode_judge"], "the judge alone: get_reward is not added beside it"
    assert extra["steps"] == 1 and extra["unit"] == "episodes" and extra["reward"] == ["episode"]
    completions = [c for call in scored for c in call["completions"]]
    first_tool = [c[1] for c in completions]
    assert all(m["role"] == "tool" and m["content"].startswith("{'error': \"no account named 'nobody'")
               for m in first_tool), "the raising tool is answered with its error"
    batch = batches[0]
    for i in range(batch["completion_ids"].size(0)):
        prompt = batch["prompt_ids"][i][batch["prompt_mask"][i].bool()].tolist()
        length = int(batch["completion_mask"][i].sum())
        assert length > 0
        completion = batch["completion_ids"][i][:length].tolist()
        mask = batch["tool_mask"][i][:length].tolist()
        full, covered = prompt + completion, [0] * length
        for given, out in sampled:  # a turn's sampled ids, or their prefix where the budget cut the last turn
            kept = full[len(given): len(given) + len(out)]
            if len(given) >= len(prompt) and full[: len(given)] == given and kept == out[: len(kept)] \
                    and (len(kept) == len(out) or len(given) + len(kept) == len(full)):
                for k in range(len(given) - len(prompt), len(given) - len(prompt) + len(kept)):
                    covered[k] = 1
        assert mask == covered, "the tokens TRL trains on are the tokens sampled, turn by turn"
        assert sum(1 for a, b in zip(mask, mask[1:]) if a != b) >= 2, "a tool answer between two sampled turns"
        tool_tokens = [t for t, m in zip(completion, mask) if not m]
        tool_messages = [m for m in completions[i] if m["role"] == "tool"]
        assert tool_tokens == _episode_play.tool_suffix_ids(tokenizer, tool_messages)


@pytest.mark.slow
def test_grpo_with_a_per_turn_reward_pays_both_and_the_sampled_pass_rate_stays_the_judges(tmp_path, monkeypatch):
    """turn_reward=fine_grained: TRL gets the episode judge and the per-turn score with reward_weights [1.0, w] and
    logs each reward's mean; the paid reward is their weighted sum, and the sampled pass rate is the episode judge's
    own mean over the step's rollouts, not that sum."""
    from transformers import TrainerCallback

    from whileai.jobs import grpo

    spec = _spec("grpo", generations=2, prompts_per_step=2, max_completion_length=96, prompt_source="gold",
                 max_turns=1, monitor=False, truncated="zero", turn_reward="fine_grained", turn_reward_weight=0.25)
    model, tokenizer = grpo.load(spec)
    # every rollout's first call reads alice's balance: a tool the gold calls, so the per-turn score is above 0
    _script_first_turn(monkeypatch, tokenizer, '<tool_call>{"name": "get_balance", "arguments": '
                       '{"account": "alice"}}</tool_call><|im_end|>')
    verdicts: list[float] = []
    real_reward = _episodes.episode_reward

    def recording_reward(factory: Any) -> Any:
        judge = real_reward(factory)

        def episode_judge(**kwargs: Any) -> Any:
            out = judge(**kwargs)
            verdicts.extend(out)
            return out
        return episode_judge

    monkeypatch.setattr(_episodes, "episode_reward", recording_reward)
    trainers: list[Any] = []
    _capture(monkeypatch, _episodes, "_trainer", trainers)
    points: list[dict[str, Any]] = []

    class Points(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
            points.append(dict(logs or {}))

    _, extra = grpo.fit(spec, model, tokenizer, _rows(), tmp_path, [Points()])
    trainer = trainers[0]
    assert trainer.reward_func_names == ["episode_judge", "turn_fine_grained"]
    assert trainer.reward_weights.tolist() == [1.0, 0.25] and trainer.args.reward_weights == [1.0, 0.25]
    assert extra["steps"] == 1 and extra["reward"] == ["episode", "turn_fine_grained"]
    assert extra["reward_weights"] == [1.0, 0.25]
    step = next(p for p in points if "reward" in p)
    judge, turns = step["rewards/episode_judge/mean"], step["rewards/turn_fine_grained/mean"]
    assert turns > 0 and step["reward"] == pytest.approx(judge + 0.25 * turns)
    assert step["sampled_pass_rate"] == judge == pytest.approx(sum(verdicts) / len(verdicts))
    assert step["sampled_reward"] == step["reward"] != step["sampled_pass_rate"]
    assert extra["sampled_pass_rate"]["mean"] == round(judge, 3)
