"""What is written about the knobs, generated from their declarations (``whileai.core.spec``).

- ``docs/knobs.md``: every knob per method, its default and the reason, its range or choices,
  the paper's value and the citation, its help;
- ``conf/method/<method>.yaml``: the method group, each knob the method reads at the root, null
  (resolved for the chosen base when the run is resolved);
- ``run --help``: one line per knob (:func:`help_lines`).

    python -m whileai.runner.knobs_doc --write     # regenerate the files
    python -m whileai.runner.knobs_doc --check     # exit 1 when a file differs from its declarations

``tests/test_knob_docs.py`` runs the check, so a knob changed in one place only fails CI.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from whileai.core.knobs import fmt_num, knob_interval
from whileai.core.spec import SPEC_MODELS, knob_fields, knob_of

from .schema import EXPORT_KNOBS

__all__ = ["knobs_markdown", "method_yaml", "help_lines", "generated_files", "main"]

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
    if meta.choices is not None:
        listed = ", ".join(repr(c) for c in meta.choices)
        return f"a list of {listed}" if meta.many else listed
    return knob_interval({"range": meta.range, "open_low": meta.open_low})


def knobs_markdown() -> str:
    """docs/knobs.md."""
    out = ["# Knobs", "",
           "Generated from the declarations in `whileai/core/spec.py` by `python -m whileai.runner.knobs_doc --write`;",
           "edit the declarations, not this file. A value outside the accepted range is refused naming the range,",
           "the paper's value and the citation. Where a knob comes from: `argument` is a keyword argument of",
           "`wai.train`, `config` a key of its `config=`, `export` an export setting (in a recipe: `export.NAME`);",
           "in a recipe every knob is flat at the root or in a stage.", ""]
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
           "# Generated from whileai/core/spec.py (python -m whileai.runner.knobs_doc --write). Each knob is null:",
           "# the run resolves it for the chosen base (validate shows the value and why; docs/knobs.md).",
           f"method: {method}"]
    for name in knob_fields(model):
        meta = knob_of(model, name)
        if meta.surface != "argument" or name in EXPORT_KNOBS:
            continue  # config keys stay null at the root too (conf/config.yaml); export settings live in export/
        out.append(f"{name}: null")
    return "\n".join(out) + "\n"


def help_lines() -> str:
    """One line per knob for ``run --help``: name, the methods that read it, what it does."""
    seen: dict[str, tuple[list[str], str]] = {}
    for method, model in SPEC_MODELS.items():
        for name in knob_fields(model):
            methods, text = seen.get(name, ([], knob_of(model, name).help))
            seen[name] = ([*methods, method], text)
    return "\n".join(f"  {name} ({', '.join(methods)}): {text}" for name, (methods, text) in seen.items())


def generated_files() -> dict[Path, str]:
    """Each generated file's path and the text its declarations give it."""
    files = {_ROOT / "docs" / "knobs.md": knobs_markdown()}
    for method in SPEC_MODELS:
        files[_ROOT / "conf" / "method" / f"{method}.yaml"] = method_yaml(method)
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
