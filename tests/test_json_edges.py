"""``dict[str, Any]`` only at the JSON edges: each module that still writes one says which edge it is.

A shape the code builds and reads with fixed keys is named (a TypedDict, a NamedTuple, a frozen dataclass); a
``dict[str, Any]`` is left only where the keys are not the code's to fix: HTTP bodies and run records read back,
files read or written, a third-party library's keyword bundle, rows of user data (their messages, tool schemas
and tool-call arguments), Hydra's plain config. ``EDGES`` holds, for every module of ``whileai/`` that writes
one, how many it may write and the edge they stand for. A new ``dict[str, Any]`` fails here until its module's
line says so (raise the number and, where the edge is a new one, the reason); a module that drops some may lower
its number.
"""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "whileai"
#: ``dict[str, Any]`` however it is spaced (what ``grep "dict\[str, Any\]"`` counts, and its respellings)
_PATTERN = re.compile(r"\bdict\[\s*str\s*,\s*Any\s*\]")

#: module -> (the most ``dict[str, Any]`` it may write, two on one line counting two; the edge they stand for)
EDGES: dict[str, tuple[int, str]] = {
    # core: the bottom layer
    "whileai.core.errors": (1, "HTTP bodies: an error's JSON body"),
    "whileai.core.jobrow": (2, "HTTP bodies: a job row's platform and spec JSON"),
    "whileai.core.launch": (2, "files read: each rank's result file"),
    "whileai.core.runnerrecord": (3, "files read: the recipe spec as plain data, Hydra's choices, the export report's JSON"),
    "whileai.core._spec_io": (2, "the spec's JSON: spec_json and job_json, the JSON edge"),
    "whileai.core._spec_models": (3, "the spec's JSON: a user's extra keys, the monitor's settings, the knobs as a dict"),
    "whileai.core._spec_versions": (2, "Hydra's plain config: a config with its aliases renamed (canonical)"),
    "whileai.core.toolcalls": (3, "rows of user data: tool-call arguments as the model wrote them, OpenAI wire calls"),
    # domain: rows, judges, export, monitor, episodes, tracking
    "whileai.domain.client": (4, "HTTP bodies and query params; the client's config file"),
    "whileai.domain.episodes.bfcl": (3, "rows of user data: BFCL tool schemas and a function's annotations"),
    "whileai.domain.episodes.bfcl_rows": (4, "rows of user data: BFCL episode rows and conversations"),
    "whileai.domain.episodes.judge": (4, "rows of user data: tool-call arguments, an environment's end state and reset"),
    "whileai.domain.episodes.loop": (9, "rows of user data: episode messages, tool-call arguments, an environment's state"),
    "whileai.domain.episodes.protocol": (5, "rows of user data: an environment's tool schemas, turns and end state"),
    "whileai.domain.episodes.rows": (3, "rows of user data: episode rows and an environment's reset arguments"),
    "whileai.domain.episodes.turns": (1, "rows of user data: an assistant turn holding a call"),
    "whileai.domain.export": (5, "rows of user data: tool schemas, TRL's rows"),
    "whileai.domain.export._build": (1, "files written: one JSONL line"),
    "whileai.domain.export._report": (1, "files written: the tool convention's free-form report"),
    "whileai.domain.export._shape": (2, "rows of user data: an exported row and its tools"),
    "whileai.domain.export._template": (1, "files written: the tool convention's free-form report"),
    "whileai.domain.judges._near_misses": (5, "rows of user data: pairs of rows, tool-call arguments, changed turns"),
    "whileai.domain.judges.bfcl_multi_turn": (1, "rows of user data: BFCL's class instances by name"),
    "whileai.domain.judges.judging": (6, "rows of user data: replies, judged pairs of rows"),
    "whileai.domain.judges.reward_model": (2, "rows of user data: messages and TRL's pair examples"),
    "whileai.domain.judges.rewards": (3, "rows of user data: tool-call arguments, the sample's rows"),
    "whileai.domain.judges.scoring": (13, "rows of user data: scored rows, their pairs and a judge's free-form extras"),
    "whileai.domain.monitor": (4, "rows of user data, and an alarm's free-form numbers as JSON"),
    "whileai.domain.monitor._episodes": (2, "rows of user data: a played episode's messages and gold row"),
    "whileai.domain.monitor._sampling": (3, "rows of user data: TRL's dataset columns, a reply as a message"),
    "whileai.domain.monitor._scoring": (2, "rows of user data: the rows a gold judge scores"),
    "whileai.domain.rows.actions": (1, "rows of user data: a first action read from messages"),
    "whileai.domain.rows.basetokenizer": (1, "files read: a tokenizer's JSON file"),
    "whileai.domain.rows.bfcl": (5, "files read: BFCL's JSON lines, its tool schemas and gold calls"),
    "whileai.domain.rows.bfcl_multi_turn": (5, "files read: BFCL's multi-turn entries and function docs"),
    "whileai.domain.rows.context": (6, "rows of user data: messages, tool schemas, the export options' keyword bundle"),
    "whileai.domain.rows.datagate": (3, "rows of user data: the rows the gates pass"),
    "whileai.domain.rows.rollouts": (8, "rows of user data: tool-call arguments, markers, sampling, trajectories"),
    "whileai.domain.rows.rowsource": (1, "files read: a JSONL file's rows"),
    "whileai.domain.rows.taskkey": (1, "rows of user data: a row's prompt messages"),
    "whileai.domain.tracking._offline": (5, "HTTP bodies: the create body and the record it makes"),
    "whileai.domain.tracking._run": (6, "HTTP bodies: the run's record, its summary and query params"),
    "whileai.domain.tracking._spool": (3, "HTTP bodies: the spooled requests, as sent"),
    "whileai.domain.tracking._tracker": (12, "HTTP bodies: patches, creates and the user's logged metrics"),
    "whileai.domain.tracking.mirror": (2, "third-party keyword bundles: a mirror's summary fields"),
    # jobs: the job bodies
    "whileai.jobs._episode_play": (3, "rows of user data: messages and an episode's start (an environment's reset)"),
    "whileai.jobs._episode_prompts": (2, "rows of user data: TRL's rows, one per episode with its reset arguments"),
    "whileai.jobs._episode_watch": (2, "rows of user data: episode starts, held-out rows"),
    "whileai.jobs._episodes": (9, "rows of user data: TRL's episode prompts, held-out rows"),
    "whileai.jobs._kept_measure": (3, "files written: the kept measure's JSON; rows of user data: held-out rows"),
    "whileai.jobs._measure": (3, "files written: a measure's JSON, and two domain shapes read as JSON objects"),
    "whileai.jobs._policy_pairs": (3, "rows of user data: the rows pairs are sampled from"),
    "whileai.jobs._rewards": (1, "rows of user data: a reply's tool calls (TRL's or the wire's)"),
    "whileai.jobs._start_filter": (3, "rows of user data: TRL's episode prompts"),
    "whileai.jobs._trainer_data": (5, "rows of user data: TRL's examples and pairs"),
    "whileai.jobs._trainer_setup": (3, "TRL keyword bundles: the trainer's settings, its examples"),
    "whileai.jobs._training_fields": (1, "files read: a GGUF base's import record"),
    "whileai.jobs.body": (18, "rows of user data: training and held-out rows; HTTP bodies: the run's record"),
    "whileai.jobs.dpo": (10, "rows of user data: rows, their pairs and TRL's examples"),
    "whileai.jobs.grpo": (17, "rows of user data: rows, prompt messages and tool schemas"),
    "whileai.jobs.modal_app": (9, "HTTP bodies: the job payload and its result"),
    "whileai.jobs.rm": (18, "rows of user data: rows, their pairs and TRL's examples"),
    "whileai.jobs.sft": (3, "rows of user data: training and held-out rows"),
    "whileai.jobs.trainer_config": (2, "TRL keyword bundles: the settings TRL's config takes"),
    "whileai.jobs.trainer_record": (2, "files written: TRL's and PEFT's configs as JSON"),
    "whileai.jobs.worker": (3, "HTTP bodies: the job row the worker claimed"),
    # kit: the tiny model, sample data and bases
    "whileai.kit._base": (8, "files written: a base's recipe and its cache manifest"),
    "whileai.kit._cache": (1, "files written: a cached build's manifest"),
    "whileai.kit._gguf": (2, "files written: a GGUF import record"),
    "whileai.kit._model": (1, "third-party keyword bundles: the model config's fields"),
    "whileai.kit._pretrain": (8, "rows of user data: generated messages and tool schemas"),
    "whileai.kit.sample_task": (14, "rows of user data: the sample's rows and tool schemas, a call's arguments, a tool's result"),
    # platform: store, HTTP API, launcher, serving, pages
    "whileai.platform._http": (1, "third-party keyword bundles: uvicorn's options"),
    "whileai.platform.api": (1, "HTTP bodies: an error's body"),
    "whileai.platform.api._guard": (1, "HTTP bodies: a request's JSON"),
    "whileai.platform.api.runs": (3, "HTTP bodies: a run's summary and config"),
    "whileai.platform.launcher._shared": (1, "HTTP bodies: a job's changes"),
    "whileai.platform.launcher._warm": (4, "HTTP bodies: the warm worker's requests and answers"),
    "whileai.platform.launcher._warm_process": (7, "HTTP bodies: the warm worker's requests over its socket"),
    "whileai.platform.launcher.jobs": (4, "HTTP bodies: a job row's spec and a run's summary"),
    "whileai.platform.launcher.modal_backend": (10, "HTTP bodies: Modal payloads, results and progress entries"),
    "whileai.platform.launcher.warm_cli": (2, "HTTP bodies: the warm worker's answers"),
    "whileai.platform.pages._columns": (4, "HTTP bodies: a run's config and the page's column values"),
    "whileai.platform.pages._episodes": (4, "HTTP bodies: episode records as stored"),
    "whileai.platform.pages._series": (1, "HTTP bodies: decoded metric points"),
    "whileai.platform.pages._setup": (4, "HTTP bodies: a run's config, summary and setup as stored"),
    "whileai.platform.pages._shapes": (8, "HTTP bodies: the parts of a run record a page shows as they are"),
    "whileai.platform.pages._views": (9, "HTTP bodies: a run's config and summary as stored"),
    "whileai.platform.pages.routes": (2, "HTTP bodies: a run's summary as stored"),
    "whileai.platform.serving": (1, "HTTP bodies: a streamed chunk's delta"),
    "whileai.platform.serving._chat": (13, "HTTP bodies: OpenAI chat requests and replies; TRL keyword bundles"),
    "whileai.platform.serving._remote": (1, "HTTP bodies: a forwarded chat request"),
    "whileai.platform.store._datasets": (2, "rows of user data: a dataset's rows; HTTP bodies: its changes"),
    "whileai.platform.store._jobs": (5, "HTTP bodies: a job's fields and changes"),
    "whileai.platform.store._runs": (4, "HTTP bodies: a run's summary and changes"),
    "whileai.platform.store.migrate": (1, "files read: rows of the store's database"),
    "whileai.platform.store.records": (3, "HTTP bodies: metrics, a summary and a platform's JSON as stored"),
    "whileai.platform.store.values": (1, "HTTP bodies: a run's summary as stored"),
    # runner: the Hydra command line
    "whileai.runner._bfcl_data": (1, "rows of user data: BFCL's episode rows"),
    "whileai.runner._closing": (1, "HTTP bodies: an alarm as the run's summary keeps it"),
    "whileai.runner._datacheck": (2, "rows of user data: numbered rows"),
    "whileai.runner._effective": (4, "Hydra's plain config"),
    "whileai.runner._estimate": (1, "files read: the measured timings"),
    "whileai.runner._export_check": (5, "rows of user data: a check conversation, held-out rows; HTTP bodies: the record"),
    "whileai.runner._gguf": (4, "files read: a tokenizer's and a model's JSON config"),
    "whileai.runner._mirrored": (2, "HTTP bodies: the mirrors a run's summary lists"),
    "whileai.runner._origin": (2, "files read: a recipe's YAML; Hydra's choices"),
    "whileai.runner._parts": (1, "HTTP bodies: a part of a record, read as a JSON object"),
    "whileai.runner._summary": (1, "HTTP bodies: the mirrors a run's summary lists"),
    "whileai.runner.cli": (3, "Hydra's plain config: its choices"),
    "whileai.runner.compare": (17, "HTTP bodies: run records, their specs and summaries"),
    "whileai.runner.depends": (9, "HTTP bodies: run records and their parts"),
    "whileai.runner.export_model": (6, "HTTP bodies: a run's record, summary and config"),
    "whileai.runner.expect": (5, "Hydra's plain config: a recipe's expect block; HTTP bodies: the summary's parts"),
    "whileai.runner.pipeline": (16, "rows of user data: the dataset's rows; Hydra's plain config: its choices"),
    "whileai.runner.provenance": (7, "HTTP bodies: a run record and the recipe spec kept on it"),
    "whileai.runner.quick": (3, "Hydra's plain config: the settings given"),
    "whileai.runner.reproduce": (6, "HTTP bodies: the original and new run records"),
    "whileai.runner.resume": (2, "HTTP bodies: a run's resume note and stored spec"),
    "whileai.runner.runs": (12, "HTTP bodies: run rows and records"),
    "whileai.runner.schema": (20, "Hydra's plain config; pydantic's field definitions"),
    "whileai.runner.serving_cli": (1, "HTTP bodies: a served model's row"),
    "whileai.runner.stages": (5, "Hydra's plain config: a stage's settings and the keys it hands wai.train"),
    "whileai.runner.trainer_diff": (6, "HTTP bodies: two runs' trainer records"),
    # simulations: the SDK
    "whileai.simulations._hosting": (7, "HTTP bodies: run and dataset records, a start's config"),
    "whileai.simulations._resolve": (3, "Hydra's plain config: the values a user passed"),
    "whileai.simulations._sent": (2, "HTTP bodies: the config and job sent"),
    "whileai.simulations.datasets": (7, "rows of user data; HTTP bodies: dataset requests"),
    "whileai.simulations.proxy_rewards": (4, "rows of user data: gold calls, tool-call arguments, turns"),
    "whileai.simulations.serving": (7, "HTTP bodies: serving requests and answers; chat messages"),
    "whileai.simulations.training": (5, "HTTP bodies: run requests and records"),
}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def written() -> dict[str, int]:
    """Each module of ``whileai/`` and how many ``dict[str, Any]`` its source writes (those with none left out)."""
    counts = {_module(path): len(_PATTERN.findall(path.read_text(encoding="utf-8")))
              for path in sorted(PACKAGE.rglob("*.py"))}
    return {module: n for module, n in counts.items() if n}


