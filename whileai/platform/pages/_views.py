"""What the pages show, read from run records: pure functions, no database, no HTML.

A run's record is read defensively: its ``config`` is whatever the client sent
(the keyword arguments of ``wai.train``, or a runner's resolved spec with its
overrides, recipe, command, versions and sweep id) and its ``summary`` whatever
the job and the monitor noted. Each reader below looks in the places a value is
known to live and answers None when it is absent, so a page draws what is
there and says what is not.
"""

from __future__ import annotations

import json
import re
from typing import Any

from whileai.core.stats import (
    CONSTRAINTS_NOT_RECORDED,
    certainty_text,
    constraints_text,
    constraints_words,
    group_lines,
    rate_text,
    significance_word,
    status_text,
)
from whileai.platform.pages._shapes import (
    AlarmView,
    ChartGroup,
    ConfigParts,
    ConfigRow,
    ExpectLineView,
    ExpectView,
    Facts,
    HeadlineItem,
    HeldOutPair,
    ListRow,
    MonitorView,
    StageView,
)
from whileai.platform.store.records import RunRecord

__all__ = [
    "config_parts", "facts", "headline", "chart_groups", "flatten", "compare_config", "sweep_knobs",
    "reproduce_commands", "monitor_view", "list_row", "expect_view", "constraints_text",
]

#: config keys that describe how a run was made rather than what it trains (left out of sweep knobs)
_META_KEYS = ("command", "versions", "git", "overrides", "recipe", "sweep", "sweep_id", "hydra", "output_dir",
              "run_id", "init_from", "stages", "export_report", "reproduces", "constraints_differ",
              "constraints_file")


