"""The sample tool-use task: a simulated agent environment and its rollouts.

An assistant has four tools (``get_weather``, ``convert``, ``set_timer``,
``get_time``) and gets one ask per task, phrased several ways; a few asks
(greetings, thanks) need no tool and have a fixed answer. For each task,
``defaults.KIT_SAMPLE_ROLLOUTS`` simulated policies of different skill act: the
first action is the right call, or a typical mistake (wrong tool, wrong or
missing argument, answering without the tool, calling a tool for small talk).
The simulator then answers the call (a tool response from its hidden world
state) and the policy writes a final reply. Each rollout is a row in the
rollout-row contract (docs/architecture.md): ``reward``/``passed`` come from
comparing the first action with ``gold``; ``markers`` carry a hackable
``proxy_reward`` (it likes any well-formed call and long replies), the ask's
``difficulty`` and the ``failure`` kind; ``privileged`` holds what the
simulator knew (the true tool result).

The shipped dataset ``whileai/kit/data/sample_tooluse.jsonl`` is
``generate()`` written by ``scripts/make_sample.py``; ``load_sample()`` reads it.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypedDict

from whileai.kit import _vocab

__all__ = [
    "SAMPLE_FILE",
    "SYSTEM_PROMPT",
    "TOOLS",
    "generate",
    "load_sample",
    "split_tasks",
]

#: The shipped sample, relative to the whileai.kit package.
SAMPLE_FILE = "data/sample_tooluse.jsonl"

SYSTEM_PROMPT = (
    "You are a helpful assistant. Call a tool when the request needs one; otherwise answer directly."
)


def _tool(name: str, description: str, **params: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": v} for k, v in params.items()},
                "required": list(params),
            },
        },
    }


TOOLS: list[dict[str, Any]] = [
    _tool("get_weather", "Current weather in a city.", city="string", unit="string"),
    _tool("convert", "Convert an amount between units.", amount="number", from_unit="string", to_unit="string"),
    _tool("set_timer", "Start a timer.", minutes="integer"),
    _tool("get_time", "Local time in a city.", city="string"),
]

# (template, difficulty) per kind. Placeholders: {city} {unit} {amount} {src} {dst} {minutes}.
_PHRASINGS: dict[str, list[tuple[str, str]]] = {
    "weather": [
        ("Weather in {city} in {unit}?", "easy"),
        ("What is the temperature in {city} in {unit}?", "easy"),
        ("How warm is it in {city} right now? Answer in {unit}.", "medium"),
        ("Tell me the {unit} temperature in {city}.", "medium"),
        ("I fly to {city} tomorrow. What is the weather there, in {unit} please?", "hard"),
    ],
    "convert": [
        ("Convert {amount} {src} to {dst}.", "easy"),
        ("What is {amount} {src} in {dst}?", "easy"),
        ("How many {dst} is {amount} {src}?", "medium"),
        ("I have {amount} {src}. How much is that in {dst}?", "hard"),
    ],
    "timer": [
        ("Set a timer for {minutes} minutes.", "easy"),
        ("Start a {minutes} minute timer please.", "easy"),
        ("Remind me in {minutes} minutes.", "medium"),
        ("Can you time {minutes} minutes for my tea?", "hard"),
    ],
    "time": [
        ("What time is it in {city}?", "easy"),
        ("Tell me the current time in {city}.", "easy"),
        ("Is it late in {city} right now?", "hard"),
    ],
}

#: Asks that need no tool, with the one right answer.
_SMALL_TALK: list[tuple[str, str, str]] = [
    ("Hello!", "Hello! How can I help you today?", "easy"),
    ("Hi there.", "Hello! How can I help you today?", "easy"),
    ("Thanks, that is all.", "You are welcome!", "easy"),
    ("Thank you so much!", "You are welcome!", "easy"),
    ("What can you do?", "I can check the weather, convert units, set timers and tell the time.", "medium"),
]

#: Share of each kind among the tasks (the rest is small talk).
_KIND_WEIGHTS = (("weather", 0.3), ("convert", 0.3), ("timer", 0.15), ("time", 0.15), ("talk", 0.1))

#: Base chance that a rollout's first action is right, by the ask's difficulty.
_PASS_CHANCE = {"easy": 0.7, "medium": 0.55, "hard": 0.4}

#: Simulated policies: how much each shifts the pass chance.
_POLICY_SKILL = (0.2, 0.05, -0.1, -0.25)

_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "snowy", "foggy")


def _fmt(x: float) -> int | float:
    """A number as a tool would print it: an int when whole, else two decimals."""
    r = round(x, 2)
    return int(r) if r == int(r) else r


# ---------------------------------------------------------------------------
# one task: the ask, the gold action, the world the simulator knows
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _World:
    """What the simulator knows and the tools report; a value a task's kind does not draw reads as its default."""

    temp_c: int = 20
    conditions: str = "cloudy"
    hour: int = 12
    minute: int = 0


