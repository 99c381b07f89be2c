"""What ``validate`` can check of the data without a model: the files exist and a bounded sample parses.

``data_problems(spec)`` reads at most RUNNER_VALIDATE_SAMPLE_ROWS lines of
each data file the spec names (``dataset.path``, ``dataset.tools``,
``dataset.questions``/``dataset.answers`` or ``dataset.categories``' files (single-turn, or
``dataset=bfcl_episodes``' multi-turn ones),
``dataset.after``): each must exist,
and each sampled line must be JSON following its contract (a rollout row, a
BFCL entry); the tools file must be a JSON list of function schemas.
``data_error_message(exc)`` is the one message a data error at run time prints
(file, line, what is wrong, the fix) instead of a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from whileai.runner import defaults
from whileai.runner.schema import Dataset, Problem, RecipeSpec

__all__ = ["data_problems", "data_error_message", "DATA_ERRORS"]


def _sample_lines(path: Path, limit: int | None) -> list[tuple[int, str]]:
    """The file's first ``limit`` non-blank lines with their 1-based numbers (every line when None)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                out.append((number, line))
                if limit is not None and len(out) >= limit:
                    break
    return out


def _at(value: str, number: int, exc: ValueError, line: str) -> str:
    """``FILE, line 6: not valid JSON (... at column 41)``: where in the file a line stopped parsing, and why."""
    from whileai.domain.rows.jsonl import json_column

    return f"{value}, line {number}: not valid JSON ({json_column(exc, line)[1]})"


def _missing(key: str, value: str, what: str, where: Any) -> Problem:
    path = Path(value).expanduser()
    if path.is_dir():  # a folder is named as a folder, with the files in it that could be meant
        inside = sorted(p.name for p in path.iterdir() if p.suffix in (".jsonl", ".json") and p.is_file())
        shown = ", ".join(inside[: defaults.RUNNER_VALIDATE_MAX_PROBLEMS])
        hint = (f"; it holds {shown}" + (" ..." if len(inside) > defaults.RUNNER_VALIDATE_MAX_PROBLEMS else "")
                + f": pass one of them, e.g. {key}={str(path / inside[0])}") if inside else "; it holds no .jsonl file"
        return Problem(key, f"{key}={value!r} is a folder, not a file; pass the path of {what}{hint}", where(key))
    return Problem(key, f"{key}={value!r} does not exist (resolved against {Path.cwd()}); pass the path of {what}",
                   where(key))


def _rows_file(key: str, value: str, where: Any, limit: int | None = defaults.RUNNER_VALIDATE_SAMPLE_ROWS,
               judged: bool = False) -> list[Problem]:
    """Each line parses and follows the row contract, and the rows pass the data gates; problems name file:line."""
    from whileai.domain.rows.rollouts import row_problems

    path = Path(value).expanduser()
    if not path.is_file():
        return [_missing(key, value, "a JSONL file of rollout rows (docs/rows.md)", where)]
    out = []
    good: list[tuple[int, dict[str, Any]]] = []
    lines = _sample_lines(path, limit)
    for number, line in lines:
        try:
            row = json.loads(line.rstrip("\r\n"))
        except ValueError as exc:
            out.append(Problem(key, f"{key}: {_at(value, number, exc, line)}; each line is one rollout row object",
                               where(key)))
            continue
        details = row_problems(row)
        for detail in details[:1]:
            out.append(Problem(key, f"{key}: {value}:{number}: {detail}; see docs/rows.md", where(key)))
        if not details:
            good.append((number, row))
        if len(out) >= defaults.RUNNER_VALIDATE_MAX_PROBLEMS:
            return out
    read_all = limit is None or len(lines) < limit
    if judged and read_all and good and not any(row.get("gold") is not None for _, row in good):
        out.append(Problem(key, f"{key}: {value}: none of its {len(good)} rows carries a gold (the reference first "
                                "action a held-out prompt is judged against: {'name', 'arguments'} or {'answer'}, "
                                "docs/rows.md), so no held-out prompt could be judged and the run would show "
                                "nothing; add gold to the rows and run again", where(key)))
    return out + _gate_problems(key, value, good, where)[: defaults.RUNNER_VALIDATE_MAX_PROBLEMS - len(out)]


def _gate_problems(key: str, value: str, numbered: list[tuple[int, dict[str, Any]]], where: Any) -> list[Problem]:
    """The data gates (tool names, schema types, gold against the tools) on rows read from a file, by file line.

    The same gates the selection report runs after the push (``whileai.domain.rows.datagate``), run here
    first so a refused row is named by its line of the user's file, with the fix in the file's terms.
    """
    from whileai.domain.rows.datagate import gate_rows

    _, report = gate_rows([row for _, row in numbered])
    out = []
    for refused in report["refused"]:
        number = numbered[refused["row"]][0]
        task = f" (task {refused['task_id']})" if refused.get("task_id") is not None else ""
        out.append(Problem(key, f"{key}: {value}:{number}{task}: {'; '.join(refused['problems'])}; fix line "
                                f"{number} of {value} (or remove it) and run again", where(key)))
    return out