def _get(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _first_given(*values: Any) -> Any:
    """The first of ``values`` that is neither None nor ""."""
    return next((v for v in values if v is not None and v != ""), None)


def _runner(config: dict[str, Any]) -> dict[str, Any] | None:
    found = config.get("runner") or _get(config, "extra", "runner")  # a record of before the runner's key was typed
    return found if isinstance(found, dict) else None


def config_parts(record: RunRecord) -> ConfigParts:
    """The config split the way the page shows it: ``spec`` (resolved), ``overrides``, ``recipe``, ``command``...

    A run made by the runner carries its record under ``config["runner"]`` (spec,
    overrides, recipe, command, versions, git, sweep_id, stages); a run made
    another way may carry the same fields at the top of its config, or none.
    """
    config = record.get("config")
    if not isinstance(config, dict):
        return {"spec": config, "overrides": None, "recipe": None, "command": None, "versions": None,
                "git": None, "constraints_differ": None, "constraints_text": None,
                "constraints_words": CONSTRAINTS_NOT_RECORDED, "sweep": None, "init_from": None, "stage": None,
                "runner": False}
    runner = _runner(config)
    source = runner if runner is not None else config
    if isinstance(source.get("spec"), dict):
        spec = source["spec"]
    else:
        spec = {k: v for k, v in config.items() if k not in ("runner", "extra")} if runner else config
    command = source.get("command")
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    sweep = _first_given(_get(source, "sweep", "id"), source.get("sweep_id"), source.get("sweep"),
                         _get(spec, "sweep", "id"), _get(spec, "sweep_id"))
    differ = source.get("constraints_differ")
    stage: StageView | None = None
    if runner is not None and runner.get("stage") is not None:
        stage = {"name": runner.get("stage"), "index": runner.get("stage_index"), "stages": runner.get("stages"),
                 "previous_run": runner.get("previous_run")}
    return {
        "spec": spec,
        "overrides": source.get("overrides"),
        "recipe": _first_given(source.get("recipe"), _get(spec, "recipe")),
        "command": command if isinstance(command, str) else None,
        "versions": source.get("versions"),
        "git": source.get("git"),
        # the packages that ran at another version than constraints.txt pins, and that said in words
        "constraints_differ": differ if isinstance(differ, dict) else None,
        "constraints_text": constraints_text(differ),
        # all of it in words: none, the packages, no constraints.txt to compare with, or not recorded
        "constraints_words": constraints_words(source) or CONSTRAINTS_NOT_RECORDED,
        "sweep": sweep if isinstance(sweep, (str, int)) else None,
        "init_from": _first_given(config.get("init_from"), source.get("previous_run"), _get(spec, "init_from"),
                                  _get(record.get("summary"), "init_from")),
        "reproduces": source.get("reproduces"),
        "stage": stage,
        "runner": runner is not None and isinstance(runner.get("spec"), dict),
    }


_HOLDOUT_LABELS = {"pair_accuracy": "held-out pair accuracy", "row_accuracy": "held-out row accuracy",
                   "loss": "held-out loss", "episode_pass_rate": "held-out episode pass rate"}


def headline(summary: Any) -> list[HeadlineItem]:
    """Held-out before and after: ``[{"label", "before", "after", "better", "metric"}]`` (loss: lower is better)."""
    if not isinstance(summary, dict):
        return []
    training: dict[str, Any] = summary["training"] if isinstance(summary.get("training"), dict) else {}
    metric = training.get("metric") or "pass_rate"
    found: list[HeldOutPair] = []
    if "holdout_before" in summary or "holdout_after" in summary:
        # a reward model's is an accuracy; an episode's pass rate is one, of whole episodes
        rate = metric if metric in ("pair_accuracy", "row_accuracy", "episode_pass_rate") else "pass_rate"
        found.append({"label": _HOLDOUT_LABELS.get(rate, "held-out pass rate"), "metric": rate,
                      "before": summary.get("holdout_before"), "after": summary.get("holdout_after"),
                      "better": "higher"})
    if "holdout_loss_before" in summary or "holdout_loss_after" in summary:
        found.append({"label": "held-out loss", "metric": "loss", "before": summary.get("holdout_loss_before"),
                      "after": summary.get("holdout_loss_after"), "better": "lower"})
    if not found and ("before" in training or "after" in training):
        lower = metric == "loss"
        found.append({"label": _HOLDOUT_LABELS.get(metric, "held-out pass rate"), "metric": metric,
                      "before": training.get("before"), "after": training.get("after"),
                      "better": "lower" if lower else "higher"})
    kept: dict[str, Any] = summary["training"] if isinstance(summary.get("training"), dict) else {}
    stats = kept.get("stats") if isinstance(kept.get("stats"), dict) else None
    items: list[HeadlineItem] = []
    for pair in found:
        b, a = pair["before"], pair["after"]
        # how sure: n, the Wilson interval and the paired test the job kept (a loss has no per-prompt outcomes)
        sure = stats if pair["metric"] != "loss" else None
        items.append({
            **pair,
            "change": a - b if _is_num(a) and _is_num(b) else None,
            # the numbers as text, by the one formatter the terminal uses too (0.900, never 0.9 here and 0.900 there)
            "before_text": rate_text(b), "after_text": rate_text(a),
            "n": (sure or {}).get("n") or (kept.get("holdout_prompts") if pair["metric"] != "loss" else None),
            "stats": sure,
            "certainty": certainty_text(sure),
            # the paired test's verdict in words, shown beside the figure and colouring it (not the sign of the change)
            "significance": significance_word(sure),
            # per category where the held-out rows name one (a BFCL mix): the lines the terminal prints
            "groups": group_lines(kept.get("by_group")) if pair["metric"] != "loss" else [],
        })
    return items


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _alarms(summary: Any) -> list[dict[str, Any]]:
    alarms = _get(summary, "monitor", "alarms")
    return [a for a in alarms if isinstance(a, dict)] if isinstance(alarms, list) else []


def facts(record: RunRecord) -> Facts:
    """The one-line facts of a run: method, recipe, sweep, held-out, verdict, alarms, cost, times."""
    summary: dict[str, Any] = record["summary"] if isinstance(record.get("summary"), dict) else {}
    parts = config_parts(record)
    spec = parts["spec"]
    kind = record.get("kind")
    config: dict[str, Any] = record["config"] if isinstance(record.get("config"), dict) else {}
    method = _first_given(config.get("method"), _get(spec, "method"), _get(summary, "training", "method"),
                          kind if kind not in (None, "hosted") else None)
    if isinstance(method, dict):
        method = _first_given(method.get("name"), method.get("method"))
    head = headline(summary)
    end = record.get("finished_at") or record.get("updated_at")
    return {
        "method": method if isinstance(method, str) else None,
        "recipe": parts["recipe"] if isinstance(parts["recipe"], str) else None,
        "sweep": parts["sweep"],
        "holdout": head[0] if head else None,
        "verdict": _get(summary, "delta", "verdict"),
        "expect": expect_view(_get(summary, "expect")),
        "status_text": status_text(record.get("status"), _get(summary, "expect")),
        "alarms": len(_alarms(summary)),
        "phase": summary.get("phase") if isinstance(summary.get("phase"), str) else None,
        # continued from a checkpoint (python -m whileai resume, a Modal retry): how many times, from which step
        "resumed": {"times": summary["resumed"].get("times"), "from_step": summary["resumed"].get("from_step")}
        if isinstance(summary.get("resumed"), dict) else None,
        "started": record.get("created_at"),
        "duration_s": (end - record["created_at"]) if end and record.get("created_at") else None,
    }


def expect_view(expect: Any) -> ExpectView | None:
    """The runner's expect verdict as the pages show it: ``{"passed", "failed", "lines"}``, None when none was checked.

    Each line keeps its key, wanted value, what the run showed, passed or not, and where it was
    written (``recipes/x.yaml:12``); ``failed`` counts the lines that did not hold.
    """
    if not isinstance(expect, dict) or not isinstance(expect.get("lines"), list) or not expect["lines"]:
        return None
    lines: list[ExpectLineView] = [
        {"key": line.get("key"), "want": line.get("want"), "seen": line.get("seen"), "passed": line.get("passed"),
         "where": line.get("where")}
        for line in expect["lines"] if isinstance(line, dict)]
    return {"passed": bool(expect.get("passed")), "failed": sum(not line["passed"] for line in lines),
            "lines": lines, "recipe": expect.get("recipe") if isinstance(expect.get("recipe"), str) else None}


def list_row(record: RunRecord) -> ListRow:
    """A runs-list row: the record's own fields a list shows, plus its facts (no config or summary)."""
    shown = facts(record)
    row: ListRow = {
        "id": record.get("id"), "name": record.get("name"), "status": record.get("status"), "kind": record.get("kind"),
        "dataset": record.get("dataset"), "step": record.get("step"), "total_steps": record.get("total_steps"),
        "created_at": record.get("created_at"), "updated_at": record.get("updated_at"),
        "finished_at": record.get("finished_at"), "cost_usd": record.get("cost_usd"),
        "cost_basis": record.get("cost_basis"), "error": (record.get("error") or "")[:300] or None,
        **shown,
    }
    expect = shown["expect"]
    if expect:  # the list shows the verdict only; the run's page shows each line
        row["expect"] = {"passed": expect["passed"], "failed": expect["failed"]}
    return row


# --------------------------------------------------------------------------- charts

_GROUPS: list[tuple[str, str, Any]] = [
    ("loss", "Loss (train and eval)", lambda n: n in ("loss", "eval_loss", "train_loss", "train/loss", "eval/loss")
     or (n.endswith("_loss") and "/" not in n)),
    ("lr", "Learning rate", lambda n: n in ("lr", "learning_rate") or n.endswith("/learning_rate")),
    ("grad_norm", "Grad norm", lambda n: n == "grad_norm" or n.endswith("/grad_norm")),
    ("reward", "Rewards", lambda n: (n == "reward" or n.startswith("rewards/") or n.startswith("reward/"))
     and not n.endswith("std")),
    ("reward_std", "Reward spread (std)", lambda n: n.startswith("reward") and n.endswith("std")),
    ("kl", "KL to the reference", lambda n: n == "kl" or (n.endswith("/kl") and not n.startswith("monitor/"))),
    ("lengths", "Completion lengths", lambda n: n.startswith("completions/") and "length" in n),
]
_MONITOR = ("monitor/proxy", "monitor/gold")


def chart_groups(names: list[str]) -> list[ChartGroup]:
    """Charts for these metric names, loss first: ``[{"id", "title", "metrics"}]``.

    Loss (train and eval on one chart), learning rate, grad norm, rewards, KL and
    completion lengths come first, in that order; every other metric gets its
    own chart after them, in name order. The HackMonitor's proxy and gold are
    drawn by the monitor section instead.
    """
    left = [n for n in sorted(names) if n not in _MONITOR]
    charts: list[ChartGroup] = []
    for gid, title, wanted in _GROUPS:
        picked = [n for n in left if wanted(n)]
        if gid == "loss":
            picked.sort(key=lambda n: (n != "loss", n))
        if picked:
            charts.append({"id": gid, "title": title, "metrics": picked})
            left = [n for n in left if n not in picked]
    for n in left:
        charts.append({"id": "m:" + n, "title": n, "metrics": [n]})
    return charts


def _armed_notes(armed: dict[str, str]) -> list[str]:
    """Which alarms the monitor armed, and why each other one was off, one line each (the run's own words)."""
    on = [kind for kind, state in armed.items() if state == "armed"]
    notes = [f"Alarms armed: {', '.join(on) if on else 'none'}."]
    for kind, state in armed.items():
        if state != "armed":
            label = "KL" if kind == "kl" else kind.replace("_", " ").capitalize()
            notes.append(f"{label}: off, {state.removeprefix('off: ')}.")
    return notes


def monitor_view(summary: Any, names: list[str]) -> MonitorView | None:
    """The HackMonitor section: which series hold proxy and gold, its curve, alarms with step and text."""
    monitor = _get(summary, "monitor")
    logged = [n for n in _MONITOR if n in names]
    if not isinstance(monitor, dict) and not logged:
        return None
    monitor = monitor if isinstance(monitor, dict) else {}
    from whileai.core.alarms import alarm_meaning

    alarms: list[AlarmView] = [{"step": a.get("step"), "kind": a.get("kind"), "meaning": alarm_meaning(a.get("kind")),
               "text": str(a.get("message") or a.get("kind") or "alarm")} for a in _alarms(summary)]
    curve: list[Any] = monitor["curve"] if isinstance(monitor.get("curve"), list) else []
    notes = []
    stopped = monitor.get("stopped")
    if isinstance(stopped, dict):
        notes.append(f"Training stopped at step {stopped.get('step')} on the {stopped.get('kind')} alarm: "
                     f"{stopped.get('reason')}.")
    armed = monitor.get("armed") if isinstance(monitor.get("armed"), dict) else None
    if armed is not None and all(isinstance(v, str) for v in armed.values()):  # kind -> "armed" or "off: why"
        notes += _armed_notes(armed)
        armed = {kind: state == "armed" for kind, state in armed.items()}
        monitor = {k: v for k, v in monitor.items() if k not in ("divergence", "kl")}  # said by the lines above
    if armed is None:  # a record from before the monitor recorded its flags: read its status sentences
        armed = {"divergence": monitor.get("divergence") == "on",
                 "kl": isinstance(monitor.get("kl"), str) and monitor["kl"].startswith("measured")}
    if not armed.get("divergence", True) and isinstance(monitor.get("divergence"), str):
        notes.append(f"Divergence and gold decline: {monitor['divergence']}.")
    if not armed.get("kl", True) and isinstance(monitor.get("kl"), str):
        notes.append(f"KL: {monitor['kl']}.")
    return {
        "metrics": logged,
        "curve": [{"step": p.get("step"), "proxy": p.get("proxy"), "gold": p.get("gold")}
                  for p in curve if isinstance(p, dict)],
        "alarms": alarms,
        "evaluations": monitor.get("evaluations"),
        "settings": monitor.get("settings") if isinstance(monitor.get("settings"), dict) else None,
        "notes": notes,
    }


# --------------------------------------------------------------------------- configs


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys to leaf values (lists and scalars are leaves)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix or "(config)": value}


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def compare_config(records: list[RunRecord]) -> list[ConfigRow]:
    """Config keys side by side: ``[{"key", "values", "differs"}]``, the keys that differ first."""
    flats = [flatten(config_parts(r)["spec"]) for r in records]
    keys: list[str] = []
    for flat in flats:
        keys += [k for k in flat if k not in keys]
    rows: list[ConfigRow] = []
    for key in keys:
        values = [flat.get(key, None) for flat in flats]
        present = [key in flat for flat in flats]
        differs = not all(present) or any(not _same(values[0], v) for v in values[1:])
        rows.append({"key": key, "values": values, "present": present, "differs": differs})
    return [r for r in rows if r["differs"]] + [r for r in rows if not r["differs"]]


