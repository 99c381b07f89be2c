"""The kit environment: a small bank of accounts, four tools, and tasks that take two to four calls.

A world is EPISODE_KIT_ACCOUNTS accounts with whole balances (EPISODE_KIT_BALANCE_STEP steps, at most
EPISODE_KIT_BALANCE_STEPS of them). The agent does not see the balances: it reads them with
``get_balance`` and changes them with ``deposit``, ``transfer`` and ``close_account``, so most tasks need
a read before a write, one round after another. A tool given a bad account or amount raises, and the
agent reads the error as the tool's message.

Tasks are drawn from a seed (:func:`kit_tasks`), each with its instruction, the opening balances, the gold
calls and what the final reply must say (only the task that asks for a balance has one). The gold end
state is the gold calls replayed on a fresh world (:func:`~whileai.domain.episodes.judge.replay`). A
task's id is a hash of what it asks and the world it asks it of, so an identical task drawn twice is one
task; :func:`kit_split` holds tasks out by a hash of the id and the seed, so a held-out task stays held
out whatever else is drawn beside it.

    train, held_out = kit_split(kit_tasks())
    rows = kit_rows(train)              # TRL rows: prompt, kit_task (JSON), task_id
    GRPOTrainer(..., train_dataset=Dataset.from_list(rows), environment_factory=KitEnvironment)
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from whileai.domain import defaults
from whileai.domain.episodes.judge import GoldCall, read_gold_call, replay
from whileai.domain.episodes.protocol import end_state

__all__ = ["KitEnvironment", "KitTask", "KitRow", "KIT_SYSTEM_PROMPT", "KIT_NAMES", "KIT_KINDS", "kit_tasks",
           "kit_split", "kit_rows"]

#: The names a world's accounts are drawn from: short, distinct words of the kit's size.
KIT_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")

KIT_SYSTEM_PROMPT = ("You run a small bank through its tools. Read a balance before you move all of it; make "
                     "one call at a time; when the task is done, answer in one short sentence.")


def _whole(amount: Any) -> int:
    if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
        raise ValueError(f"amount must be a whole number above 0, got {amount!r}")
    return amount


class KitEnvironment:
    """A bank of a few accounts. State: ``balances`` (account -> whole amount) and ``closed`` (closed accounts)."""

    def __init__(self) -> None:
        self.balances: dict[str, int] = {}
        self.closed: list[str] = []
        self._task: KitTask | None = None

    def reset(self, kit_task: KitTask | str | Mapping[str, Any] | None = None, **kwargs: Any) -> str | None:
        """Open the world of ``kit_task`` (a :class:`KitTask`, its JSON or its mapping); the row's other columns
        are TRL's and are not read."""
        if kit_task is None:
            raise ValueError("KitEnvironment.reset needs kit_task (a row of kit_rows carries it as JSON); got a row "
                             f"with {', '.join(sorted(kwargs)) or 'no columns'}; build the rows with kit_rows(...)")
        task = kit_task if isinstance(kit_task, KitTask) else KitTask.read(kit_task)
        self.balances = dict(task.balances)
        self.closed = []
        self._task = task
        return None

    def get_reward(self) -> float:
        """1.0 when the world is as the task's gold calls leave it, else 0.0 (the state alone: a reply the task
        asks for is judge_episode's to check)."""
        if self._task is None:
            return 0.0
        gold = replay(KitEnvironment, {"kit_task": self._task}, self._task.gold)
        return 1.0 if end_state(self) == gold else 0.0

    def _open(self, account: Any) -> str:
        if account not in self.balances:
            raise ValueError(f"no account named {account!r}; the accounts are {', '.join(sorted(self.balances))}")
        if account in self.closed:
            raise ValueError(f"{account} is closed")
        return str(account)

    def get_balance(self, account: str) -> int:
        """Read the balance of an account.

        Args:
            account: The account's owner, e.g. alice.
        """
        return self.balances[self._open(account)]

    def deposit(self, account: str, amount: int) -> int:
        """Add money to an account and return its new balance.

        Args:
            account: The account's owner, e.g. alice.
            amount: How much to add, a whole number above 0.
        """
        name, value = self._open(account), _whole(amount)
        self.balances[name] += value
        return self.balances[name]

    def transfer(self, source: str, target: str, amount: int) -> str:
        """Move money from one account to another.

        Args:
            source: The account the money leaves.
            target: The account the money goes to.
            amount: How much to move, a whole number above 0 and at most the source's balance.
        """
        src, dst, value = self._open(source), self._open(target), _whole(amount)
        if src == dst:
            raise ValueError(f"source and target are both {src}; name two accounts")
        if self.balances[src] < value:
            raise ValueError(f"{src} holds {self.balances[src]}, less than {value}")
        self.balances[src] -= value
        self.balances[dst] += value
        return f"moved {value} from {src} to {dst}"

    def close_account(self, account: str) -> str:
        """Close an account that holds nothing.

        Args:
            account: The account's owner, e.g. alice.
        """
        name = self._open(account)
        if self.balances[name]:
            raise ValueError(f"{name} still holds {self.balances[name]}; transfer it out first")
        self.closed = sorted([*self.closed, name])
        return f"closed {name}"


