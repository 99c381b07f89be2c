"""What is written about the knobs, generated from their declarations (``whileai.core.spec``).

- ``docs/knobs.md``: every knob per method, its default and the reason, its range or choices,
  the paper's value and the citation, its help;
- ``conf/method/<method>.yaml``: the method group, each knob the method reads at the root, null
  (resolved for the chosen base when the run is resolved);
- ``conf/config.yaml``: the block of root knobs between its two ``knobs`` marker lines, every knob
  the spec takes flat at the root (``schema.KNOBS`` and ``schema.HOST_KEYS``), null, so Hydra accepts
  each one on the command line without ``+``; the rest of that file is written by hand;
- ``conf/export/<format>.yaml``: the export group, one option per format, each setting at the
  default ``schema.Export`` gives it (the knobs' from their declarations);
- ``run --help``: one line per knob (:func:`help_lines`).

    python -m whileai.runner.knobs_doc --write     # regenerate the files
    python -m whileai.runner.knobs_doc --check     # exit 1 when a file differs from its declarations

``tests/test_knob_docs.py`` runs the check, so a knob changed in one place only fails CI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, get_args

from whileai.core.knobs import fmt_num, knob_interval
from whileai.core.spec import SPEC_MODELS, knob_fields, knob_of

from whileai.runner.schema import EXPORT_KNOBS, HOST_KEYS, KNOBS, Export

__all__ = ["knobs_markdown", "method_yaml", "root_knobs_yaml", "config_yaml", "export_yaml", "help_lines",
           "generated_files", "main"]

_ROOT = Path(__file__).resolve().parents[2]
#: the method group's one-line description (its model's docstring says the same at more length)
_ABOUT = {
    "sft": "LoRA supervised fine-tuning on the passing rows of the train side (Lambert 2025, chapter Rejection Sampling).",
    "grpo": "LoRA GRPO on the tasks with both a pass and a fail; the reward is the first action against gold.",
    "dpo": "LoRA DPO: a pass against a fail per task, length matched.",
    "rm": "A reward model on the pass-vs-fail pairs; wai.reward_model(run) is then a judge.",
}


def _fmt(value: Any) -> str:
    if value is None:
        return "None"
    return fmt_num(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)


def _accepted(meta: Any) -> str:
    """What a knob accepts, in words: its choices (and its pattern), its range, or its pattern alone."""
    if meta.choices is not None:
        listed = ", ".join([repr(c) for c in meta.choices] + ([meta.pattern_hint] if meta.pattern else []))
        return f"a list of {listed}" if meta.many else listed
    if meta.range is None:  # a free-text knob: its pattern is the rule
        return str(meta.pattern_hint)
    interval = knob_interval({"range": meta.range, "open_low": meta.open_low})
    return f"a list of numbers in {interval}" if meta.many else interval


def knobs_markdown() -> str:
    """docs/knobs.md."""
    out = ["# Knobs", "",
           "Generated from the declarations in `whileai/core/_spec_models.py` by `python -m whileai.runner.knobs_doc --write`;",
           "edit the declarations, not this file. A value outside the accepted range is refused naming the range,",
           "the paper's value and the citation. Every knob is a keyword argument of `wai.train` (or a field of the",
           "spec object it takes as `spec=`); `config` marks one its `config=` also takes, `export` an export",
           "setting (in a recipe: `export.NAME`); in a recipe every knob is flat at the root or in a stage.", ""]
    for method, model in SPEC_MODELS.items():
        out += [f"## {method}", "", (model.__doc__ or "").strip().splitlines()[0], "",
                "| knob | given as | default | accepted | paper | why the default | what it does |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for name in knob_fields(model):
            meta = knob_of(model, name)
            paper = _fmt(meta.paper) + (f" ({meta.source})" if meta.source else "") if meta.paper is not None else (
                meta.source or "")
            cells = [f"`{name}`", meta.surface, f"`{_fmt(meta.default)}`", _accepted(meta), paper, meta.reason, meta.help]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    return "\n".join(out)


def method_yaml(method: str) -> str:
    """conf/method/<method>.yaml: the method, and each knob it reads at the root, null.

    Null is "resolve it": the run's one resolution (``resolve_spec``) fills it with the default for the
    chosen base (the kit base's measured SFT recipe on the kit, the declared default elsewhere) or what the
    dataset decides, and ``validate`` prints the value and where it comes from. A number written here would
    count as given and override the base's own default.
    """
    model = SPEC_MODELS[method]
    out = ["# @package _global_", f"# {_ABOUT[method]}",
           "# Generated from whileai/core/_spec_models.py (python -m whileai.runner.knobs_doc --write). Each knob is null:",
           "# the run resolves it for the chosen base (validate shows the value and why; docs/knobs.md).",
           f"method: {method}"]
    for name in knob_fields(model):
        meta = knob_of(model, name)
        if meta.surface != "argument" or name in EXPORT_KNOBS:
            continue  # config keys stay null at the root too (conf/config.yaml); export settings live in export/
        out.append(f"{name}: null")
    return "\n".join(out) + "\n"


#: the lines that open and close conf/config.yaml's generated block of root knobs
ROOT_BLOCK_START = "# >>> root knobs: generated from whileai/core/_spec_models.py (python -m whileai.runner.knobs_doc --write)"
ROOT_BLOCK_END = "# <<< root knobs"
#: the column the block's comments start at, as in the hand-written part of conf/config.yaml
_ROOT_COMMENT_COLUMN = 26


def _readers() -> dict[str, list[str]]:
    """Each knob -> the methods that read it, in SPEC_MODELS' order."""
    seen: dict[str, list[str]] = {}
    for method, model in SPEC_MODELS.items():
        for name in knob_fields(model):
            seen.setdefault(name, []).append(method)
    return seen


def root_knobs_yaml() -> str:
    """conf/config.yaml's block of root knobs: each one null, with the methods that read it and its choices.

    Every knob the schema takes at the root is here, so ``validate recipe=... vllm_mode=server`` needs no
    ``+``: Hydra refuses a command-line key the composed config lacks.
    """
    readers = _readers()
    out = [ROOT_BLOCK_START,
           "# Each knob null (resolved by wai.train for the chosen base), then the methods that read it; what each",
           "# does, its range and the paper's value: docs/knobs.md or `python -m whileai run --help`.",
           "# Knobs: wai.train's keyword arguments."]
    for name in KNOBS:
        out.append(_root_line(name, readers[name]))
    out.append("# Host keys: wai.train's config= (TRAINING_HOST_KEYS).")
    for name in HOST_KEYS:
        out.append(_root_line(name, readers[name]))
    return "\n".join([*out, ROOT_BLOCK_END]) + "\n"


def _root_line(name: str, methods: list[str]) -> str:
    meta = knob_of(SPEC_MODELS[methods[0]], name)
    said = ", ".join(methods) if len(methods) < len(SPEC_MODELS) else "every method"
    shapes = [_yaml_word(c) for c in meta.choices or ()] + ([meta.pattern_hint] if meta.pattern else [])
    if shapes:
        said += ": " + " | ".join(shapes) + (" (a list)" if meta.many else "")
    elif meta.many:
        said += ": a list of numbers"
    return _commented(f"{name}: null", said)


def _commented(line: str, comment: str) -> str:
    """A YAML line with its comment at the column conf/config.yaml's hand-written lines use."""
    return line + " " * max(_ROOT_COMMENT_COLUMN - len(line), 2) + f"# {comment}"


def _yaml_word(choice: Any) -> str:
    """A value as a YAML file writes it (``true`` and ``null``, not Python's ``True`` and ``None``)."""
    if choice is None:
        return "null"
    return str(choice).lower() if isinstance(choice, bool) else str(choice)


def export_yaml(shape: str) -> str:
    """conf/export/<shape>.yaml: the export group's option for the row shape ``shape`` (its ``format``), every
    other setting at its default."""
    about = (Export.__doc__ or "").strip().splitlines()[0]
    out = [f"# {about}", "# Generated from whileai/runner/schema.py's Export (python -m whileai.runner.knobs_doc --write)."]
    for name, field in Export.model_fields.items():
        key = field.alias or name
        value = shape if key == "format" else field.default
        out.append(_commented(f"{key}: {_yaml_word(value)}", str(field.description)))
    return "\n".join(out) + "\n"


def config_yaml(current: str) -> str:
    """conf/config.yaml as ``current`` (its hand-written text) with the root-knob block regenerated.

    Raises ValueError naming the marker lines when ``current`` lacks them (they say where the block goes).
    """
    start, end = current.find(ROOT_BLOCK_START), current.find(ROOT_BLOCK_END)
    if start < 0 or end < start:
        raise ValueError(f"conf/config.yaml has no generated block of root knobs: put the line {ROOT_BLOCK_START!r} "
                         f"and, below it, {ROOT_BLOCK_END!r} where the knobs go, then run "
                         "python -m whileai.runner.knobs_doc --write")
    after = current.index("\n", end) + 1 if "\n" in current[end:] else len(current)
    return current[:start] + root_knobs_yaml() + current[after:]


def help_lines() -> str:
    """One line per knob for ``run --help``: the name as typed on the command line (an export setting as
    ``export.NAME``), the methods that read it, what it does."""
    return "\n".join(f"  {'export.' if name in EXPORT_KNOBS else ''}{name} ({', '.join(methods)}): "
                     f"{knob_of(SPEC_MODELS[methods[0]], name).help}" for name, methods in _readers().items())


def generated_files() -> dict[Path, str]:
    """Each generated file's path and the text its declarations give it."""
    files = {_ROOT / "docs" / "knobs.md": knobs_markdown()}
    for method in SPEC_MODELS:
        files[_ROOT / "conf" / "method" / f"{method}.yaml"] = method_yaml(method)
    config = _ROOT / "conf" / "config.yaml"
    files[config] = config_yaml(config.read_text())
    for shape in get_args(Export.model_fields["format"].annotation):
        files[_ROOT / "conf" / "export" / f"{shape}.yaml"] = export_yaml(shape)
    return files


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in (["--write"], ["--check"]):
        print("usage: python -m whileai.runner.knobs_doc --write | --check", file=sys.stderr)
        return 2
    stale = []
    for path, text in generated_files().items():
        if args == ["--write"]:
            path.write_text(text)
        elif not path.exists() or path.read_text() != text:
            stale.append(path)
    for path in stale:
        print(f"{path} differs from the knob declarations; run python -m whileai.runner.knobs_doc --write",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