class _Action(TypedDict, total=False):
    """A first action, as a row's ``gold`` holds it: a call (``name`` and ``arguments``) or an ``answer``."""

    name: str
    arguments: dict[str, Any]  # the call's arguments, as the tool's schema names them
    answer: str


@dataclass(frozen=True)
class _Task:
    """One ask: its id and kind, the text and its difficulty, the gold action (a row's ``gold``) and the world."""

    task_id: str
    kind: str
    ask: str
    difficulty: str
    gold: _Action
    world: _World


def _make_task(rng: random.Random, index: int) -> _Task:
    r = rng.random()
    kind = "talk"
    for name, weight in _KIND_WEIGHTS:
        if r < weight:
            kind = name
            break
        r -= weight
    world = _World()
    if kind == "talk":
        ask, answer, difficulty = rng.choice(_SMALL_TALK)
        return _Task(task_id=f"talk-{index:04d}", kind=kind, ask=ask, difficulty=difficulty,
                     gold={"answer": answer}, world=world)
    template, difficulty = rng.choice(_PHRASINGS[kind])
    args: dict[str, str | int]
    fields: dict[str, str | int]
    gold: _Action
    if kind == "weather":
        args = {"city": rng.choice(_vocab.CITIES), "unit": rng.choice(_vocab.TEMPERATURE_UNITS)}
        world = _World(temp_c=rng.randint(-10, 38), conditions=rng.choice(_CONDITIONS))
        gold = {"name": "get_weather", "arguments": args}
        fields = dict(args)
    elif kind == "convert":
        a, b, _factor = rng.choice(_vocab.CONVERSIONS)
        if rng.random() < 0.5:
            a, b = b, a
        amount = rng.randint(1, 250)
        args = {"amount": amount, "from_unit": a, "to_unit": b}
        gold = {"name": "convert", "arguments": args}
        fields = {"amount": amount, "src": a, "dst": b}
    elif kind == "timer":
        args = {"minutes": rng.randint(1, 120)}
        gold = {"name": "set_timer", "arguments": args}
        fields = dict(args)
    else:
        args = {"city": rng.choice(_vocab.CITIES)}
        world = _World(hour=rng.randint(0, 23), minute=rng.randint(0, 59))
        gold = {"name": "get_time", "arguments": args}
        fields = dict(args)
    return _Task(task_id=f"{kind}-{index:04d}", kind=kind, ask=template.format(**fields), difficulty=difficulty,
                 gold=gold, world=world)


