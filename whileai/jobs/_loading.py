"""Loading what a job trains: the base (kit name, folder or cached hub name), the start adapter, LoRA settings, saving the adapter."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from whileai.core.jobrow import JobPlatform, ResolvedJudge
from whileai.core.spec import RunSpec
from whileai.jobs._training_fields import BaseNotes, BaseWeights

from whileai.jobs._environment import device
from whileai.core import defaults as core_defaults
from whileai.kit import defaults as kit_defaults
from whileai.domain.rows.context import context_limit

__all__ = ["base_path", "local_only", "pretrained", "gold_judge", "reward_model_judge", "JOB_PLATFORM", "job_platform",
           "load_policy", "load_adapter", "peft_config", "lora_config", "max_length", "save_adapter",
           "use_run_tool_format", "base_notes"]


def base_of(spec: RunSpec) -> str:
    """The spec's base model: a resolved spec always names one (the launch route refuses one that does not)."""
    if not spec.base_model:
        raise ValueError("the job's spec names no base_model; a resolved spec names one (start the run with wai.train)")
    return spec.base_model


def base_path(name: str, spec: RunSpec | None = None) -> str:
    """A loadable directory (or cached hub name) for the base ``name``.

    The kit's demo base resolves to its cached folder. On Modal a hub name is
    fetched into the container's cache first (``HF_TOKEN`` from the job's
    secret for gated models); everywhere else nothing is downloaded, so a hub
    base must already be in the local cache.
    """
    if name == kit_defaults.KIT_BASE_NAME:
        from whileai.kit import demo_base

        return str(demo_base())
    from whileai.kit import import_gguf, is_gguf_base

    if is_gguf_base(name):  # a .gguf file or a packaged one: the folder it was imported into (first use imports)
        return str(import_gguf(name))
    local = Path(name).expanduser()
    if spec is not None and spec.target == "modal" and not local.exists():
        from huggingface_hub import snapshot_download

        return snapshot_download(name)
    return name


def local_only() -> bool:
    """``local_files_only`` for every load of a job: True unless the operator allowed the hub (HUB_ALLOW_ENV)."""
    from whileai.core.paths import hub_allowed

    return not hub_allowed()


@contextmanager
def _hub_quiet(off: bool) -> Iterator[None]:
    """While a load runs with the hub off: huggingface_hub's own offline switch on too. ``local_files_only`` stops
    the model's files being asked for, but the library also fetches on its own (its agent-harness registry, when it
    builds request headers, even for a load from the cache), which only its offline switch stops. It is read at
    each call from ``huggingface_hub.constants``; the caller's value comes back afterwards."""
    if not off:
        yield
        return
    from huggingface_hub import constants

    was = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = was


