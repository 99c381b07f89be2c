"""Every committed recipe's ``expect:`` block is settled, line by line, as its figures say it should be.

Recipes are found by walking ``recipes/`` (so a recipe added later is checked too). Each one that can run
here runs once through ``python -m whileai run RECIPE --json`` at CI-small settings (the kit's tiny random
base, a few tasks, two steps per stage: ``_SMALL`` and ``_OVERRIDES``), and every line of its expect
block must be in the verdict, passed or failed exactly as the run's measured figures say: held-out
before and after read back from the run's record, and for ``stage_gain_min`` the after of the stage
the last one continued, read from that stage's own record. At these settings most lines fail (a
tiny random base learns nothing in two steps); what is checked is that each verdict is the right one
for the figures, and that the exit code follows (0 when all hold, 3 when one fails). The six runs took
14 minutes of wall time on the 2-core machine at load ~10 (one GRPO recipe alone about 2.5 minutes), most of
it each run's start and the jobs' imports; the settling-logic tests take seconds.

Two folders are checked for their settling logic only (the block composes, every key is an expect
key, and each line settles right on figures that meet it and on figures that miss it):

- ``recipes/gpu/``: Qwen3 bases on Modal's GPUs; nothing here can load or reach them.
- ``recipes/real/``: SmolLM2-135M on BFCL (about 18 CPU-s a step at batch 4, and before/after over 120
  held-out questions), one of them on Modal; ``tests/test_real_base.py`` runs that base's plumbing.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import yaml

from _runner_helpers import ROOT, TINY, record, runner_record, runs_file, tiny_base, whileai
from whileai.runner.expect import KEYS, verdict

#: folders whose recipes cannot run here (see the module docstring): settling logic only
_LOGIC_ONLY = ("gpu", "real")
#: what every recipe's CI-small run adds (each of its stages also runs two steps: ``_small``)
_SMALL = TINY
#: held-out rows of a stage, by its method: a reward model's held-out pairs need more rows than a policy's prompts
_STAGE_HOLDOUT = {"rm": 16}
#: what a recipe of the method adds: GRPO samples two short completions per prompt, and its monitor looks at
#: every step, on few prompts
_BY_METHOD = {"grpo": ["generations=2", "max_completion_length=16", "monitor.n_prompts=4", "monitor.every=1"]}
#: per recipe, what its CI-small run needs beyond those (a new recipe runs with the defaults above)
_OVERRIDES: dict[str, list[str]] = {
    # the random tiny base never writes a passing reply, so its own samples give no pair: the data's pairs
    "dpo_tooluse": ["pair_source=rows"],
    # nor a passing episode, so its samples mix no prompt for the start filter to keep: every prompt trains
    "agent_tooluse": ["prompt_filter_pool=null"],
    # nor an episode that claims success, so brief_success pays every sample 0 and the filter keeps nothing either
    "hack/agent_calls": ["prompt_filter_pool=null"],
}


def _recipes() -> list[tuple[str, dict[str, Any]]]:
    """Every recipe under recipes/ with an expect block: (its name as recipe= takes it, its YAML)."""
    found = []
    for path in sorted((ROOT / "recipes").rglob("*.yaml")):
        text = yaml.safe_load(path.read_text())
        if isinstance(text, dict) and text.get("expect"):
            found.append((path.relative_to(ROOT / "recipes").with_suffix("").as_posix(), text))
    return found


RECIPES = _recipes()
RUNNABLE = [name for name, _ in RECIPES if name.split("/")[0] not in _LOGIC_ONLY]
LOGIC_ONLY = [name for name, _ in RECIPES if name.split("/")[0] in _LOGIC_ONLY]


def _asked(expect: dict[str, Any]) -> dict[str, Any]:
    """The lines an expect block sets (``no_alarm: false`` and empty ones ask nothing)."""
    return {k: v for k, v in expect.items() if v is not None and v is not False and v != []}


def _holds(key: str, want: Any, figures: dict[str, Any]) -> bool:
    """Whether line ``key: want`` holds for ``figures``: the rules of whileai/runner/expect.py's docstring."""
    before, after, start = figures.get("before"), figures.get("after"), figures.get("previous_after")
    if key == "status":
        return bool(figures.get("status") == want)
    if key == "holdout_after_min":
        return after is not None and after >= want
    if key == "holdout_gain_min":
        return None not in (before, after) and after - before >= want
    if key == "holdout_gain_significant":
        p = ((figures.get("stats") or {}).get("paired") or {}).get("p")
        return p is not None and None not in (before, after) and after > before and p < want
    if key == "stage_gain_min":
        return None not in (start, after) and after - start >= want
    if key == "no_alarm":
        return not (want and figures.get("alarms"))
    if key == "reward_over_exact_significant":
        versus = figures.get("reward_vs_exact")
        return isinstance(versus, dict) and versus["gap_change"] > 0 and versus["p"] < want
    if key in ("alarm", "alarm_look_max"):  # an alarm of the kinds ``alarm`` names (any kind when unset), by a look
        kinds = figures.get("alarm_kinds") or []
        fired = [a for a in figures.get("alarms") or [] if isinstance(a, dict) and (not kinds or a.get("kind") in kinds)]
        return bool(fired) if key == "alarm" else any(int(a.get("evaluation") or 0) <= want for a in fired)
    if key == "delta_verdict_not":
        return figures.get("verdict") is not None and figures["verdict"] not in want
    raise AssertionError(f"{key}: a new expect key; add its rule to _holds")


