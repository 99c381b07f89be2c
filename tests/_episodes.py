"""A kit task the episode tests share: move all of one account to another, then say the new balance."""

from whileai.domain.episodes import KitTask

#: two calls (read alice, move it all to bob) and a reply that must say bob's new balance
MOVE_ALL = KitTask(task_id="kit-move-all", kind="move_all",
                   instruction="Move all of alice's money to bob, then tell me bob's balance.",
                   balances={"alice": 30, "bob": 20, "carol": 10, "dave": 40},
                   gold=({"name": "get_balance", "arguments": {"account": "alice"}},
                         {"name": "transfer", "arguments": {"source": "alice", "target": "bob", "amount": 30}}),
                   responses=("50",))
