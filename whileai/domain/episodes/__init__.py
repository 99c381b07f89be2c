"""Episodes: an agent and a stateful tool world taking turns, judged by the world they leave behind.

One job: give GRPO (TRL's ``GRPOTrainer(environment_factory=...)``) and held-out measurement whole
episodes instead of a first call. The parts:

- ``protocol.py``: what an environment is (TRL's contract: ``reset(**row)``, public methods as typed,
  documented tools, optional ``get_reward``), checked with every problem listed at once;
- ``loader.py``: a user's environment, ``python:MODULE:CLASS``;
- ``kit.py``: the built-in environment, a small bank with four tools, and its seeded tasks and split;
- ``loop.py``: one episode played with any policy, as TRL's tool-calling loop plays it, every user turn of it where
  the environment has several (BFCL's);
- ``judge.py``: the verdict: the end state against the gold calls replayed, and what the reply must say;
- ``turns.py``: per-turn scores: each call of an episode against the gold call at its place, by the exact
  first-action judge or ToolRL's fine-grained score, and their mean (GRPO's optional ``turn_reward``);
- ``rows.py``: gold episodes as rollout rows (the kit's tasks for the runner's dataset=episodes), each carrying
  its environment's reset arguments and gold calls;
- ``record.py``: a judged episode as a run's summary keeps it (``summary["episodes"]``), turn by turn;
- ``registry.py``: a name (``kit``, ``bfcl``, ``python:...``) to TRL's environment factory;
- ``bfcl.py`` and ``bfcl_rows.py``: BFCL's multi-turn entries as environments (TRL's dict of factories, one class per
  set of backends) and as gold episode rows cut by BFCL's own split; imported when named (bfcl-eval's backends).
"""

from whileai.domain.episodes.judge import GoldJudge, Verdict, judge_episode, replay, state_differences
from whileai.domain.episodes.kit import KitEnvironment, KitTask, kit_rows, kit_split, kit_tasks
from whileai.domain.episodes.loader import load_environment
from whileai.domain.episodes.loop import Episode, Policy, Stopped, play_episode
from whileai.domain.episodes.record import (EPISODES_KEY, EpisodeRecord, EpisodesSummary, episode_record,
                                            episodes_summary, tool_error)
from whileai.domain.episodes.protocol import (Environment, EnvironmentFactory, TurnByTurn, end_state, offered_tools,
                                              protocol_problems, tool_methods, tool_schemas, turn_by_turn)
from whileai.domain.episodes.rows import (EPISODE_FIELD, EpisodeGold, episode_gold, gold_messages, has_episode,
                                          kit_episode_rows, kit_reply)
from whileai.domain.episodes.turns import TurnScores, turn_calls, turn_scores
from whileai.domain.episodes.registry import (BFCL_CATEGORIES, ENVIRONMENT_NAMES, EnvironmentInfo, Factories,
                                              WorldInfo, describe_environment, environment_factory,
                                              environment_problems, environment_ref, parse_environment_ref)

__all__ = [
    "Environment", "EnvironmentFactory", "protocol_problems", "tool_methods", "tool_schemas", "end_state",
    "TurnByTurn", "turn_by_turn", "offered_tools", "load_environment",
    "KitEnvironment", "KitTask", "kit_tasks", "kit_split", "kit_rows",
    "Episode", "Policy", "Stopped", "play_episode",
    "EPISODE_FIELD", "EpisodeGold", "episode_gold", "gold_messages", "has_episode", "kit_episode_rows", "kit_reply",
    "Verdict", "replay", "judge_episode", "state_differences", "GoldJudge",
    "TurnScores", "turn_calls", "turn_scores",
    "EPISODES_KEY", "EpisodeRecord", "EpisodesSummary", "episode_record", "episodes_summary", "tool_error",
    "ENVIRONMENT_NAMES", "BFCL_CATEGORIES", "Factories", "EnvironmentInfo", "WorldInfo", "environment_factory",
    "environment_problems",
    "describe_environment", "environment_ref", "parse_environment_ref",
]