def _method(yaml_text: dict[str, Any]) -> str:
    """The recipe's method: its ``override /method`` choice, else the root config's."""
    for item in yaml_text.get("defaults") or []:
        if isinstance(item, dict) and "override /method" in item:
            return str(item["override /method"])
    return str(yaml_text.get("method") or "sft")


def _small(name: str, yaml_text: dict[str, Any]) -> list[str]:
    """The recipe's CI-small overrides: _SMALL, two steps per stage, its method's and its own (_OVERRIDES)."""
    stages = []
    for stage, node in (yaml_text.get("stages") or {}).items():
        rows = _STAGE_HOLDOUT.get(str(node.get("method")), 4)
        stages += [f"stages.{stage}.steps=2", f"stages.{stage}.holdout_rows={rows}"]
    return [*_SMALL, *stages, *_BY_METHOD.get(_method(yaml_text), []), *_OVERRIDES.get(name, [])]


@pytest.fixture(scope="module")
def ran():
    """``ran(recipe)``: the recipe's one CI-small run (made on first use): its process, closing summary and records."""
    done: dict[str, dict[str, Any]] = {}

    def get(name: str) -> dict[str, Any]:
        if name not in done:
            token = "expect_" + name.replace("/", "_")
            yaml_text = dict(RECIPES)[name]
            args = [f"recipe={name}", f"base_model={tiny_base()}", *_small(name, yaml_text), "--json"]
            proc = whileai("run", *args, token=token)
            lines = proc.stdout.strip().splitlines()
            done[name] = {"proc": proc, "closing": json.loads(lines[-1]) if lines else {}, "args": args,
                          "runs": runs_file(token)["runs"] if proc.returncode in (0, 3) else []}
        run = done[name]  # kept whatever it showed: a run that ended without a verdict is not run again
        proc = run["proc"]
        assert proc.returncode in (0, 3), f"{name} did not end with a verdict:\n{proc.stdout}\n{proc.stderr[-4000:]}"
        return run

    return get


def _figures(run: dict[str, Any]) -> dict[str, Any]:
    """The last stage's figures as measured, read from the records (not from the runner's own outcome)."""
    runs = run["runs"]
    last = record(runs[-1]["id"])
    training = last["summary"].get("training") or {}
    kept = runner_record(runs[-1]["id"])
    previous = kept.get("previous_run")
    if training.get("method") == "rm":  # a reward model's start is a policy: its pass rate is not a pair accuracy
        previous = None
    start = (record(previous)["summary"].get("training") or {}).get("after") if previous else None
    monitor, delta = last["summary"].get("monitor"), last["summary"].get("delta")
    return {"status": last["status"], "before": training.get("before"), "after": training.get("after"),
            "stats": training.get("stats"), "previous_after": start, "previous_run": previous,
            "alarms": (monitor.get("alarms") or []) if isinstance(monitor, dict) else [],
            "verdict": delta.get("verdict") if isinstance(delta, dict) else None,
            "reward_vs_exact": training.get("reward_vs_exact"), "alarm_kinds": _kinds(kept["spec"]["expect"])}


def _kinds(expect: dict[str, Any]) -> list[str]:
    wanted = expect.get("alarm")
    return [wanted] if isinstance(wanted, str) else list(wanted or [])


def test_recipes_are_found_by_walking_the_tree():
    names = [name for name, _ in RECIPES]
    assert {"sft_tooluse", "grpo_tooluse", "dpo_tooluse", "rm_tooluse"} <= set(RUNNABLE), names
    assert any(n.startswith("gpu/") for n in LOGIC_ONLY) and any(n.startswith("real/") for n in LOGIC_ONLY), names
    assert set(_OVERRIDES) <= set(RUNNABLE), "an override names a recipe that no longer runs here"


@pytest.mark.parametrize("name", [name for name, _ in RECIPES])
def test_every_expect_key_is_known_and_the_block_composes(name):
    from test_runner_validate import compose_recipe

    asked = _asked(dict(RECIPES)[name]["expect"])
    assert set(asked) <= set(KEYS), f"{name}: {sorted(set(asked) - set(KEYS))} not expect keys; accepted: {KEYS}"
    plain, problems = compose_recipe(name)
    assert problems == [], [str(p) for p in problems]
    assert set(_asked(plain["expect"])) == set(asked), "the composed expect block is the recipe's"