def _tools_file(key: str, value: Any, where: Any) -> list[Problem]:
    from whileai.domain.rows.rollouts import tools_problems

    if not isinstance(value, str):
        return [Problem(key, p, where(key)) for p in tools_problems(value)[:3]]
    path = Path(value).expanduser()
    if not path.is_file():
        return [_missing(key, value, "a JSON file holding a list of OpenAI function schemas", where)]
    try:
        tools = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        return [Problem(key, f"{value}: not JSON ({exc}); the tools file is one JSON list of function schemas",
                        where(key))]
    return [Problem(key, f"{value}: {p}", where(key)) for p in tools_problems(tools)[:3]]


def _bfcl_file(key: str, value: str, what: str, where: Any, field: str | None = None) -> list[Problem]:
    """A BFCL file exists and its sampled lines are JSON with ``id`` and ``field`` (questions: ``function``, a
    multi-turn one's ``involved_classes``; answers: ``ground_truth``)."""
    path = Path(value).expanduser()
    if not path.is_file():
        return [_missing(key, value, f"a BFCL {what} file (bfcl_eval/data/...BFCL_v4_<category>.json)", where)]
    out = []
    field = field or ("function" if what == "questions" else "ground_truth")
    for number, line in _sample_lines(path, defaults.RUNNER_VALIDATE_SAMPLE_ROWS):
        try:
            entry = json.loads(line.rstrip("\r\n"))
        except ValueError as exc:
            out.append(Problem(key, f"{key}: {_at(value, number, exc, line)}", where(key)))
            continue
        if not isinstance(entry, dict) or "id" not in entry or field not in entry:
            out.append(Problem(key, f"{key}: {value}:{number}: a BFCL {what} line has 'id' and {field!r}; is this "
                                    f"the {'possible-answer' if what == 'answers' else 'question'} file?", where(key)))
            break  # one line says it is the wrong file
        if len(out) >= defaults.RUNNER_VALIDATE_MAX_PROBLEMS:
            break
    return out


def _bfcl_categories(data: Dataset, where: Any) -> list[Problem]:
    """Each named category's question file (and answer file, but for irrelevance) in the BFCL data folder."""
    from whileai.runner._bfcl_data import bfcl_folder

    from whileai.simulations.datasets import bfcl_category_problem

    key = "dataset.categories"
    try:
        folder, _ = bfcl_folder(data)
    except FileNotFoundError as exc:
        return [Problem(key, str(exc), where(key))]
    named = [bfcl_category_problem(str(c), folder) for c in data.categories or []]
    if any(named):  # refused by name (multi-turn, Java, a misspelling): the files are beside the point
        return [Problem(key, f"{key}: {text}", where(key)) for text in named if text]
    out = []
    for category in data.categories or []:
        out += _bfcl_file(key, str(folder / f"BFCL_v4_{category}.json"), "questions", where)
        if "irrelevance" not in str(category):  # BFCL scores irrelevance by the no-call rule: no answer file
            out += _bfcl_file(key, str(folder / "possible_answer" / f"BFCL_v4_{category}.json"), "answers", where)
    return out


def _bfcl_episodes(spec: RecipeSpec, where: Any) -> list[Problem]:
    """``dataset=bfcl_episodes``: multi-turn categories, and each one's question and answer files in the data folder
    (``dataset.folder``, else the installed bfcl-eval's)."""
    from whileai.domain.rows.bfcl_multi_turn import categories_problem
    from whileai.runner._bfcl_data import episode_categories, episode_folder

    key = "dataset.categories"
    categories = episode_categories(spec.dataset, spec.environment)
    named = categories_problem(categories)
    if named:
        return [Problem(key, f"{key}: {named}", where(key))]
    try:
        folder = episode_folder(spec.dataset)
    except FileNotFoundError as exc:
        return [Problem("dataset.folder", str(exc), where("dataset.folder"))]
    out = []
    for category in categories:
        out += _bfcl_file(key, str(folder / f"BFCL_v4_{category}.json"), "questions", where, "involved_classes")
        out += _bfcl_file(key, str(folder / "possible_answer" / f"BFCL_v4_{category}.json"), "answers", where)
    return out