def _gated(load: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``load(*args, **kwargs)`` behind the job's hub gate: ``local_files_only`` (:func:`local_only`) and, while the
    hub is off, its own offline switch too (:func:`_hub_quiet`). Every ``from_pretrained`` of a job goes through it."""
    off = local_only()
    with _hub_quiet(off):
        return load(*args, local_files_only=off, **kwargs)


def pretrained(cls: Any, path: str, **kwargs: Any) -> Any:
    """``cls.from_pretrained(path, ...)`` behind the job's hub gate (:func:`_gated`); a miss names the fix."""
    try:
        return _gated(cls.from_pretrained, path, **kwargs)
    except OSError as exc:
        raise FileNotFoundError(
            f"base model {path!r} is not on this machine and the hub is off ({core_defaults.HUB_ALLOW_ENV} is not 1): "
            "pass a local directory, a hub name already in the local cache, or the kit's base; or let the "
            f"platform's operator set {core_defaults.HUB_ALLOW_ENV}=1"
        ) from exc


#: The platform's fields of the job this process runs (its row's ``platform``: the judges the launch resolved, where a
#: ``python:`` reward is imported from), typed. :func:`whileai.jobs.body.run_job` sets them for the job it runs, on
#: every target: the worker read them with the job's row (``GET /jobs/{id}``), a Modal job from its payload. None
#: outside a platform job.
JOB_PLATFORM: ContextVar[JobPlatform | None] = ContextVar("whileai_job_platform", default=None)


@contextmanager
def job_platform(platform: JobPlatform | None) -> Iterator[None]:
    """While the block runs, ``platform`` is this job's platform fields (:data:`JOB_PLATFORM`)."""
    token = JOB_PLATFORM.set(platform)
    try:
        yield
    finally:
        JOB_PLATFORM.reset(token)


def gold_judge(spec: RunSpec) -> Any:
    """The gold judge a GRPO job's monitor scores with (``gold_judge``), as the platform resolved it; None without one.

    The platform checked the run at launch and wrote what to load on the job's own
    row (``platform.gold``: the run's adapter folder, its base, threshold and span);
    nothing is read from the run's summary.
    """
    return _resolved_rm(getattr(spec, "gold_judge", None), "gold_judge")


def reward_model_judge(spec: RunSpec) -> Any:
    """The reward model a GRPO job with ``reward=rm`` optimises (``reward_model``), as the platform resolved it
    at launch (the job row's ``platform.reward_rm``), loaded; never what a run's summary says."""
    judge = _resolved_rm(getattr(spec, "reward_model", None), "reward_model")
    if judge is None:
        raise ValueError("reward=rm needs reward_model (a finished rm run); the spec names none")
    return judge


def _resolved_rm(name: str | None, field: str) -> Any:
    """The rm run ``name`` as the platform resolved it for spec field ``field`` on this job's row, loaded; None
    without one."""
    import os

    from whileai.core.paths import JOB_ID_ENV
    from whileai.domain.judges.reward_model import RewardModelJudge

    if not name:
        return None
    platform = JOB_PLATFORM.get()
    if platform is None:
        raise ValueError(f"{field}={name!r} needs the reward model the platform resolved for this job, and this "
                         "process runs no platform job (no job row's platform fields were given); launch the run "
                         "through the platform")
    resolved = platform.judge(field)
    if resolved is None or resolved.run_id != name:
        raise ValueError(f"{field}={name!r} was not resolved by the platform for job "
                         f"{os.environ.get(JOB_ID_ENV) or 'of this payload'}; launch the run again (the launch "
                         "checks the rm run and records it on the job)")
    if resolved not in _JUDGES:  # loaded once a job: a reward model scores the held-out set before, training, and after
        judge = RewardModelJudge(resolved.adapter, resolved.base_model, resolved.threshold, name, span=resolved.span)
        _JUDGES[resolved] = judge.load()  # now, so a judge that cannot load fails the job before its training starts
    return _JUDGES[resolved]


#: the reward models this job loaded (:func:`_resolved_rm`), by what the platform resolved for them
_JUDGES: dict[ResolvedJudge, Any] = {}


def load_policy(spec: RunSpec) -> tuple[Any, Any]:
    """The base model (causal LM, on the job's device) and its tokenizer.

    A run started from another (``init_from``) gets that run's adapter on top,
    loaded trainable (``spec.init_adapter``, the folder the platform resolved
    for it): the trainer keeps training the same adapter, so the result is one
    complete adapter for the base.
    """
    from whileai.kit import load_base

    model, tokenizer = load_base(base_path(base_of(spec), spec), tool_format=spec.tool_format)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = model.to(device())
    if spec.init_adapter:
        model = load_adapter(model, spec)
    return model, tokenizer


def use_run_tool_format(tokenizer: Any, spec: RunSpec) -> None:
    """Put the run's tool convention (``tool_format``) on a tokenizer the job loaded itself (the reward model's)."""
    from whileai.kit import use_tool_format

    use_tool_format(tokenizer, spec.tool_format)


def base_notes(spec: RunSpec, tokenizer: Any) -> BaseNotes:
    """What the run records of its base beyond its name: the tool convention used, a GGUF base's import, and
    which bytes the base is (:class:`~whileai.jobs._training_fields.BaseNotes`).

    ``tool_format``: the tokenizer's ``ToolFormat`` (``whileai.kit.use_tool_format``); ``base_import``: the GGUF
    file, its SHA-256, its quantisation and the folder it was imported into (``whileai.kit.gguf_record``).
    """
    from whileai.kit import gguf_record

    notes: BaseNotes = {}
    decided = getattr(tokenizer, "whileai_tool_format", None)
    if decided:
        notes["tool_format"] = dict(decided)
    record = gguf_record(spec.base_model)
    if record is not None:
        notes["base_import"] = record
    notes["base_weights"] = base_weights(spec, record)
    return notes


def base_weights(spec: RunSpec, gguf: Mapping[str, Any] | None = None) -> BaseWeights:
    """The bytes this job's base is: ``{"sha256", "of"}``, the SHA-256 of a GGUF base's file or of a folder's
    weights (``whileai.kit.weights_digest``: the kit base's packaged weights, a merged export, a hub snapshot in
    the local cache). ``sha256`` is None, with ``why``, where the bytes cannot be read; a run is never stopped
    over its record."""
    if gguf is not None:
        return {"sha256": gguf.get("sha256"), "of": "the GGUF file " + Path(str(gguf.get("source"))).name}
    from whileai.kit import weights_digest

    try:
        folder = Path(base_path(base_of(spec), spec))
        if not folder.is_dir():  # a hub name: its snapshot in the local cache, never fetched
            from huggingface_hub import snapshot_download

            folder = Path(snapshot_download(str(folder), local_files_only=True))
        return {"sha256": weights_digest(folder), "of": "the weights in " + folder.name}
    except Exception as exc:  # noqa: BLE001 - a provenance field, not a reason to fail the job
        return {"sha256": None, "why": f"{type(exc).__name__}: {exc}"[:300]}


def _start_folder(spec: RunSpec) -> Path:
    """The folder of the adapter this run starts from (``init_adapter``), checked to hold one."""
    folder = Path(spec.init_adapter or "")
    if not (folder / "adapter_config.json").is_file():
        raise FileNotFoundError(
            f"the adapter of init_from run {spec.init_from} is not at {folder} (no adapter_config.json); "
            "train that run again, or start this one from another finished run"
        )
    return folder


def classifier_from_policy(model: Any, spec: RunSpec) -> Any:
    """``model``, a one-label sequence classifier on the base, with the LoRA of the policy run it starts from
    (``init_from``) in its backbone, trainable, and its fresh score head trained and saved beside it
    (``modules_to_save``): the reward model trains on from the policy, and its adapter alone holds both.

    The policy's adapter was saved for a causal LM, but its LoRA weights name the backbone's modules
    (``model.layers.N....``), which the classifier has under the same names, so they load as they are. A policy
    weight that finds no module here, or a LoRA module here that the policy does not fill, stops the job naming
    them: a reward model trained from part of a policy would say nothing about the policy.
    """
    from peft import LoraConfig, get_peft_model
    from peft.utils import get_peft_model_state_dict, load_peft_weights, set_peft_model_state_dict

    folder = _start_folder(spec)
    policy = _gated(LoraConfig.from_pretrained, str(folder))
    config = LoraConfig(r=policy.r, lora_alpha=policy.lora_alpha, lora_dropout=policy.lora_dropout,
                        target_modules=policy.target_modules, task_type="SEQ_CLS", modules_to_save=["score"])
    model = get_peft_model(model, config)
    # the fresh head goes in as it is (PEFT loads a saved module's weights with the LoRA's); the LoRA is the policy's
    head = {k: v for k, v in get_peft_model_state_dict(model).items() if "lora_" not in k}
    loaded: Any = set_peft_model_state_dict(model, {**head, **load_peft_weights(str(folder), device="cpu")})
    unexpected: list[str] = list(loaded.unexpected_keys)
    unfilled = [k for k in loaded.missing_keys if "lora_" in k]
    if unexpected or unfilled:
        raise ValueError(
            f"the adapter of init_from run {spec.init_from} ({folder}) does not fit this reward model's backbone: "
            f"{len(unexpected)} of its weights find no module here (first: "
            f"{unexpected[:2]}), {len(unfilled)} LoRA weights here get none (first: {unfilled[:2]}); "
            "start the reward model from a policy run on the same base, or from the base (no init_from)")
    return model


def load_adapter(model: Any, spec: RunSpec) -> Any:
    """``model`` with the adapter of the run it starts from (``init_from``), trainable, as PEFT's "default"."""
    from peft import PeftModel

    return _gated(PeftModel.from_pretrained, model, str(_start_folder(spec)), is_trainable=True)


def peft_config(model: Any, spec: RunSpec, task_type: str = "CAUSAL_LM") -> Any:
    """What a trainer's ``peft_config`` gets: None when the model already carries the adapter to train."""
    from peft import PeftModel

    return None if isinstance(model, PeftModel) else lora_config(spec, task_type)


def lora_config(spec: RunSpec, task_type: str = "CAUSAL_LM") -> Any:
    """LoRA on every linear projection with the run's rank and alpha (lora_rank / lora_alpha)."""
    from peft import LoraConfig

    from whileai.jobs.trainer_config import lora_settings

    # the freshly initialised head of a classifier must be saved with the adapter (None: PEFT's default, none)
    return LoraConfig(**lora_settings(spec), task_type=task_type,
                      modules_to_save=["score"] if task_type == "SEQ_CLS" else None)


def max_length(model: Any, episodes: bool = False) -> int:
    """TRAIN_MAX_LENGTH (with ``episodes``, a GRPO prompt or held-out play in an environment: EPISODE_MAX_LENGTH), or
    the model's own context length when that is shorter (the selection report's rule too)."""
    return context_limit(model.config, core_defaults.EPISODE_MAX_LENGTH if episodes else None)


def save_adapter(model: Any, tokenizer: Any, path: Path) -> Path:
    """The adapter in PEFT's format (``adapter_config.json``, ``adapter_model.safetensors``) plus the tokenizer.

    Only the trained adapter ("default") is saved: a trainer continuing an
    adapter keeps a frozen copy of its start as the reference ("ref"), which is
    not part of the result. Written to a sibling folder and renamed into place,
    so a job killed mid-save leaves no half adapter at ``path``.
    """
    import os
    import shutil

    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    adapters = list(getattr(model, "peft_config", {}) or {})
    selected = {"selected_adapters": ["default"]} if len(adapters) > 1 and "default" in adapters else {}
    model.save_pretrained(str(partial), **selected)
    tokenizer.save_pretrained(str(partial))
    for each in [partial, *partial.rglob("*")]:  # the owner's only, like the store and the job's log
        each.chmod(0o700 if each.is_dir() else 0o600)
    if path.exists():
        shutil.rmtree(path)
    os.replace(partial, path)
    return path