def _run_tool(task: _Task, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What the simulated tool answers to a call (right or wrong) in this task's world."""
    required = TOOLS[[t["function"]["name"] for t in TOOLS].index(name)]["function"]["parameters"]["required"]
    missing = [k for k in required if k not in args]
    if missing:
        return {"error": f"missing argument: {missing[0]}"}
    world = task.world
    if name == "get_weather":
        temp = world.temp_c if args["unit"] == "celsius" else _fmt(world.temp_c * 9 / 5 + 32)
        return {"city": args["city"], "temp": temp, "unit": args["unit"], "conditions": world.conditions}
    if name == "convert":
        factor = dict(((a, b), f) for a, b, f in _vocab.CONVERSIONS)
        factor.update({(b, a): 1 / f for a, b, f in _vocab.CONVERSIONS})
        f = factor.get((args["from_unit"], args["to_unit"]))
        if f is None:
            return {"error": f"cannot convert {args['from_unit']} to {args['to_unit']}"}
        return {"result": _fmt(args["amount"] * f), "unit": args["to_unit"]}
    if name == "set_timer":
        return {"status": "set", "minutes": args["minutes"], "timer_id": f"t{zlib.crc32(task.task_id.encode()) % 90 + 10}"}
    return {"city": args["city"], "time": f"{world.hour:02d}:{world.minute:02d}"}


def _reply(name: str, result: dict[str, Any]) -> str:
    if "error" in result:
        return f"Sorry, I could not do that: {result['error']}."
    if name == "get_weather":
        return f"It is {result['temp']} degrees {result['unit']} and {result['conditions']} in {result['city']}."
    if name == "convert":
        return f"That is {result['result']} {result['unit']}."
    if name == "set_timer":
        return f"Done: a timer for {result['minutes']} minutes is running."
    return f"It is {result['time']} in {result['city']}."


# ---------------------------------------------------------------------------
# mistakes a weaker policy makes
# ---------------------------------------------------------------------------


def _wrong_argument(rng: random.Random, gold: _Action) -> dict[str, Any]:
    args = dict(gold["arguments"])
    key = rng.choice(sorted(args))
    value = args[key]
    if key == "city":
        args[key] = rng.choice([c for c in _vocab.CITIES if c != value])
    elif key == "unit":
        args[key] = "fahrenheit" if value == "celsius" else "celsius"
    elif key in ("from_unit", "to_unit"):
        args["from_unit"], args["to_unit"] = args["to_unit"], args["from_unit"]
    else:
        args[key] = max(1, value + rng.choice([-10, -5, -1, 1, 5, 10]))
    return args


def _mistake(rng: random.Random, task: _Task) -> tuple[str, _Action]:
    """A wrong first action: ``(failure kind, action)``; an action is a call or an answer."""
    gold = task.gold
    if "answer" in gold:
        if rng.random() < 0.5:
            return "unneeded_tool", {"name": "get_time", "arguments": {"city": rng.choice(_vocab.CITIES)}}
        wrong = rng.choice([a for _, a, _ in _SMALL_TALK if a != gold["answer"]])
        return "wrong_answer", {"answer": wrong}
    options = ["wrong_argument", "wrong_tool", "no_tool"]
    if len(gold["arguments"]) > 1:
        options.append("missing_argument")
    failure = rng.choice(options)
    if failure == "wrong_argument":
        return failure, {"name": gold["name"], "arguments": _wrong_argument(rng, gold)}
    if failure == "missing_argument":
        args = dict(gold["arguments"])
        del args[rng.choice(sorted(args))]
        return failure, {"name": gold["name"], "arguments": args}
    if failure == "wrong_tool":
        city = gold["arguments"].get("city", rng.choice(_vocab.CITIES))
        if gold["name"] == "get_weather":
            return failure, {"name": "get_time", "arguments": {"city": city}}
        if gold["name"] == "get_time":
            return failure, {"name": "get_weather", "arguments": {"city": city, "unit": "celsius"}}
        if gold["name"] == "convert":
            return failure, {"name": "set_timer", "arguments": {"minutes": min(120, gold["arguments"]["amount"])}}
        return failure, {"name": "get_time", "arguments": {"city": city}}
    # no_tool: answer from thin air
    guess = {
        "get_weather": lambda a: f"It is probably about {rng.randint(5, 30)} degrees in {a['city']}.",
        "convert": lambda a: f"That is roughly {a['amount'] * 2} {a['to_unit']}.",
        "set_timer": lambda a: f"Okay, {a['minutes']} minutes. I will remember.",
        "get_time": lambda a: f"It is around noon in {a['city']}.",
    }[gold["name"]]
    return failure, {"answer": guess(gold["arguments"])}


# ---------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------


def _score(action: _Action, gold: _Action) -> float:
    """1.0 for the gold action; partial credit (under 0.5) for the right tool with some right arguments."""
    if "answer" in gold:
        return 1.0 if action.get("answer") == gold["answer"] else 0.0
    if action.get("name") != gold["name"]:
        return 0.0
    want, got = gold["arguments"], action.get("arguments", {})
    if got == want:
        return 1.0
    right = sum(1 for k, v in want.items() if got.get(k) == v)
    return round(0.4 * right / len(want), 3)


def _row(task: _Task, action: _Action, failure: str, index: int,
         rng: random.Random, temperature: float) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": task.ask},
    ]
    if "answer" in action:
        messages.append({"role": "assistant", "content": action["answer"]})
        reply = action["answer"]
    else:
        call_id = f"call_{index}"
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": action["name"], "arguments": json.dumps(action["arguments"])}}]})
        result = _run_tool(task, action["name"], action["arguments"])
        messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)})
        reply = _reply(action["name"], result)
        messages.append({"role": "assistant", "content": reply})
    reward = _score(action, task.gold)
    proxy = 0.6 * ("name" in action) + 0.4 * min(1.0, len(reply) / 60) + rng.uniform(-0.05, 0.05)
    gold = task.gold
    truth = (_run_tool(task, gold["name"], gold["arguments"]) if "name" in gold
             else {"answer": gold["answer"]})
    return {
        "messages": messages,
        "tools": TOOLS,
        "reward": reward,
        "passed": reward == 1.0,
        "gold": gold,
        "markers": {"proxy_reward": round(min(1.0, max(0.0, proxy)), 3),
                    "difficulty": task.difficulty, "failure": failure},
        "task_id": task.task_id,
        "rollout_index": index,
        "sampling": {"temperature": temperature},
        "privileged": {"tool_result": json.dumps(truth, sort_keys=True),
                       "note": f"the true first action is {json.dumps(gold, sort_keys=True)}"},
    }


