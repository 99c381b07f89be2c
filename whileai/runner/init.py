"""``python -m whileai init NAME``: a recipe for your own data, written from a template into your recipes folder.

The recipe names the method, the base, your rows file and the held-out share, with an ``expect``
block commented out (a first run shows what to expect; uncomment it once you know). It is an
ordinary recipe: ``python -m whileai run --recipes DIR recipe=NAME`` runs it and every value can be
overridden on the command line. An existing file is never overwritten.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from whileai.runner import defaults

__all__ = ["init_main", "recipe_text"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")

_TEMPLATE = """\
# @package _global_
# {name}: {method} on your own rollout rows ({data_note}).
#
#   python -m whileai run{recipes_flag} recipe={name}
#   python -m whileai run{recipes_flag} recipe={name} steps=200 seed=1      # an override example
#   python -m whileai validate{recipes_flag} recipe={name}                  # check it without training
defaults:
  - override /method: {method}
  - override /dataset: jsonl

name: {name}
base_model: {base}{base_note}
{knobs}
dataset:
  path: {path}{path_note}
  grade: passed            # rows carry passed: true/false; first_action grades the first tool call against gold
  holdout: {holdout}              # share of tasks held out: measured before and after, never trained on

# What the run must show; a line that fails makes the run exit non-zero, naming the line.
# Run once first, then uncomment what you expect (the run prints how many held-out prompts
# there are and the smallest gain that can be significant at that count).
# expect:
#   status: done
#   holdout_after_min: 0.5             # held-out pass rate after training at least this
#   holdout_gain_min: 0.1              # after minus before at least this
#   holdout_gain_significant: 0.05     # exact McNemar over the held-out prompts, p below this
"""

#: the kit base's measured SFT recipe (recipes/sft_tooluse.yaml): what a run on the kit needs to learn
_KIT_SFT = """\
learning_rate: ${wai.const:KIT_SFT_LR}   # the kit base's measured LoRA SFT rate (benchmarks/kit_lora_sft.py)
steps: ${wai.const:KIT_SFT_STEPS}        # the kit's measured recipe
batch_size: ${wai.const:KIT_SFT_BATCH}
"""
_METHOD_DEFAULTS = """\
steps: null                # null: the method's default (TRAINING_KNOBS); set it to train longer or shorter
learning_rate: null        # null: the method's default for LoRA (TRAINING_KNOBS)
"""


def recipe_text(name: str, method: str, data: str | None, base: str | None, holdout: float,
                recipes_flag: str = "") -> str:
    """The recipe ``init`` writes (see the module docstring)."""
    kit = base is None
    return _TEMPLATE.format(
        name=name, method=method, holdout=holdout, recipes_flag=recipes_flag,
        data_note=data or "the rows file is set on the command line: dataset.path=FILE",
        base="null" if kit else base,
        base_note="                # null: the kit's tiny demo base; name a Hugging Face model or a local folder" if kit
        else "",
        knobs=_KIT_SFT if kit and method == "sft" else _METHOD_DEFAULTS,
        path=data or "???", path_note="" if data else "                  # required: your rows file (docs/rows.md)",
    )


def _recipes_dir(given: str | None) -> Path:
    """``--recipes DIR``, else WHILEAI_RECIPES, else ``recipes/`` in the current folder."""
    chosen = given or os.environ.get(defaults.RECIPES_ENV) or "recipes"
    return Path(chosen).expanduser().resolve()


def init_main(argv: list[str] | None = None) -> int:
    """``python -m whileai init NAME [--data FILE] [--method M] [--base MODEL] [--holdout F] [--recipes DIR]``."""
    from whileai.core.defaults import TRAIN_METHODS

    p = argparse.ArgumentParser(prog="python -m whileai init",
                                description="Write a recipe for your own data into your recipes folder.")
    p.add_argument("name", help="the recipe's name: letters, digits, _ and - (the file is NAME.yaml)")
    p.add_argument("--data", help="your JSONL file of rollout rows (docs/rows.md)")
    p.add_argument("--method", default="sft", help=f"one of {', '.join(TRAIN_METHODS)} (default sft)")
    p.add_argument("--base", help="the base model: a Hugging Face name or a local folder (default: the kit's tiny base)")
    p.add_argument("--holdout", type=float, default=None,
                   help=f"share of tasks held out for the before/after (default {defaults.INIT_HOLDOUT})")
    p.add_argument("--recipes", help=f"the folder to write into (default: ${defaults.RECIPES_ENV}, else ./recipes)")
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    holdout = defaults.INIT_HOLDOUT if args.holdout is None else args.holdout
    problems = []
    if not _NAME.match(args.name):
        problems.append(f"NAME {args.name!r} is not a recipe name; use letters, digits, _ and - (up to 64), "
                        "e.g. my_agent_sft")
    if args.method not in TRAIN_METHODS:
        problems.append(f"--method {args.method!r} is not a method; accepted: {', '.join(TRAIN_METHODS)}")
    if not 0 < holdout < 1:
        problems.append(f"--holdout {holdout!r} is outside (0, 1); pass the share of tasks to hold out, e.g. 0.2")
    data = None
    if args.data is not None:
        found = Path(args.data).expanduser()
        if found.is_dir():
            problems.append(f"--data {args.data!r} is a folder, not a file; pass one JSONL file of rollout rows in it")
        elif not found.is_file():
            problems.append(f"--data {args.data!r} does not exist (resolved against {Path.cwd()}); pass your JSONL "
                            "file of rollout rows")
        data = str(found.resolve())
    folder = _recipes_dir(args.recipes)
    target = folder / f"{args.name}.yaml"
    if target.exists():
        problems.append(f"{target} already exists and init never overwrites a file: pick another NAME, or edit that "
                        f"recipe (python -m whileai run --recipes {folder} recipe={args.name} runs it)")
    if problems:
        print(f"python -m whileai init: {len(problems)} problem(s); nothing was written:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2
    env = os.environ.get(defaults.RECIPES_ENV)
    searched = env is not None and Path(env).expanduser().resolve() == folder  # the runner looks there already
    flag = "" if searched else f" --recipes {folder}"
    text = recipe_text(args.name, args.method, data, args.base, holdout, flag)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with open(target, "x", encoding="utf-8") as f:  # "x": a file made meanwhile is not overwritten either
            f.write(text)
    except FileExistsError:
        print(f"python -m whileai init: {target} already exists; nothing was written", file=sys.stderr)
        return 2
    print(f"wrote {target}\n  check it: python -m whileai validate{flag} recipe={args.name}\n"
          f"  run it:   python -m whileai run{flag} recipe={args.name}"
          + ("" if data else "  dataset.path=FILE"))
    return 0
