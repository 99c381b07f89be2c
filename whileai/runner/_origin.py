"""Where a spec key was set (the command line, a recipe, a group option, the root config), and the
command-line checks Hydra would otherwise answer with its own, less helpful, errors.

The composition order is the root config, then each group's option, then the
recipe, then the command line; the last file that writes a key is its origin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from whileai.runner import defaults, schema
from whileai.runner._locate import Sources

__all__ = ["Origins", "check_overrides", "line_of"]


def _load(path: Path) -> dict[str, Any]:
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            return yaml.safe_load(f) or {}
    except Exception:
        return {}


def _has(tree: Any, parts: list[str]) -> bool:
    for part in parts:
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True


def line_of(path: Path, key: str) -> int | None:
    """The 1-based line of ``key``'s last segment in a YAML file (the first match at any depth), or None."""
    leaf = key.rsplit(".", 1)[-1]
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if line.lstrip().startswith(f"{leaf}:"):
                    return number
    except OSError:
        return None
    return None


class Origins:
    """``origins(key)``: "command line", or "recipes/x.yaml:12", or "conf/method/grpo.yaml:5"."""

    def __init__(self, found: Sources, choices: dict[str, Any], overrides: list[str]):
        self.found = found
        self.cli_keys = [o.split("=", 1)[0].lstrip("+~") for o in overrides if "=" in o]
        layers: list[tuple[Path, str]] = [(found.conf / "config.yaml", "")]
        for group in defaults.GROUPS:
            path = found.option_file(group, choices.get(group))
            if path is not None:
                layers.append((path, "" if _is_global(path) else group))
        recipe = found.option_file(defaults.RECIPE_GROUP, choices.get(defaults.RECIPE_GROUP))
        if recipe is not None:
            layers.append((recipe, ""))
        self.layers = [(path, package, _load(path)) for path, package in layers]
        self.recipe = recipe

    def show(self, path: Path, key: str | None = None) -> str:
        for base in (self.found.conf.parent, self.found.user):
            if base is not None:
                try:
                    shown = path.relative_to(base).as_posix()
                    break
                except ValueError:
                    continue
        else:
            shown = str(path)
        line = line_of(path, key) if key else None
        return f"{shown}:{line}" if line else shown

    def __call__(self, key: str) -> str:
        if key in self.cli_keys or any(key.startswith(k + ".") for k in self.cli_keys):
            return "command line"
        parts = key.split(".")
        for path, package, tree in reversed(self.layers):
            local = parts[1:] if package and parts[0] == package else (None if package else parts)
            if local is not None and _has(tree, local):
                return self.show(path, key)
        parent = key.rsplit(".", 1)[0] + "." if "." in key else None
        if parent is not None and any(k.startswith(parent) for k in self.cli_keys):
            return "command line"  # a node no file writes that the command line made (stages.new.lora_rank=4)
        return self.show(self.layers[-1][0]) if self.recipe is not None else ""


def _is_global(path: Path) -> bool:
    from whileai.runner._locate import _global_header

    return _global_header(path)


def check_overrides(overrides: list[str], found: Sources) -> tuple[list[str], list[schema.Problem]]:
    """(overrides Hydra may see, problems): typos in keys and unknown group options, caught before Hydra."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    keep: list[str] = []
    problems: list[schema.Problem] = []
    groups = {*defaults.GROUPS, defaults.RECIPE_GROUP}
    known = schema.known_paths()
    for text in overrides:
        try:
            override = parser.parse_override(text)
        except Exception as exc:  # Hydra's grammar: let Hydra say it, with its own message
            del exc
            keep.append(text)
            continue
        key = override.key_or_group
        if key.startswith("hydra") or text.startswith(("+", "~")):
            keep.append(text)
            continue
        if key in groups:
            options = found.names(key)
            values = [str(v) for v in _values(override)]
            bad = [v for v in values if v not in options]
            if bad:
                for value in bad:
                    close = schema.nearest(value, options)
                    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
                    problems.append(schema.Problem(key, f"{key}={value} is not a {key}{hint}; the {key}s are: "
                                                   f"{', '.join(options)}", "command line"))
                continue
            keep.append(text)
            continue
        parts = key.split(".")
        parent = ".".join(parts[:-1])
        lookup = "stages.*" if len(parts) == 3 and parts[0] == "stages" else parent
        accepted = known.get(lookup)
        if accepted is None and len(parts) == 2 and parts[0] == "stages":
            keep.append(text)  # stages.<name>=... sets a whole stage
            continue
        if accepted is None or parts[-1] not in accepted:
            if accepted is None:
                message = schema.unknown_key_message(key, known[""] if len(parts) == 1 else list(known), _typed(text))
            else:
                message = schema.unknown_key_message(key, accepted, _typed(text))
            problems.append(schema.Problem(key, message, "command line"))
            continue
        # a stage's knob its recipe does not set is added, as a root knob is set: a stage node holds only the
        # keys its recipe writes, and Hydra refuses a new key without "+" ("++" adds it or overrides it)
        keep.append(f"++{text}" if lookup == "stages.*" else text)
    return keep, problems


def _typed(text: str) -> str | None:
    """The value of ``key=value`` as typed, for a did-you-mean that can be pasted back."""
    return text.split("=", 1)[1] if "=" in text else None


def _values(override: Any) -> list[Any]:
    if override.is_sweep_override():
        try:
            return list(override.sweep_string_iterator())
        except Exception:
            return []
    return [override.get_value_element_as_str()]