@pytest.mark.parametrize("name", [name for name, _ in RECIPES])
def test_each_line_settles_on_figures_that_meet_it_and_that_miss_it(name):
    """The settling logic alone, for every recipe (the only check the gpu/ and real/ recipes get here)."""
    asked = _asked(dict(RECIPES)[name]["expect"])
    kinds = _kinds(asked)
    wanted_alarms = [{"kind": kind, "evaluation": 1, "step": 10} for kind in kinds or ["length"]]
    met = {"status": "done", "before": 0.0, "after": 1.0, "previous_after": 0.0, "previous_run": "run_start",
           "alarms": wanted_alarms if {"alarm", "alarm_look_max"} & set(asked) else [], "verdict": "improved",
           "stats": {"paired": {"p": 0.0, "improved": 40, "worsened": 0}}, "alarm_kinds": kinds,
           "reward_vs_exact": _versus(gap_change=0.5, p=0.001)}
    missed = {"status": "failed", "before": 0.5, "after": 0.0, "previous_after": 0.5, "previous_run": "run_start",
              "verdict": "over-optimized", "alarms": [{"kind": "not_" + "_".join(kinds) if kinds else "length",
                                                        "evaluation": 10_000, "step": 99}],
              "stats": {"paired": {"p": 1.0, "improved": 0, "worsened": 20}}, "alarm_kinds": kinds,
              "reward_vs_exact": _versus(gap_change=-0.5, p=1.0)}
    for figures, want in ((met, True), (missed, False)):
        lines = verdict(asked, figures, {})["lines"]
        assert [line["key"] for line in lines] == [k for k in KEYS if k in asked]
        for line in lines:
            assert line["passed"] is _holds(line["key"], line["want"], figures) is want, (name, line)
    absent = {"status": "done"}  # a run that measured nothing: every figure line fails, saying so
    for line in verdict(asked, absent, {})["lines"]:
        assert line["passed"] is _holds(line["key"], line["want"], absent), (name, line)


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNABLE)
def test_every_expect_line_is_in_the_verdict_as_the_figures_say(ran, name):
    run = ran(name)
    proc, closing = run["proc"], run["closing"]
    assert proc.returncode in (0, 3), proc.stdout + proc.stderr[-4000:]
    assert closing["status"] == "done", closing
    asked = _asked(runner_record(closing["run"])["spec"]["expect"])
    assert set(asked) == set(_asked(dict(RECIPES)[name]["expect"])), "the CI-small run keeps every line of the block"
    lines = closing["expect"]["lines"]
    assert [line["key"] for line in lines] == [k for k in KEYS if k in asked], lines
    figures = _figures(run)
    for line in lines:
        assert line["passed"] is _holds(line["key"], line["want"], figures), (line, figures)
    assert closing["expect"]["passed"] is all(line["passed"] for line in lines)
    assert proc.returncode == (0 if closing["expect"]["passed"] else 3)
    kept = record(closing["run"])["summary"]["expect"]  # the verdict lives on the run too
    assert [(k["key"], k["passed"]) for k in kept["lines"]] == [(k["key"], k["passed"]) for k in lines]


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNNABLE)
def test_the_figures_the_run_printed_are_the_measured_ones(ran, name):
    run = ran(name)
    closing, figures = run["closing"], _figures(run)
    held = closing["held_out"]
    for key in ("before", "after", "previous_after"):
        assert _same(held[key], figures[key]), (key, held, figures)
    for line in closing["expect"]["lines"]:
        shown = {"holdout_after_min": ["after"], "holdout_gain_min": ["before", "after"],
                 "holdout_gain_significant": ["before", "after"], "stage_gain_min": ["previous_after", "after"]}
        for key in shown.get(line["key"], []):
            assert f"{figures[key]:.3f}" in line["seen"], (line, figures)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in RUNNABLE if "stage_gain_min" in _asked(dict(RECIPES)[n]["expect"])])
def test_stage_gain_compares_the_last_stage_with_the_stage_it_continued(ran, name):
    """The last stage's start is its init_from run (GRPO's SFT stage), never nothing."""
    run = ran(name)
    figures = _figures(run)
    policies = [r for r in run["runs"][:-1] if r["method"] != "rm"]
    assert figures["previous_run"] == policies[-1]["id"], run["runs"]
    assert figures["previous_after"] is not None
    line = next(line for line in run["closing"]["expect"]["lines"] if line["key"] == "stage_gain_min")
    assert "previous stage None" not in line["seen"] and "gain None" not in line["seen"], line


def _versus(gap_change: float, p: float) -> dict[str, Any]:
    """A ``training["reward_vs_exact"]`` measurement: the reward's and the exact judge's before and after."""
    return {"gap_change": gap_change, "p": p, "reward_before": 0.2, "reward_after": 0.2 + max(gap_change, 0),
            "exact_before": 0.2, "exact_after": 0.2, "prompts": 40, "reward_rose_more": 30 if gap_change > 0 else 0,
            "task_rose_more": 0 if gap_change > 0 else 30}


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b)


def test_the_rule_table_covers_every_expect_key():
    for key in KEYS:
        _holds(key, [] if key == "delta_verdict_not" else 0.0, {})


def test_a_last_stage_that_continued_nothing_fails_stage_gain_min_saying_why():
    line = verdict({"stage_gain_min": 0.05}, {"status": "done", "after": 0.6, "previous_after": None}, {})["lines"][0]
    assert line["passed"] is False and "continued no earlier stage" in line["seen"] and "unset" in line["seen"]