@dataclass(frozen=True)
class KitTask:
    """One kit task: its id and kind, the instruction, the opening balances, the gold calls (``{"name",
    "arguments"}`` each) and the words its final reply must contain."""

    task_id: str
    kind: str
    instruction: str
    balances: dict[str, int]
    gold: tuple[GoldCall, ...]
    responses: tuple[str, ...] = ()

    def to_json(self) -> str:
        """The task as JSON text (a dataset column TRL hands to ``reset``)."""
        return json.dumps({"task_id": self.task_id, "kind": self.kind, "instruction": self.instruction,
                           "balances": self.balances, "gold": list(self.gold), "responses": list(self.responses)})

    @classmethod
    def read(cls, value: str | Mapping[str, Any]) -> KitTask:
        """The task from :meth:`to_json`'s text or its mapping."""
        data = json.loads(value) if isinstance(value, str) else value
        return cls(task_id=str(data["task_id"]), kind=str(data["kind"]), instruction=str(data["instruction"]),
                   balances={str(k): int(v) for k, v in data["balances"].items()},
                   gold=tuple(read_gold_call(c) for c in data["gold"]), responses=tuple(str(r) for r in data["responses"]))


# ---------------------------------------------------------------------------
# Task kinds: each draws its accounts and amounts from the world and returns (instruction, gold, responses)
# ---------------------------------------------------------------------------

_Drawn = tuple[str, list[GoldCall], tuple[str, ...]]


def _call(name: str, **arguments: Any) -> GoldCall:
    return {"name": name, "arguments": arguments}


