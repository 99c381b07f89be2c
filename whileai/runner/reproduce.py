"""python -m whileai reproduce RUN_ID [key=value ...]: run a stored spec again (what provenance.py recorded).

``--processes N`` and ``--nodes M`` are ``target.processes=N`` and ``target.nodes=M``: batch sizes are
effective, so the run trains what the one-process run trained, divided across the processes.
"""

from __future__ import annotations

import sys

from typing import TYPE_CHECKING, Any

from whileai.runner import defaults

if TYPE_CHECKING:
    from whileai.core.runnerrecord import ConstraintsFile
    from whileai.core.spec import RunSpec

    from whileai.runner.pipeline import ReadRows
    from whileai.runner.schema import RecipeSpec
    from whileai.runner.stages import Stage

__all__ = ["reproduce_main", "matched", "comparison", "verdict_text"]

_USAGE = "usage: python -m whileai reproduce RUN_ID [--processes N] [--nodes M] [key=value ...]"
_HELP = """Run a run's stored spec again (not today's recipe) and say whether the result came back.

  RUN_ID           a run that `python -m whileai run` made
  --processes N    target.processes=N (batch sizes are effective: the same training, divided)
  --nodes M        target.nodes=M
  key=value        an override of the stored spec (no +/~)"""


def matched(original: dict[str, Any], new: dict[str, Any]) -> str:
    """Whether a reproduction's held-out result matches the original's: the same per-prompt outcomes, or how many
    of them differ (and the two rates), read off both runs' ``training`` summaries."""
    from whileai.core.stats import change_text

    from whileai.runner.compare import after_side

    (a, rate_a, _), (b, rate_b, _) = after_side(original), after_side(new)
    rates = change_text(rate_a, rate_b, "->")
    if a is None or b is None:
        return f"held-out after: original {rates} reproduction (no per-prompt outcomes on one of them to compare)"
    if len(a) != len(b):
        return (f"held-out after: {len(a)} prompts in the original, {len(b)} in the reproduction ({rates}): not the "
                "same held-out set")
    differ = sum(x != y for x, y in zip(a, b))
    if differ == 0:
        return f"held-out after: the same per-prompt outcomes as the original on all {len(a)} prompts ({rates})"
    return f"held-out after: {differ} of {len(a)} prompts differ from the original (original -> reproduction {rates})"


