"""A doc that names a file names one that exists: README.md, docs/ and the folders' READMEs, read as text.

Four kinds of name are checked, wherever they sit in a line (backticks, links, parentheses, prose):

- a repository path (``whileai/platform/store/migrate.py``, ``recipes/gpu/``, ``docs/rows.md#gates``),
  or a file name with a known extension (``export.py``, ``_series.py``), which must be a tracked file
  or folder, or the tail of one (``store/migrate.py``);
- a module path ``whileai.x.y[.name]``: the module is found and the name is defined in it;
- ``python -m whileai <command>`` (a command of whileai/__main__.py) and ``python -m whileai.x``;
- a name in backticks ``module.name`` whose ``name`` is a function or class of the package: ``module``
  must be a module of the package that holds it (``serving.modal.vllm_argv``, not a test's alias), and a
  private ``_name`` must be a module or a name defined somewhere in the repository.

Names that are not files on purpose (a user's own file in an example, a placeholder) are in ALLOWED
with the reason.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Names the docs use that are not repository files or modules, each with why.
ALLOWED = {
    "weather.jsonl": "the reader's own rollouts file in an example",
    "weather.train.jsonl": "the file an example export writes",
    "weather.dpo.jsonl": "the file an example export writes",
    "out.json": "the file an example command writes",
    "out.txt": "the file an example command writes",
    "DIR/dataset/mine.yaml": "a placeholder: the reader's own recipes folder (--recipes DIR)",
    "versions/NNNN_name.py": "the pattern of a schema revision's file name",
    "whileai/platform/store/migrations/versions/NNNN_what.py": "the pattern of a schema revision's file name",
    "alembic.ini": "named to say there is none (the revisions run without one)",
    "_private": "the word for any private module or name, not a name",
    "runner/timings.jsonl": "a file in the user's data root (runner/_estimate.py), not in the repository",
}

_EXTENSIONS = "py|md|yaml|yml|toml|json|jsonl|js|css|html|jinja|sh|txt|ini|cfg|png"


@cache
def _tracked() -> tuple[frozenset[str], frozenset[str]]:
    """(files, folders) git tracks in the repository."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    folders = {str(parent) for f in files for parent in Path(f).parents if str(parent) != "."}
    return frozenset(files), frozenset(folders)


def _docs() -> list[Path]:
    files, _ = _tracked()
    return sorted(ROOT / f for f in files if f.endswith(".md") and not f.startswith("tests/data/")
                  and "/vendor/" not in f)


def _path_pattern() -> re.Pattern[str]:
    files, _ = _tracked()
    tops = "|".join(sorted({re.escape(f.split("/")[0]) for f in files if "/" in f}))
    # not inside a URL, an option, a shell variable or a <placeholder>
    return re.compile(rf"(?<![\w/.:~$<>{{@-])((?:{tops})/[\w./*-]*|(?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXTENSIONS}))"
                      rf"(?![\w/<{{(])")


def _path_exists(path: str) -> bool:
    path = path.split("#", 1)[0].rstrip(".,;:").rstrip("/")
    if not path or path in ALLOWED:
        return True
    if "*" in path:
        return any(ROOT.glob(path))
    files, folders = _tracked()
    if path in files or path in folders:
        return True
    return any(f.endswith("/" + path) for f in files) or any(d.endswith("/" + path) for d in folders)


