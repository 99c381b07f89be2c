"""The spec's environment as ``validate`` shows it: each environment class with its tools, and the turn cap.

    print("\\n".join(environment_lines(spec)))   # YAML comments after the spec; nothing when environment=none
"""

from __future__ import annotations

import os
from typing import Any

from whileai.runner.schema import RecipeSpec

__all__ = ["environment_lines"]


def _described(spec: RecipeSpec) -> tuple[str, list[Any], Any]:
    """``(the name shown, every class a row can route to, the environment's info)``: for dataset=bfcl_episodes the
    classes of each category it reads (``dataset.categories`` may name several), else the environment's own."""
    from whileai.domain.episodes import describe_environment

    env = spec.environment
    categories = [env.category]
    if env.name == "bfcl" and spec.dataset.source == "bfcl_episodes":
        from whileai.runner._bfcl_data import episode_categories

        categories = list(episode_categories(spec.dataset, env))
    infos = [describe_environment(env.name, c, env.max_turns, search_path=os.getcwd()) for c in categories]
    worlds = list({world.label: world for info in infos for world in info.worlds}.values())
    name = infos[0].name if len(infos) == 1 else f"{env.name}:{'+'.join(str(c) for c in categories)}"
    return name, worlds, infos[0]


def environment_lines(spec: RecipeSpec) -> list[str]:
    """The environment's classes, tools and turn cap as ``# `` lines ([] for environment=none)."""
    if spec.environment.name == "none":
        return []
    name, worlds, info = _described(spec)
    cap = f"turn cap {info.max_turns} tool-calling rounds ({info.max_turns_from})"
    if len(worlds) == 1 and worlds[0].label is None:
        (world,) = worlds
        lines = [f"# environment {name} ({world.source}): {len(world.tools)} tools, {cap}"]
        return lines + [f"#   {tool.signature}: {tool.summary}" for tool in world.tools]
    lines = [f"# environment {name}: {len(worlds)} environments (each row's environment column picks one), {cap}"]
    for world in worlds:
        names = ", ".join(tool.name for tool in world.tools)
        lines.append(f"#   {world.label} ({world.source}): {len(world.tools)} tools: {names}")
    return lines