_OVERRIDE = re.compile(r"^[+~]*([A-Za-z_][\w./-]*)=(.*)$")


def _overrides(parts: ConfigParts) -> dict[str, str]:
    over = parts.get("overrides")
    if isinstance(over, dict):
        return {str(k): v for k, v in over.items()}
    out = {}
    if isinstance(over, list):
        for item in over:
            m = _OVERRIDE.match(str(item))
            if m:
                out[m.group(1)] = m.group(2)
    return out


def sweep_knobs(records: list[RunRecord]) -> list[str]:
    """The knobs a sweep varied: named by the sweep when it says, else the keys whose values differ."""
    for r in records:
        named = _get(r.get("config"), "sweep", "knobs") or _get(r.get("config"), "sweep", "params")
        if isinstance(named, list) and all(isinstance(k, str) for k in named):
            return named
        if isinstance(named, dict):
            return list(named)
    parts = [config_parts(r) for r in records]
    overs = [_overrides(p) for p in parts]
    keys = [k for k in dict.fromkeys(k for o in overs for k in o)]
    varied = [k for k in keys if len({json.dumps(o.get(k), default=str) for o in overs}) > 1]
    if varied:
        return varied
    flats = [flatten(p["spec"]) for p in parts]
    keys = [k for k in dict.fromkeys(k for f in flats for k in f) if k.split(".")[0] not in _META_KEYS]
    return [k for k in keys if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flats}) > 1]