def _placement(args: list[str]) -> list[str]:
    """``--processes N`` / ``--nodes M`` (or ``--processes=N``) as the target group's overrides; the rest as given."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        flag, _, value = arg.partition("=")
        if flag in ("--processes", "--nodes"):
            if not value and i + 1 < len(args):
                i += 1
                value = args[i]
            out.append(f"target.{flag[2:]}={value}")
        else:
            out.append(arg)
        i += 1
    return out


def _stored_spec(run_id: str, stored: dict[str, Any], overrides: list[str]
                 ) -> tuple[RecipeSpec, list[tuple[Stage, RunSpec]], ReadRows | None] | None:
    """The stored spec with ``overrides`` applied, validated as ``run`` validates, its stages' resolved specs, and the
    rows read to resolve them (a GRPO stage whose group size and temperature its data decides: ``_rundata``; None
    when none was read); None (every problem printed) when it is refused."""
    from omegaconf import OmegaConf

    from whileai.runner import schema
    from whileai.runner._effective import validated_stages
    from whileai.runner._rundata import RunData
    from whileai.runner.cli import report_problems

    plain = schema.canonical_spec(  # a run recorded before the typed spec reads in canonical form
        OmegaConf.to_container(OmegaConf.merge(OmegaConf.create(stored), OmegaConf.from_dotlist(overrides))))

    def origin(key: str) -> str:
        return "command line" if any(o.startswith(key + "=") for o in overrides) else f"the stored spec of {run_id}"

    data = RunData(origin)
    spec, stages, problems = validated_stages(plain, origin, facts=data.facts)
    if spec is None:
        report_problems(problems)
        return None
    return spec, stages, data.rows


def reproduce_main(argv: list[str] | None = None) -> int:
    """``python -m whileai reproduce RUN_ID [key=value ...]``: run the stored spec again, not today's recipe."""
    import os

    import whileai.simulations as wai

    from whileai.runner._locate import data_root, new_token
    from whileai.runner.pipeline import Context, run_spec
    from whileai.runner.provenance import _differences, constraints_compared, git_state, record_of, versions

    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["--help"], ["-h"]):  # asked for: the usage on stdout, exit 0
        print(f"{_USAGE}\n\n{_HELP}")
        return 0
    if not args or args[0].startswith("-"):
        print(_USAGE, file=sys.stderr)
        return 2
    run_id, overrides = args[0], _placement(args[1:])
    original = wai.get_run(run_id)
    old = record_of(original)
    if old is None or not isinstance(old.get("spec"), dict):
        print(f"{run_id} was not made by the runner (its config has no runner record with a spec); "
              "reproduce takes a run that `python -m whileai run` made", file=sys.stderr)
        return 2
    bad = [o for o in overrides if "=" not in o or o.startswith(("+", "~", "-"))]
    if bad:
        print(f"reproduce takes key=value overrides of the stored spec; not: {' '.join(bad)}", file=sys.stderr)
        return 2
    stored = _stored_spec(run_id, old["spec"], overrides)
    if stored is None:
        return 2
    spec, stages, rows = stored
    token = os.environ.setdefault(defaults.TOKEN_ENV, new_token())
    out = data_root() / defaults.RUNNER_DIR / "runs" / token
    out.mkdir(parents=True, exist_ok=True)
    choices = old.get("choices")  # None where the original did not record them: the reproduction says so too
    context = Context(
        recipe=old.get("recipe"), overrides=[*(old.get("overrides") or []), *overrides],
        choices=choices if isinstance(choices, dict) else None,
        command="python -m whileai reproduce " + " ".join(args), output_dir=out, sweep_id=None,
        expect_lines={k: f"expect.{k} (stored spec of {run_id})" for k in spec.expect.model_fields_set},
        reproduces=run_id, rows=rows,
    )
    new = {"versions": versions(), "git": git_state()}
    changed = _differences(old, new)
    pinned = _pinned_text(*constraints_compared())  # this environment against the committed pins
    print(f"reproducing {run_id} from its stored spec" + (f"; differs: {', '.join(changed)}" if changed
                                                          else "; same versions and commit")
          + (f"; {pinned}" if pinned else ""), file=sys.stderr)
    code = run_spec(spec, context, stages)
    import json

    written = out / defaults.RUN_FILE
    runs = json.loads(written.read_text()).get("runs") if written.exists() else None
    if runs:  # the reproduction's last stage against the original run: did the result come back?
        print("\n".join(comparison(run_id, original, wai.get_run(runs[-1]["id"]))), file=sys.stderr)
    return code


def _pinned_text(differ: dict[str, dict[str, str | None]] | None, compared: ConstraintsFile) -> str | None:
    """What ``reproduce`` says of this environment against the committed pins: the packages that differ, that there
    is no constraints file to compare with (an installed wheel), or None when all match."""
    from whileai.core.stats import NO_CONSTRAINTS_FILE, constraints_text

    return NO_CONSTRAINTS_FILE if not compared["found"] else constraints_text(differ)


def verdict_text(record: dict[str, Any]) -> str:
    """``expect passed``, ``expect failed (stage_gain_min)``, or ``no expect checked``, from a run's summary."""
    expect = (record.get("summary") or {}).get("expect")
    if not isinstance(expect, dict) or not expect.get("lines"):
        return "no expect checked"
    failed = [str(line.get("key")) for line in expect["lines"] if isinstance(line, dict) and not line.get("passed")]
    return f"expect failed ({', '.join(failed)})" if failed else "expect passed"


def comparison(run_id: str, original: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What ``reproduce`` says once the run ends: what the result depends on that differs from the original's
    (base weights, data, CPU kernel path and threads, packages, versions, commit), the two runs head to head on
    the same held-out prompts, and whether the verdict held."""
    from whileai.runner.compare import head_to_head
    from whileai.runner.depends import depends_differences

    lines = [f"reproduce: {matched(original, new)}"]
    differ = depends_differences(original, new)
    lines += ([f"reproduce: what the result depends on that differs from {run_id}:"]
              + [f"  {what}: {a} -> {b}" for what, a, b in differ]
              if differ else ["reproduce: the same base weights, data, CPU kernel path, CPU, threads, packages and commit "
                              "as far as both runs recorded them"])
    lines.append(f"reproduce: head to head: {head_to_head([run_id, str(new.get('id') or 'reproduction')], [original, new])}")
    was, now = verdict_text(original), verdict_text(new)
    held = "held" if was == now else "did NOT hold"
    lines.append(f"reproduce: verdict {held}: the original {was}, the reproduction {now}")
    return lines
