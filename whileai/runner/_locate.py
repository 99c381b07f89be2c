"""Where the config groups and recipes are, and how Hydra finds them.

The top-level ``conf/`` and ``recipes/`` folders of a checkout are the single
source. A wheel carries copies of them under ``whileai/_configs/`` (setup.py's
build step copies them at build time). In a checkout the top-level folders win,
so an edit to a recipe is what the next run composes.

``conf/`` is Hydra's primary config folder. Recipes are experiment configs
(``# @package _global_``) registered in Hydra's ConfigStore under the
``recipe`` group, so ``recipe=NAME`` picks ``recipes/NAME.yaml`` and
``recipe=gpu/grpo_qwen3`` picks ``recipes/gpu/grpo_qwen3.yaml``; a user's own
folder (``--recipes DIR`` or ``WHILEAI_RECIPES``) is registered after the
committed ones, so its recipes win. The user's folder may also hold group
options (``DIR/dataset/mine.yaml`` is ``dataset=mine``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from whileai.runner import defaults

__all__ = ["Sources", "sources", "data_root"]

_PACKAGE = Path(__file__).resolve().parents[1]  # .../whileai


def data_root() -> Path:
    """The data root the SDK uses: ``$WHILEAI_HOME``, else ``~/.whileai`` (the SDK's own rule)."""
    from whileai.core import defaults as core_defaults

    return Path(os.environ.get(core_defaults.HOME_ENV) or Path.home() / ".whileai").expanduser()


def _shipped() -> tuple[Path, Path]:
    """(conf, recipes): the checkout's top-level folders when this package sits in one, else the wheel's copies."""
    checkout = _PACKAGE.parent
    if (checkout / "conf" / "config.yaml").is_file() and (checkout / "recipes").is_dir():
        return checkout / "conf", checkout / "recipes"
    bundled = _PACKAGE / "_configs"
    return bundled / "conf", bundled / "recipes"


@dataclass
class Sources:
    """The files a composition can read: the primary folder, each group's options, each recipe."""

    conf: Path
    recipes: Path
    user: Path | None = None
    #: group -> option -> file (recipe options under defaults.RECIPE_GROUP)
    options: dict[str, dict[str, Path]] = field(default_factory=dict)

    def option_file(self, group: str, option: str | None) -> Path | None:
        return self.options.get(group, {}).get(option) if option else None

    def names(self, group: str) -> list[str]:
        return sorted(self.options.get(group, {}))


def _yaml_files(folder: Path, skip: tuple[str, ...] = ()) -> dict[str, Path]:
    found: dict[str, Path] = {}
    if not folder.is_dir():
        return found
    for path in sorted(folder.rglob("*.yaml")):
        rel = path.relative_to(folder)
        if rel.parts[0] in skip or any(part.startswith(".") for part in rel.parts):
            continue
        found[rel.with_suffix("").as_posix()] = path
    return found


def sources(user_recipes: str | os.PathLike[str] | None = None) -> Sources:
    """The committed folders plus the user's (the argument, else ``WHILEAI_RECIPES``)."""
    conf, recipes = _shipped()
    chosen = user_recipes or os.environ.get(defaults.RECIPES_ENV) or None
    user = Path(chosen).expanduser().resolve() if chosen else None
    found = Sources(conf=conf, recipes=recipes, user=user)
    for group in defaults.GROUPS:
        found.options[group] = {p.stem: p for p in sorted((conf / group).glob("*.yaml"))}
    found.options[defaults.RECIPE_GROUP] = _yaml_files(recipes)
    if user is not None:
        for group in defaults.GROUPS:
            found.options[group].update({p.stem: p for p in sorted((user / group).glob("*.yaml"))})
        found.options[defaults.RECIPE_GROUP].update(_yaml_files(user, skip=defaults.GROUPS))
    return found


def register(found: Sources) -> None:
    """Put the recipes (and the user's group options) in Hydra's ConfigStore; later registrations win."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    store = ConfigStore.instance()
    for group in (*defaults.GROUPS, defaults.RECIPE_GROUP):
        for option, path in found.options.get(group, {}).items():
            if group != defaults.RECIPE_GROUP and path.parent.parent == found.conf:
                continue  # conf/ is Hydra's primary folder already
            *sub, leaf = option.split("/")
            node = OmegaConf.load(path)
            package = "_global_" if group == defaults.RECIPE_GROUP or _global_header(path) else None
            store.store(group="/".join([group, *sub]), name=leaf, node=node, package=package)


def _global_header(path: Path) -> bool:
    """True when the file opens with Hydra's ``# @package _global_`` header."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = line.strip()
            if text.startswith("# @package"):
                return text.split()[-1] == "_global_"
            if text and not text.startswith("#"):
                return False
    return False


def new_token() -> str:
    """A folder name for one invocation: UTC time plus TOKEN_RANDOM_HEX random hex characters."""
    import secrets
    import time

    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(defaults.TOKEN_RANDOM_HEX // 2)