def _refused_file(questions: str | None) -> str | None:
    """Why a BFCL question file's category (read from its name) is not converted, or None."""
    from whileai.simulations.datasets import BFCL_REFUSED_CATEGORIES, bfcl_category, bfcl_category_problem

    if questions is None or questions == "???" or bfcl_category(questions) not in BFCL_REFUSED_CATEGORIES:
        return None
    return bfcl_category_problem(bfcl_category(questions))


def data_problems(spec: RecipeSpec, where: Any, whole: bool = False) -> list[Problem]:
    """Problems with the data files the spec names (see the module docstring); empty when none.

    ``whole``: read every line of the rows file (before a run, which reads it all anyway), not the
    first RUNNER_VALIDATE_SAMPLE_ROWS (``validate``).
    """
    data = spec.dataset
    out: list[Problem] = []
    if data.source == "jsonl" and data.path is not None and data.path != "???":
        out += _rows_file("dataset.path", data.path, where,
                          limit=None if whole else defaults.RUNNER_VALIDATE_SAMPLE_ROWS,
                          judged=spec.method != "rm")  # a reward model learns from pass/fail pairs, no gold
    if data.source == "bfcl" and data.categories:
        out += _bfcl_categories(data, where)
    elif data.source == "bfcl" and _refused_file(data.questions):
        out.append(Problem("dataset.questions", f"dataset.questions: {_refused_file(data.questions)}",
                           where("dataset.questions")))
    elif data.source == "bfcl":
        for key, named in (("questions", data.questions), ("answers", data.answers)):
            if named is not None and named != "???":
                out += _bfcl_file(f"dataset.{key}", named, key, where)
    if data.source == "bfcl_episodes":
        out += _bfcl_episodes(spec, where)
    if data.tools is not None:
        out += _tools_file("dataset.tools", data.tools, where)
    if data.after is not None:
        out += _rows_file("dataset.after", data.after, where)
    if spec.target.name != "modal":  # a Modal container fetches a hub base itself; a local job never downloads
        bases = [("base_model", spec.base_model), *((f"stages.{n}.base_model", s.base_model)
                                                    for n, s in spec.stages.items())]
        out += [_uncached(key, str(value), where) for key, value in bases if value and _is_uncached_hub_id(str(value))]
        out += _gguf_problems(bases, where)
    return out


def _gguf_problems(bases: list[tuple[str, str | None]], where: Any) -> list[Problem]:
    """A GGUF base whose package, file or reader is missing here: one sentence with the fix, before any run."""
    from whileai.kit import gguf_problem, is_gguf_base

    out = []
    for key, value in bases:
        said = gguf_problem(value) if value and is_gguf_base(value) else None
        if said:
            out.append(Problem(key, said, where(key)))
    return out


def _is_uncached_hub_id(name: str) -> bool:
    """Whether ``base_model=name`` is a hub id (``org/name``, not the kit's base, a GGUF or a local path) that is not
    in this machine's Hugging Face cache: the job would refuse it, since nothing is downloaded here."""
    from whileai.kit import KIT_BASE_NAME, is_gguf_base

    if name == KIT_BASE_NAME or is_gguf_base(name) or name.startswith((".", "/", "~")) or name.count("/") != 1:
        return False
    if Path(name).expanduser().exists():
        return False
    from huggingface_hub import try_to_load_from_cache

    try:
        return not isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - a name the hub's rules refuse is not cached either
        return True


def _uncached(key: str, name: str, where: Any) -> Problem:
    return Problem(key, f"{key}={name!r} is a hub id that is not in this machine's Hugging Face cache, and whileai "
                        "downloads nothing; pass a local folder written by save_pretrained, a .gguf file, fetch it "
                        f"where a network is available (huggingface-cli download {name}), or run on target=modal, "
                        "whose container fetches it", where(key))


def _data_errors() -> tuple[type[BaseException], ...]:
    from whileai.core.errors import RowFormatError

    return (RowFormatError, FileNotFoundError, IsADirectoryError, json.JSONDecodeError, UnicodeDecodeError)


DATA_ERRORS = _data_errors()


def data_error_message(exc: BaseException) -> str:
    """One message for a data error: the file and line when known, what is wrong, and the fix."""
    if isinstance(exc, IsADirectoryError) and exc.filename and str(exc.filename) not in str(exc):
        return (f"whileai: data file {str(exc.filename)!r} is a folder, not a file; pass the path of one file in it "
                "(nothing was trained)")
    if isinstance(exc, FileNotFoundError) and exc.filename and str(exc.filename) not in str(exc):
        return f"whileai: data file {str(exc.filename)!r} does not exist; pass an existing path (nothing was trained)"
    text = str(exc).strip() or type(exc).__name__
    return f"whileai: the data cannot be read, nothing was trained:\n  {text}"
