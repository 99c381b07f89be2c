"""The spec's environment as ``validate`` shows it: each environment class with its tools, and the turn cap.

    print("\\n".join(environment_lines(spec)))   # YAML comments after the spec; nothing when environment=none
"""

from __future__ import annotations

import os

from whileai.runner.schema import RecipeSpec

__all__ = ["environment_lines"]


def environment_lines(spec: RecipeSpec) -> list[str]:
    """The environment's classes, tools and turn cap as ``# `` lines ([] for environment=none)."""
    env = spec.environment
    if env.name == "none":
        return []
    from whileai.domain.episodes import describe_environment

    info = describe_environment(env.name, env.category, env.max_turns, search_path=os.getcwd())
    cap = f"turn cap {info.max_turns} tool-calling rounds ({info.max_turns_from})"
    if len(info.worlds) == 1 and info.worlds[0].label is None:
        (world,) = info.worlds
        lines = [f"# environment {info.name} ({world.source}): {len(world.tools)} tools, {cap}"]
        return lines + [f"#   {tool.signature}: {tool.summary}" for tool in world.tools]
    lines = [f"# environment {info.name}: {len(info.worlds)} environments (each row's environment column picks "
             f"one), {cap}"]
    for world in info.worlds:
        names = ", ".join(tool.name for tool in world.tools)
        lines.append(f"#   {world.label} ({world.source}): {len(world.tools)} tools: {names}")
    return lines
