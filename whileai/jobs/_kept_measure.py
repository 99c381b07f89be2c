"""A run's held-out "after", kept beside its adapter, so a stage started from that adapter need not measure it again.

A chained recipe (SFT, then DPO or GRPO from the SFT run's adapter) measures the
same policy twice: the first stage's "after" and the second stage's "before" are
both the first stage's adapter on the held-out prompts. On SmolLM2 on a CPU each
measurement takes about ten minutes. The first job writes its measurement to
``MEASURED_FILE`` in the adapter folder with everything the result depends on
(``measure_key``); the next job reads it back only when every part of its own key
is equal, the adapter's weights included, and measures again otherwise.

Only the plain first-action pass rate and the held-out episode pass rate are kept: greedy replies, so the same
adapter, prompts, reply cap, chat template, parser and device give the same
outcomes. A method whose measurement adds more (GRPO's proxy scores, a reward
model's pair accuracy, held-out loss) says so with ``keeps_measure`` and is
measured as before.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from whileai.core.spec import RunSpec
from whileai.jobs._measure import HeldOutMeasure

__all__ = ["MEASURED_FILE", "MeasureKey", "measure_key", "keep", "read_back"]

#: the held-out "after" of the run whose adapter this folder holds, with what it depends on
MEASURED_FILE = "held_out.json"

_WEIGHTS = "adapter_model.safetensors"


@dataclass(frozen=True)
class MeasureKey:
    """What a kept measurement depends on, besides the adapter's weights: equal keys on equal weights measure alike.

    ``measure`` is ``first_action_pass_rate`` (which adds the reply ``parser``) or ``episode_pass_rate`` (which adds
    the ``environment``, its turn cap ``max_turns`` and the generation ``batch``); ``template`` is the chat template's
    digest and ``device`` the device measured on.
    """

    measure: str
    base_model: str | None
    prompt_digest: str
    eval_max_new_tokens: int
    template: str
    device: str
    parser: str | None = None
    environment: str | None = None
    max_turns: int | None = None
    batch: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The key as the measurement file keeps it: the common fields and those its measure has."""
        return {name: held for name, held in asdict(self).items() if held is not None or name not in _BY_MEASURE}


#: the key's fields that only one measure has (None in the other's key, and left out of its JSON)
_BY_MEASURE = ("parser", "environment", "max_turns", "batch")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def measure_key(spec: RunSpec, tokenizer: Any, holdout_rows: list[dict[str, Any]]) -> MeasureKey:
    """What a pass-rate measurement of ``spec``'s policy depends on, besides the adapter's weights."""
    from whileai.jobs._evaluation import distinct_prompts, prompt_digest
    from whileai.kit import reply_format

    template = getattr(tokenizer, "chat_template", None)
    environment = getattr(spec, "environment", None)
    if environment is not None:
        return _episode_key(spec, environment, holdout_rows, template)
    return MeasureKey(
        measure="first_action_pass_rate",
        base_model=spec.base_model,
        prompt_digest=prompt_digest(distinct_prompts(holdout_rows, spec.holdout_rows, spec.seed)),
        eval_max_new_tokens=spec.eval_max_new_tokens,
        template=_digest(json.dumps(template, sort_keys=True).encode()),
        parser=reply_format(tokenizer),
        device=_device(),
    )


def _episode_key(spec: RunSpec, environment: str, holdout_rows: list[dict[str, Any]], template: Any) -> MeasureKey:
    """What a held-out episode measurement depends on: the environment and its turn cap, which episodes, the reply
    cap, the template, the batch the replies are generated in, and the device."""
    from whileai.jobs import defaults
    from whileai.domain.episodes.rows import episode_digest, held_out_episodes
    from whileai.jobs._episode_prompts import turn_cap

    return MeasureKey(
        measure="episode_pass_rate",
        base_model=spec.base_model,
        environment=environment,
        max_turns=turn_cap(spec),
        prompt_digest=episode_digest(held_out_episodes(holdout_rows, spec.holdout_rows, spec.seed)),
        eval_max_new_tokens=spec.eval_max_new_tokens,
        template=_digest(json.dumps(template, sort_keys=True).encode()),
        batch=defaults.EPISODE_EVAL_BATCH,
        device=_device(),
    )


def _device() -> str:
    """The device the job measures on, a GPU by its name (two GPU types need not break a tie the same way)."""
    import torch

    return f"cuda ({torch.cuda.get_device_name(0)})" if torch.cuda.is_available() else "cpu"


def _weights(folder: Path) -> str | None:
    try:
        return _digest((folder / _WEIGHTS).read_bytes())
    except OSError:
        return None


def keep(folder: Path, key: MeasureKey, measured: HeldOutMeasure) -> None:
    """Write ``measured`` (the run's "after") into its saved adapter folder, with its key and the weights' digest."""
    weights = _weights(folder)
    if weights is None:
        return
    path = folder / MEASURED_FILE
    path.write_text(json.dumps({"key": key.to_json(), "weights": weights, "measured": measured.to_json()}))
    path.chmod(0o600)


def read_back(folder: Path, key: MeasureKey) -> HeldOutMeasure | None:
    """The start adapter's kept measurement when it was made under ``key`` on these very weights, else None."""
    try:
        kept = json.loads((folder / MEASURED_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != key.to_json() or kept.get("weights") != _weights(folder):
        return None
    try:
        measured = HeldOutMeasure.from_json(kept.get("measured"))
    except ValueError:  # not a measure this job can read: measured again
        return None
    return measured if measured.outcomes is not None else None