def _amount(rng: random.Random, most: int) -> int:
    """A whole number of balance steps from one step to ``most``."""
    step = defaults.EPISODE_KIT_BALANCE_STEP
    return step * rng.randint(1, most // step)


def _sweep(rng: random.Random, world: dict[str, int]) -> _Drawn:
    a, b = rng.sample(sorted(world), 2)
    return (f"Move all of {a}'s money to {b}.",
            [_call("get_balance", account=a), _call("transfer", source=a, target=b, amount=world[a])], ())


def _pay_and_report(rng: random.Random, world: dict[str, int]) -> _Drawn:
    a, b = rng.sample(sorted(world), 2)
    n = _amount(rng, world[a])
    return (f"Send {n} from {a} to {b}, then tell me {a}'s balance.",
            [_call("transfer", source=a, target=b, amount=n), _call("get_balance", account=a)], (str(world[a] - n),))


def _chain(rng: random.Random, world: dict[str, int]) -> _Drawn:
    a, b, c = rng.sample(sorted(world), 3)
    n = _amount(rng, world[a])
    m = _amount(rng, min(world[b] + n, defaults.EPISODE_KIT_BALANCE_STEP * defaults.EPISODE_KIT_BALANCE_STEPS))
    return (f"Send {n} from {a} to {b}, then send {m} from {b} to {c}.",
            [_call("transfer", source=a, target=b, amount=n), _call("transfer", source=b, target=c, amount=m)], ())


def _close(rng: random.Random, world: dict[str, int]) -> _Drawn:
    a, b = rng.sample(sorted(world), 2)
    return (f"Close {a}'s account and move its money to {b}.",
            [_call("get_balance", account=a), _call("transfer", source=a, target=b, amount=world[a]),
             _call("close_account", account=a)], ())


def _top_up_and_sweep(rng: random.Random, world: dict[str, int]) -> _Drawn | None:
    top = defaults.EPISODE_KIT_BALANCE_STEP * defaults.EPISODE_KIT_BALANCE_STEPS
    low = [name for name in sorted(world) if world[name] < top]
    if not low:  # every account is full: a deposit would leave an amount past two digits
        return None
    a = rng.choice(low)
    b = rng.choice([name for name in sorted(world) if name != a])
    n = _amount(rng, top - world[a])
    return (f"Deposit {n} into {a}, then move all of {a}'s money to {b}.",
            [_call("deposit", account=a, amount=n), _call("get_balance", account=a),
             _call("transfer", source=a, target=b, amount=world[a] + n)], ())


def _merge(rng: random.Random, world: dict[str, int]) -> _Drawn:
    a, b, c = rng.sample(sorted(world), 3)
    return (f"Move all of {a}'s and {b}'s money to {c}.",
            [_call("get_balance", account=a), _call("transfer", source=a, target=c, amount=world[a]),
             _call("get_balance", account=b), _call("transfer", source=b, target=c, amount=world[b])], ())


#: The task kinds, by name: the calls each needs are 2 (sweep, pay_and_report, chain), 3 (close,
#: top_up_and_sweep) and 4 (merge). A kind returns None for a world it cannot ask of.
KIT_KINDS: dict[str, Callable[[random.Random, dict[str, int]], _Drawn | None]] = {
    "sweep": _sweep, "pay_and_report": _pay_and_report, "chain": _chain, "close": _close,
    "top_up_and_sweep": _top_up_and_sweep, "merge": _merge,
}


def _world(rng: random.Random) -> dict[str, int]:
    names = sorted(rng.sample(KIT_NAMES, defaults.EPISODE_KIT_ACCOUNTS))
    step = defaults.EPISODE_KIT_BALANCE_STEP
    return {name: step * rng.randint(1, defaults.EPISODE_KIT_BALANCE_STEPS) for name in names}


def _task_id(instruction: str, world: Mapping[str, int]) -> str:
    digest = hashlib.sha256(json.dumps([instruction, sorted(world.items())]).encode()).hexdigest()
    return f"kit-{digest[:12]}"


def _draw(rng: random.Random, kind: str) -> KitTask | None:
    world = _world(rng)
    drawn = KIT_KINDS[kind](rng, world)
    if drawn is None:
        return None
    instruction, gold, responses = drawn
    return KitTask(task_id=_task_id(instruction, world), kind=kind, instruction=instruction, balances=world,
                   gold=tuple(gold), responses=responses)


def kit_tasks(n: int | None = None, seed: int | None = None) -> list[KitTask]:
    """``n`` distinct kit tasks (EPISODE_KIT_TASKS when None) drawn from ``seed`` (EPISODE_KIT_SEED when None),
    the kinds in turn. The same arguments give the same tasks; a larger ``n`` gives the same tasks first."""
    count = defaults.EPISODE_KIT_TASKS if n is None else n
    if count < 1:
        raise ValueError(f"n={count} kit tasks: ask for at least 1, or leave n None ({defaults.EPISODE_KIT_TASKS})")
    rng = random.Random(defaults.EPISODE_KIT_SEED if seed is None else seed)
    kinds = list(KIT_KINDS)
    tasks: dict[str, KitTask] = {}
    draws = 0
    while len(tasks) < count:
        task = _draw(rng, kinds[draws % len(kinds)])
        draws += 1
        if task is not None:
            tasks.setdefault(task.task_id, task)
    return list(tasks.values())


def _held_share(task_id: str, seed: int) -> float:
    digest = hashlib.sha256(f"{seed}:{task_id}".encode()).hexdigest()
    return int(digest[:15], 16) / 16**15


def kit_split(tasks: Iterable[KitTask], holdout: float | None = None,
              seed: int | None = None) -> tuple[list[KitTask], list[KitTask]]:
    """``(train, held_out)``: a task is held out when a hash of its id and ``seed`` (CUT_SEED when None) falls
    under ``holdout`` (CUT_HOLDOUT when None), so the split of a task never depends on the others."""
    share = defaults.CUT_HOLDOUT if holdout is None else holdout
    if not 0 < share < 1:
        raise ValueError(f"holdout={share} must be a share of tasks in (0, 1), e.g. {defaults.CUT_HOLDOUT}")
    cut_seed = defaults.CUT_SEED if seed is None else seed
    train: list[KitTask] = []
    held: list[KitTask] = []
    for task in tasks:
        (held if _held_share(task.task_id, cut_seed) < share else train).append(task)
    return train, held


class KitRow(TypedDict):
    """A TRL row of a kit task: its prompt (the system prompt, then the instruction, each a role and a text), the
    task as JSON (what ``reset`` reads) and its id."""

    prompt: list[dict[str, str]]
    kit_task: str
    task_id: str


def kit_rows(tasks: Iterable[KitTask]) -> list[KitRow]:
    """TRL rows of ``tasks``: ``prompt`` (the system prompt and the instruction), ``kit_task`` (the task's JSON,
    which ``reset`` reads) and ``task_id``."""
    return [{"prompt": [{"role": "system", "content": KIT_SYSTEM_PROMPT},
                        {"role": "user", "content": task.instruction}],
             "kit_task": task.to_json(), "task_id": task.task_id} for task in tasks]
