"""The reward-model judge: a finished reward model's adapter scoring rollout rows, and the shapes it reads.

``reward_text_messages`` and ``reward_pair_example`` are what the rm job trains on; ``RewardModelJudge`` scores a
row the same way (``score_token_batches``, shared with the job's threshold search). ``wai.reward_model(run)``
(whileai/simulations/serving.py) finds a finished run's adapter on the platform and returns this judge.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from typing import Any, TypedDict

from whileai.core.spec import RMSpec, knob_of
from whileai.domain import defaults
from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults

__all__ = ["RewardModelJudge", "RewardModelVerdict", "load_reward_model", "reward_pair_example", "reward_text_messages", "score_token_batches"]

#: What a reward model reads of a row (config ``reward_span``): the whole conversation, or the prompt and
#: the first assistant turn only (what the first-action judge decides on, and all a GRPO completion is); its choices
#: and default are the knob's declaration (``RMSpec.reward_span``).
REWARD_SPANS: tuple[str, ...] = tuple(knob_of(RMSpec, "reward_span").choices or ())
REWARD_SPAN_DEFAULT: str = knob_of(RMSpec, "reward_span").default


def near_miss_problem(near_misses: Any, span: Any) -> str | None:
    """Why ``near_misses`` cannot run with reward span ``span`` (config ``reward_span``), or None when it can."""
    if not near_misses or str(span or REWARD_SPAN_DEFAULT) == "first_action":
        return None
    return (f"near_misses={near_misses} needs reward_span='first_action' (reward_span={str(span or REWARD_SPAN_DEFAULT)!r}): "
            "a near miss changes the first action, so the tool response and reply after it would no longer follow "
            "from it; pass reward_span=first_action, or near_misses=0")


def reward_text_messages(row: Mapping[str, Any], span: str = REWARD_SPAN_DEFAULT) -> list[dict[str, Any]]:
    """A row's messages as the reward model read them in training: tool-call arguments as dicts.

    ``span="first_action"`` ends them at the first assistant turn (the prompt and the first action).
    """
    if span not in REWARD_SPANS:
        raise ValueError(f"span={span!r} is not a reward span; pass one of {', '.join(map(repr, REWARD_SPANS))}")
    messages = list(row.get("messages") or [])
    if span == "first_action":
        first = next((i for i, m in enumerate(messages) if isinstance(m, Mapping) and m.get("role") == "assistant"),
                     len(messages) - 1)
        messages = messages[: first + 1]
    out = []
    for msg in messages:
        msg = dict(msg)
        if msg.get("tool_calls"):
            calls = []
            for call in msg["tool_calls"]:
                call = dict(call)
                fn = dict(call.get("function") or {})
                args = fn.get("arguments")
                if isinstance(args, str):
                    try:
                        decoded = json.loads(args)
                    except ValueError:
                        decoded = None
                    if isinstance(decoded, dict):
                        fn["arguments"] = decoded
                call["function"] = fn
                calls.append(call)
            msg["tool_calls"] = calls
        out.append(msg)
    return out


def reward_pair_example(pair: Mapping[str, Any], span: str = REWARD_SPAN_DEFAULT) -> dict[str, Any]:
    """A pass-vs-fail pair as the reward trainer reads it: ``{"chosen", "rejected", "tools"}``, each side's messages
    as ``reward_text_messages`` renders them (TRL's implicit prompt)."""
    chosen, rejected = pair["chosen"], pair["rejected"]
    return {"chosen": reward_text_messages(chosen, span), "rejected": reward_text_messages(rejected, span),
            "tools": chosen.get("tools") or rejected.get("tools") or []}


class RewardModelVerdict(TypedDict):
    """A reward-model judge's answer on one row: the model's score and whether it reaches the run's threshold."""

    reward: float
    passed: bool


class RewardModelJudge:
    """A judge backed by a reward-model adapter: ``judge(row) -> {"reward": score, "passed": bool}``.

    The score is the sequence-classification head's output over the chat
    template of the row (its ``tools`` included) as the model was trained to read
    it: the whole conversation, or up to the first action (``span``, the run's
    ``reward_span``); ``passed`` is ``score >= threshold``. The
    model loads on the first call, once, and is shared by every thread.
    ``score(rows)`` scores many rows in batches of REWARD_MODEL_BATCH_SIZE.
    """

    def __init__(self, adapter: str, base_model: str, threshold: float, run_id: str | None = None,
                 span: str = REWARD_SPAN_DEFAULT):
        self.adapter, self.base_model, self.threshold, self.run_id = adapter, base_model, threshold, run_id
        self.span = span
        self.__name__ = f"reward_model({run_id or adapter})"
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None

    def __repr__(self) -> str:
        return f"<RewardModelJudge {self.run_id or self.adapter} threshold={self.threshold:g}>"

    def load(self) -> RewardModelJudge:
        """Load the model now rather than on the first call (a job does, so a judge that cannot load fails it
        before training starts); returns the judge."""
        self._load()
        return self

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._model is None:
                self._model, self._tokenizer = load_reward_model(self.base_model, self.adapter)
            return self._model, self._tokenizer

    def __call__(self, row: Mapping[str, Any]) -> RewardModelVerdict:
        return self.judge_many([row])[0]

    def judge_many(self, rows: Any) -> list[RewardModelVerdict]:
        """``{"reward", "passed"}`` for each row, scored in batches."""
        return [{"reward": s, "passed": s >= self.threshold} for s in self.score(rows)]

    def score(self, rows: Any, batch_size: int | None = None) -> list[float]:
        """The reward model's score of each row (a list of rows, SimulationData, ScoredData or JSONL path)."""
        import torch

        from whileai.domain.rows.rowsource import rows_of

        rows = [rows] if isinstance(rows, Mapping) else rows_of(rows)
        size = defaults.REWARD_MODEL_BATCH_SIZE if batch_size is None else int(batch_size)
        if size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be at least 1; leave it None for the default")
        model, tokenizer = self._load()
        encoded = [self._encode(tokenizer, model, row, i, self.span) for i, row in enumerate(rows)]
        with self._lock, torch.inference_mode():  # one forward at a time: the model is shared
            scores = score_token_batches(model, encoded, tokenizer.pad_token_id, size)
        for i, s in enumerate(scores):
            if not math.isfinite(s):
                raise ValueError(f"the reward model scored row {i} as {s}; its weights are broken, retrain the run")
        return scores

    @staticmethod
    def _encode(tokenizer: Any, model: Any, row: Mapping[str, Any], index: int, span: str) -> list[int]:
        if not isinstance(row, Mapping) or not row.get("messages"):
            raise ValueError(f"row {index} has no messages; a reward model scores rollout rows "
                             "({'messages': [...], 'tools'?: [...]})")
        ids = tokenizer.apply_chat_template(reward_text_messages(row, span), tools=row.get("tools") or None,
                                            tokenize=True, return_dict=True)["input_ids"]
        limit = int(getattr(model.config, "max_position_embeddings", 0) or 0)
        return list(ids[-limit:]) if limit else list(ids)  # keep the end: the score reads the last token


def load_reward_model(base_model: str, adapter: str) -> tuple[Any, Any]:
    """The base as a one-label sequence classifier with the reward adapter (score head included) on it.

    Nothing is fetched from the hub unless the operator allowed it (HUB_ALLOW_ENV):
    a hub base must already be in the local cache.
    """
    from pathlib import Path

    import torch
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from whileai.core.paths import hub_allowed
    from whileai.kit import import_gguf, is_gguf_base

    path = Path(adapter).expanduser()
    if not (path / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"reward model adapter {str(path)!r} has no adapter_config.json: it is not a PEFT adapter directory "
            "on this machine; check the run's summary['adapter']"
        )
    if base_model == kit_defaults.KIT_BASE_NAME:
        from whileai.kit import demo_base

        base_dir = str(demo_base())
    elif is_gguf_base(base_model):  # a .gguf file or a packaged one (SmolLM2): the folder it was imported into
        base_dir = str(import_gguf(base_model))
    else:
        base_dir = base_model  # a local directory, or a hub name already in the local cache
    local_only = not hub_allowed()
    saved_beside = (path / "tokenizer_config.json").is_file()  # the tokenizer training used
    try:
        model = AutoModelForSequenceClassification.from_pretrained(base_dir, num_labels=1, local_files_only=local_only)
        tokenizer = AutoTokenizer.from_pretrained(str(path) if saved_beside else base_dir, local_files_only=local_only)
    except OSError as exc:
        raise FileNotFoundError(
            f"the reward model's base {base_model!r} is not on this machine and the hub is off "
            f"({core_defaults.HUB_ALLOW_ENV} is not 1); use a base in the local cache or a local directory, or let its "
            f"operator set {core_defaults.HUB_ALLOW_ENV}=1"
        ) from exc
    if not saved_beside:  # the base's own tokenizer: tools rendered as the job rendered them (tool_format auto)
        from whileai.kit import use_tool_format

        use_tool_format(tokenizer, "auto")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    model = PeftModel.from_pretrained(model, str(path), local_files_only=local_only)
    if torch.cuda.is_available():
        model = model.to("cuda")
    model.eval()
    return model, tokenizer


def score_token_batches(model: Any, encoded: list[list[int]], pad: int, size: int) -> list[float]:
    """The score head's first logit for each token sequence, right-padded ``size`` at a time.

    Shared by the reward-model judge and the rm job's threshold search, so both
    score a row exactly the same way. The caller sets eval mode and no-grad.
    """
    import torch

    device = next(model.parameters()).device
    scores: list[float] = []
    for start in range(0, len(encoded), size):
        batch = encoded[start:start + size]
        width = max(len(ids) for ids in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, seq in enumerate(batch):
            ids[i, : len(seq)] = torch.tensor(seq)
            mask[i, : len(seq)] = 1
        logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
        scores.extend(float(v) for v in logits[:, 0].float().cpu())
    return scores