def test_each_dict_str_any_is_at_an_edge_its_module_names():
    over = [f"{module}: {n} dict[str, Any], {EDGES.get(module, (0, ''))[0]} allowed"
            for module, n in written().items() if n > EDGES.get(module, (0, ""))[0]]
    assert not over, (
        "dict[str, Any] past what EDGES allows:\n  " + "\n  ".join(over) + "\nname the shape where the code fixes its "
        "keys (a TypedDict, or a frozen dataclass where it is not serialized); where it is a JSON edge, raise the "
        "module's number in tests/test_json_edges.py and say which edge it is")


def test_each_line_of_the_table_names_a_module_and_its_edge():
    modules = {_module(path) for path in PACKAGE.rglob("*.py")}
    gone = sorted(set(EDGES) - modules)
    assert not gone, f"EDGES names modules that are not in whileai/ (moved or removed? move or drop the line): {gone}"
    assert all(n > 0 and reason.strip() for n, reason in EDGES.values())


def test_the_pattern_counts_what_grep_counts_and_its_respellings():
    assert len(_PATTERN.findall("a: dict[str, Any] = {}; b: dict[str,Any]; c: dict[ str , Any ]")) == 3
    assert not _PATTERN.findall("dict[str, int]; dict[str, dict[str, int]]; Mapping[str, Any]; ordict[str, Any]")