def knob_value(record: RunRecord, knob: str) -> Any:
    """A run's value of a swept knob: from its resolved spec, else its overrides."""
    parts = config_parts(record)
    flat = flatten(parts["spec"])
    if knob in flat:
        return flat[knob]
    return _overrides(parts).get(knob)


def _py(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, (int, float, str)):
        return json.dumps(value) if isinstance(value, str) else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_py(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))


def reproduce_commands(record: RunRecord) -> list[dict[str, str]]:
    """Copyable commands that make this run again: ``[{"label", "text"}]``, the most exact first."""
    parts = config_parts(record)
    out = []
    if parts["command"]:
        out.append({"label": "the command that made this run", "text": parts["command"]})
    if parts["runner"] or (isinstance(record.get("config"), dict) and isinstance(record["config"].get("spec"), dict)):
        out.append({"label": "run again from the stored spec", "text": f"python -m whileai reproduce {record['id']}"})
    elif parts["recipe"] and isinstance(parts["overrides"], list):
        line = " ".join(["python -m whileai run", f"recipe={parts['recipe']}", *map(str, parts["overrides"])])
        out.append({"label": "the recipe and the overrides", "text": line})
    spec = parts["spec"]
    if not out and record.get("kind") == "hosted" and isinstance(spec, dict) and record.get("dataset"):
        knobs = ", ".join(f"{k}={_py(v)}" for k, v in spec.items() if k.isidentifier() and v is not None)
        out.append({"label": "the same training call (Python)",
                    "text": f"import whileai.simulations as wai\nrun = wai.train({_py(record['dataset'])}"
                            + (f", {knobs}" if knobs else "") + ", wait=True)"})
    return out