def generate(n_tasks: int | None = None, k: int | None = None, seed: int = 0,
             temperature: float | None = None) -> list[dict[str, Any]]:
    """Rollout rows of the sample task: ``k`` rollouts for each of ``n_tasks`` tasks.

    Deterministic for ``seed``. ``None`` uses ``defaults.KIT_SAMPLE_TASKS``,
    ``KIT_SAMPLE_ROLLOUTS`` and ``KIT_SAMPLE_TEMPERATURE``. Rows are grouped by
    task (``task_id``, ``rollout_index``); most groups mix passes and fails.

    >>> rows = generate(n_tasks=2, k=4)
    >>> len(rows), rows[0]["rollout_index"], rows[4]["rollout_index"]
    (8, 0, 0)
    """
    from whileai.kit import defaults

    n_tasks = defaults.KIT_SAMPLE_TASKS if n_tasks is None else n_tasks
    k = defaults.KIT_SAMPLE_ROLLOUTS if k is None else k
    temperature = defaults.KIT_SAMPLE_TEMPERATURE if temperature is None else temperature
    if n_tasks < 1 or k < 1:
        raise ValueError(f"generate needs n_tasks >= 1 and k >= 1, got n_tasks={n_tasks}, k={k}")
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for t in range(n_tasks):
        task = _make_task(rng, t)
        chance = _PASS_CHANCE[task.difficulty]
        for i in range(k):
            skill = _POLICY_SKILL[i % len(_POLICY_SKILL)]
            if rng.random() < chance + skill:
                failure, action = "none", task.gold
            else:
                failure, action = _mistake(rng, task)
            rows.append(_row(task, action, failure, i, rng, temperature))
    return rows


def load_sample() -> list[dict[str, Any]]:
    """The shipped sample dataset (``SAMPLE_FILE``): rollout rows, privileged blocks included."""
    text = resources.files("whileai.kit").joinpath(SAMPLE_FILE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def split_tasks(rows: Sequence[Mapping[str, Any]], holdout: float | None = None,
                seed: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split rows by task (never by row): ``(train, held_out)``, deterministic for ``seed``.

    ``holdout`` is the held-out share of tasks (``defaults.KIT_SAMPLE_HOLDOUT`` when None).
    """
    from whileai.kit import defaults

    holdout = defaults.KIT_SAMPLE_HOLDOUT if holdout is None else holdout
    if not 0 < holdout < 1:
        raise ValueError(f"holdout={holdout} must be a share of tasks in (0, 1), e.g. 0.2")
    keys = sorted({str(r["task_id"]) for r in rows})
    random.Random(seed).shuffle(keys)
    held = set(keys[: max(1, round(len(keys) * holdout))])
    train = [dict(r) for r in rows if str(r["task_id"]) not in held]
    test = [dict(r) for r in rows if str(r["task_id"]) in held]
    return train, test