def _defined(module_file: str) -> set[str]:
    """Every name a module defines, imports or lists in ``__all__`` (read, not imported)."""
    tree = ast.parse(Path(module_file).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {a.asname or a.name.split(".")[0] for a in node.names}
    return names


def _module_name_exists(dotted: str) -> bool:
    """``whileai.a.b`` is a module, or ``whileai.a.b.name`` a name that module defines (or lazily exports)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:i]))
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            break
    else:
        return False
    if i == len(parts):
        return True
    if spec.origin and parts[i] in _defined(spec.origin):
        return i + 1 == len(parts) or _module_name_exists(".".join(parts[: i + 1]))
    try:  # a lazily exported name (the package's __getattr__)
        return hasattr(importlib.import_module(".".join(parts[:i])), parts[i])
    except ImportError:
        return False


@cache
def _package_names() -> tuple[dict[str, set[str]], set[str], set[str], set[str]]:
    """(top-level function or class -> stems of the modules defining it, class names, module stems,
    every name defined anywhere in the repository's Python)."""
    where: dict[str, set[str]] = defaultdict(set)
    classes: set[str] = set()
    stems: set[str] = set()
    everything: set[str] = set()
    files, folders = _tracked()
    stems |= {Path(d).name for d in folders}
    for f in files:
        if not f.endswith(".py") or f.startswith("tests/data/"):
            continue
        stems.add(Path(f).stem)
        tree = ast.parse((ROOT / f).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                everything.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                everything.add(node.id)
        if f.startswith("whileai/"):
            stem = Path(f).parent.name if f.endswith("__init__.py") else Path(f).stem
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    where[node.name].add(stem)
                if isinstance(node, ast.ClassDef):
                    classes.add(node.name)
    return where, classes, stems, everything


def _qualified_name_problem(token: str) -> str | None:
    """What is wrong with a backticked ``a.b`` or ``_name``, or None."""
    where, classes, stems, everything = _package_names()
    if re.fullmatch(r"_[a-z]\w*(\.py)?", token):
        name = token.removesuffix(".py")
        return None if token in ALLOWED or name in stems or name in everything else "no module or name of that name"
    match = re.fullmatch(r"([A-Za-z_]\w*)\.([A-Za-z_]\w*)(\(.*\))?", token)
    if not match:
        return None
    head, name = match.group(1), match.group(2)
    if name not in where or head in where[name] or head in classes or head in {"wai", "whileai"}:
        return None
    try:
        library = importlib.util.find_spec(head)
    except (ImportError, ValueError):
        library = None
    if library is not None:
        return None  # a library's own name (httpx.Client, datasets.Dataset)
    if head in stems:  # a module of the package: it must hold the name (defined or re-exported)
        homes = [f for f in _tracked()[0] if f.startswith("whileai/") and Path(f).stem == head
                 or f.endswith(f"/{head}/__init__.py")]
        return None if any(name in _defined(str(ROOT / f)) for f in homes) else f"{head} does not define {name}"
    return f"{name} lives in {sorted(where[name])}, not in a module named {head}"


def _account_actions() -> set[str]:
    import argparse

    from whileai.platform.accounts import _parser

    return {name for action in _parser()._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices}


#: The commands that take an action word after them, and where their actions are read from.
_ACTIONS = {"accounts": _account_actions, "platform": lambda: {"upgrade"}}


def _problems(path: Path) -> list[str]:
    from whileai.__main__ import COMMANDS

    pattern = _path_pattern()
    problems = []
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in pattern.finditer(line):
            if not _path_exists(match.group(1)):
                problems.append(f"{where}:{number}: no file or folder {match.group(1)!r}")
        for match in re.finditer(r"(?<![\w.])whileai(?:\.\w+)+", line):
            if not _module_name_exists(match.group(0)):
                problems.append(f"{where}:{number}: no module or name {match.group(0)!r}")
        for match in re.finditer(r"python -m (whileai(?:\.[\w.]+)?)(?: +([a-z][\w-]*))?(?: +([a-z][\w-]*))?", line):
            module, command, action = match.group(1), match.group(2), match.group(3)
            if module == "whileai" and command and command not in COMMANDS:
                problems.append(f"{where}:{number}: no command 'python -m whileai {command}' "
                                f"(whileai/__main__.py has {', '.join(COMMANDS)})")
            elif module == "whileai" and command in _ACTIONS and action and action not in _ACTIONS[command]():
                problems.append(f"{where}:{number}: no action 'python -m whileai {command} {action}' "
                                f"(it has {', '.join(sorted(_ACTIONS[command]()))})")
            elif module != "whileai" and importlib.util.find_spec(module) is None:
                problems.append(f"{where}:{number}: no module {module!r} for python -m")
        for match in re.finditer(r"`([^`\n]+)`", line):
            problem = _qualified_name_problem(match.group(1).strip())
            if problem:
                problems.append(f"{where}:{number}: `{match.group(1)}`: {problem}")
    return problems


def test_every_path_module_and_command_the_docs_name_exists():
    docs = _docs()
    assert {"README.md", "docs/architecture.md"} <= {str(d.relative_to(ROOT)) for d in docs}
    problems = [p for doc in docs for p in _problems(doc)]
    assert not problems, "\n".join(problems)


def test_the_allow_list_is_still_needed():
    """An allowed name no doc uses any more leaves the list, so it cannot hide a later mistake."""
    text = "\n".join(doc.read_text(encoding="utf-8") for doc in _docs())
    assert [name for name in ALLOWED if name not in text] == []


@pytest.mark.parametrize("line, caught", [
    ("- Export output (export.py): rows", "export.py"),
    ("the command line is built by `serving_modal.vllm_argv`.", "serving_modal.vllm_argv"),
    ("revisions in whileai/platform/migrations, run on open", "whileai/platform/migrations"),
    ("the row sources (`_rowsource`) group rows", "_rowsource"),
    ("see `whileai.simulations.no_such_module`", "no_such_module"),
    ("then `python -m whileai train recipe=x`", "train"),
    ("`python -m whileai accounts remove alice`", "remove"),
    ("and `rows.no_such_name(x)`", None),  # not a package function: not checked
    ("`whileai/platform/store/migrate.py`, `store/migrate.py`, `python -m whileai sync`", None),
    ("`python -m whileai accounts rotate alice`, `python -m whileai platform upgrade`", None),
])
def test_the_check_catches_stale_names(tmp_path, line, caught):
    """The names the docs had drifted to (issue 26) are each caught; real ones pass."""
    doc = tmp_path / "doc.md"
    doc.write_text(line + "\n", encoding="utf-8")
    found = _problems(doc)
    assert (caught in "\n".join(found)) if caught else not found, found


def test_the_main_jobs_figure_is_the_same_in_the_readme_and_its_recipe():
    """The Quickstart's held-out figure and recipes/sft_tooluse.yaml's comment quote one measurement."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    recipe = (ROOT / "recipes" / "sft_tooluse.yaml").read_text(encoding="utf-8")
    quoted = re.findall(r"0\.000 -> (\d\.\d{3})", readme)
    measured = re.findall(r"measured 0\.000 -> (\d\.\d{3})", recipe)
    assert measured and len(set(measured)) == 1, measured
    assert quoted and set(quoted) == set(measured), (quoted, measured)
