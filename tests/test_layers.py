"""The package's imports point one way: down the layers, never up, and never round in a circle.

Every module under ``whileai/`` is parsed with ``ast``; its imports are read wherever they
are written (module level, inside functions and methods, ``from . import x`` relative forms,
and ``importlib.import_module("<literal>")`` and ``__import__("<literal>")`` calls) and resolved
to the modules they load. A string that is a whole module name of ours (``"whileai.jobs.sft"``,
``"whileai.jobs.sft:name"``, alone or in a list a process imports later) counts as well: a
lower layer may not name an upper one that way either (``test_no_string_names_a_module_up_a_layer``).
The layers, bottom first, are ``LAYERS`` below; docs/architecture.md draws the same picture.
A package that does not exist yet (``whileai/runner/`` before the runner lands) is simply
empty here; a module outside every layer fails the test, so a new part of the tree has to
take a place in the order.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import whileai

PACKAGE_DIR = Path(whileai.__file__).resolve().parent

#: Bottom first. A module may import its own layer and the layers below it, never above.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("whileai.core",)),
    ("kit", ("whileai.kit",)),
    ("domain", ("whileai.domain",)),
    ("platform", ("whileai.platform",)),
    ("simulations", ("whileai.simulations",)),
    ("jobs", ("whileai.jobs",)),
    ("runner", ("whileai.runner",)),
    ("top", ("whileai", "whileai.__main__")),
]

#: Layers that may not reach each other even downwards: the SDK reaches the platform only
#: through its client seam (HTTP, or the in-process transport wired from outside the SDK); the jobs use
#: the domain, never the SDK that users call (a job is not a client of the SDK's surface).
FORBIDDEN: set[tuple[str, str]] = {("simulations", "platform"), ("jobs", "simulations")}

#: Strings naming a module of an upper layer that are no import: (module, the string) -> why. A program another
#: process runs (``python -m``) is named by whoever starts that process.
PROCESS_TARGETS: dict[tuple[str, str], str] = {
    ("whileai.core.launch", "whileai.jobs.worker"): "the job's program, run as python -m in a process of its own",
}

#: a whole module name of ours, optionally with one of its names (``module:name``)
_MODULE_STRING = re.compile(r"whileai(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*)?")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py"))}


def layer_of(module: str) -> str | None:
    """The layer holding ``module``: the longest matching prefix, so ``whileai.kit.x`` is kit."""
    best, best_len = None, -1
    for layer, prefixes in LAYERS:
        for prefix in prefixes:
            exact_only = prefix in ("whileai", "whileai.__main__")
            hit = module == prefix or (not exact_only and module.startswith(prefix + "."))
            if hit and len(prefix) > best_len:
                best, best_len = layer, len(prefix)
    return best


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that importing ``name`` loads last: itself, or its longest known prefix."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _relative_base(module: str, is_package: bool, level: int) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts)


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, imported module) for every import of ours in ``path``, wherever it is written."""
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []

    def add(line: int, name: str) -> None:
        target = _resolve(name, modules)
        if target is not None and target != module:
            found.append((line, target))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _relative_base(module, is_package, node.level)
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                # `from pkg import mod` loads pkg.mod; `from mod import name` loads mod
                candidate = f"{source}.{alias.name}"
                add(node.lineno, candidate if candidate in modules else source)
        elif isinstance(node, ast.Call) and _is_import_module(node.func):
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                name = node.args[0].value
                if name.startswith("."):
                    level = len(name) - len(name.lstrip("."))
                    # import_module(".x", __name__) is relative to the calling module's package
                    base = _relative_base(module, True if is_package else False, level)
                    name = f"{base}.{name.lstrip('.')}" if name.lstrip(".") else base
                add(node.lineno, name)
    return sorted(set(found))


def _is_import_module(func: ast.expr) -> bool:
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def named_modules(path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module) for every string literal in ``path`` that is a whole module name of ours (``whileai.x.y`` or
    ``whileai.x.y:name``): what a preload list, a ``python -m`` target or an ``import_module(name)`` reads."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.fullmatch(node.value):
            name = node.value.partition(":")[0]
            if name in modules:
                found.add((node.lineno, name))
    return sorted(found)


def upward(module: str, targets: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The (line, target) of ``targets`` that ``module`` may not reach: a layer above its own, or a forbidden one."""
    order = {layer: i for i, (layer, _) in enumerate(LAYERS)}
    here = layer_of(module)
    bad = []
    for line, target in targets:
        there = layer_of(target)
        if here is not None and there is not None and (order[there] > order[here] or (here, there) in FORBIDDEN):
            bad.append((line, target))
    return bad


def import_graph() -> dict[str, list[tuple[int, str]]]:
    modules = all_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, list[tuple[int, str]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as one cycle through it."""
    edges = {m: sorted({t for _, t in targets if t in graph}) for m, targets in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:  # recursion depth is bounded by the module count
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return [_one_cycle(component, edges) for component in components]


def _one_cycle(component: list[str], edges: dict[str, list[str]]) -> list[str]:
    """A concrete loop inside a strongly connected component, for the failure message."""
    inside = set(component)
    start = component[0]
    # breadth-first from start back to start, staying inside the component
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in edges[v]:
                if w not in inside:
                    continue
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, v, start]
                if w not in previous:
                    previous[w] = v
                    nxt.append(w)
        frontier = nxt
    return component


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in all_modules() if layer_of(m) is None)
    assert not unplaced, f"modules outside every layer: {unplaced}; give each a place in LAYERS"


def test_no_import_points_up_a_layer():
    modules = all_modules()
    bad = []
    for module, targets in import_graph().items():
        for line, target in upward(module, targets):
            rel = modules[module].relative_to(PACKAGE_DIR.parent)
            bad.append(f"{rel}:{line} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    assert not bad, "imports against the layer order:\n  " + "\n  ".join(bad)


def test_no_string_names_a_module_up_a_layer():
    """A lower layer does not name an upper one in a string either: a preload list, a module to import later.
    Whoever sits above passes such names down (the warm process's preload comes from the command line)."""
    modules = all_modules()
    bad = []
    for module, path in modules.items():
        for line, target in upward(module, named_modules(path, modules)):
            if (module, target) not in PROCESS_TARGETS:
                rel = path.relative_to(PACKAGE_DIR.parent)
                bad.append(f"{rel}:{line} ({layer_of(module)}) names {target!r} ({layer_of(target)})")
    assert not bad, "strings naming a module of a layer above:\n  " + "\n  ".join(bad)


def test_the_string_reader_catches_a_preload_list_naming_upper_layers(tmp_path):
    """The platform's old preload list, as it stood in platform/defaults.py, is caught, and so are __import__ and
    import_module of an upper layer's module; a docstring, an f-string part and a name of ours that is no module
    (an MLflow tag) are not."""
    modules = {name: Path("x.py") for name in (
        "whileai.platform.defaults", "whileai.platform.embedded", "whileai.jobs.worker", "whileai.jobs.sft",
        "whileai.runner.cli", "whileai.simulations.training")}
    source = tmp_path / "defaults.py"
    source.write_text(
        '"""Names whileai.jobs.worker in prose."""\n'
        'WARM_PRELOAD_OWN = ("whileai.platform.embedded",\n'
        '                    "whileai.jobs.worker", "whileai.jobs.sft",\n'
        '                    "whileai.runner.cli", "whileai.simulations.training")\n'
        'TAG = "whileai.run_id"\n'
        'def f(x):\n'
        '    __import__("whileai.runner.cli")\n'
        '    return f"whileai.jobs.{x}"\n',
        encoding="utf-8",
    )
    named = named_modules(source, modules)
    assert upward("whileai.platform.defaults", named) == [
        (3, "whileai.jobs.sft"), (3, "whileai.jobs.worker"), (4, "whileai.runner.cli"),
        (4, "whileai.simulations.training"), (7, "whileai.runner.cli")]
    assert (7, "whileai.runner.cli") in imports_of("whileai.platform.defaults", source, modules)
    assert upward("whileai.runner.cli", named) == []  # the same names are allowed from above


def test_no_import_cycles():
    graph = import_graph()
    cycles = find_cycles(graph)
    lines = []
    for cycle in cycles:
        where = [f"{a} ({_line_of(graph, a, b)})" for a, b in zip(cycle, cycle[1:])]
        lines.append(" -> ".join(where) + f" -> {cycle[-1]}")
    assert not cycles, "import cycles (module (line of the import that closes the next step)):\n  " + "\n  ".join(lines)


def _line_of(graph: dict[str, list[tuple[int, str]]], module: str, target: str) -> str:
    return "line " + ", ".join(str(line) for line, t in graph[module] if t == target)


def test_the_reader_sees_every_import_form(tmp_path):
    """The parser itself: relative forms, function-level imports and import_module literals count."""
    modules = {
        "whileai.core": Path("x/__init__.py"),
        "whileai.core.a": Path("x/a.py"),
        "whileai.core.b": Path("x/b.py"),
        "whileai.kit": Path("k/__init__.py"),
        "whileai.kit.c": Path("k/c.py"),
        "whileai.simulations": Path("s/__init__.py"),
        "whileai.simulations.d": Path("s/d.py"),
    }
    source = tmp_path / "a.py"
    source.write_text(
        "from . import b\n"
        "import importlib\n"
        "def f():\n"
        "    from ..kit import c\n"
        "    import whileai.simulations.d.name\n"
        "    return importlib.import_module('whileai.kit')\n"
        "class K:\n"
        "    def m(self):\n"
        "        from whileai.simulations import d\n",
        encoding="utf-8",
    )
    found = imports_of("whileai.core.a", source, modules)
    assert found == [
        (1, "whileai.core.b"),
        (4, "whileai.kit.c"),
        (5, "whileai.simulations.d"),
        (6, "whileai.kit"),
        (9, "whileai.simulations.d"),
    ] or sorted(found) == sorted(
        [(1, "whileai.core.b"), (4, "whileai.kit.c"), (5, "whileai.simulations.d"), (6, "whileai.kit"), (9, "whileai.simulations.d")]
    )
    assert layer_of("whileai.runner.cli") == "runner"
    assert layer_of("whileai.__main__") == "top" and layer_of("whileai.__main__x") is None
    graph = {"a": [(1, "b")], "b": [(2, "c")], "c": [(3, "a")], "d": [(1, "a")]}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]


def test_importing_the_sdk_loads_no_platform_module_until_the_embedded_platform_is_used(tmp_path):
    """``import whileai.simulations`` stays off the platform; the package root wires the embedded default."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, whileai.simulations as wai\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('whileai.platform'))\n"
        "assert not loaded, loaded\n"
        "from whileai.domain.client import get_client\n"
        "print(get_client().request('GET', '/me')['name'])\n"
        "assert 'whileai.platform.embedded' in sys.modules\n"
    )
    env = {**os.environ, "WHILEAI_HOME": str(tmp_path)}
    env.pop("WHILEAI_BASE_URL", None)
    env.pop("WHILEAI_API_KEY", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()  # the local account's name


def _package_of(module: str, path: Path) -> str:
    """The package a module belongs to: itself for a package's ``__init__``, else its parent."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _within(importer_package: str, owner: str) -> bool:
    return importer_package == owner or importer_package.startswith(owner + ".")


def private_imports(module: str, path: Path, modules: dict[str, Path]) -> list[str]:
    """Imports in ``path`` of another package's ``_private`` module or ``_private`` name.

    A private module ``a.b._c`` belongs to package ``a.b``; a private name defined in module
    ``a.b.m`` belongs to ``a.b`` too. Modules inside the owning package (and its subpackages)
    may use them; every other package goes through the public names the owner exposes.
    """
    here = _package_of(module, path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    bad: list[str] = []

    def check_module(line: int, name: str) -> None:
        target = _resolve(name, modules)
        if target is None:
            return
        parts = target.split(".")
        for i, part in enumerate(parts):
            if _is_private(part):
                owner = ".".join(parts[:i])
                if not _within(here, owner):
                    bad.append(f"{line}: {target} (private to {owner})")
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                check_module(node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _relative_base(module, is_package, node.level)
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            if not source.startswith("whileai"):
                continue
            check_module(node.lineno, source)
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                if candidate in modules:
                    check_module(node.lineno, candidate)
                elif _is_private(alias.name) and source in modules:
                    owner = _package_of(source, modules[source])
                    if not _within(here, owner):
                        bad.append(f"{node.lineno}: {alias.name} from {source} (private to {owner})")
    return bad


def test_no_private_import_across_packages():
    modules = all_modules()
    bad = []
    for module, path in modules.items():
        for found in private_imports(module, path, modules):
            bad.append(f"{path.relative_to(PACKAGE_DIR.parent)}:{found}")
    assert not bad, "imports of another package's private module or name:\n  " + "\n  ".join(sorted(bad))


def test_the_private_import_reader(tmp_path):
    modules = {
        "whileai.simulations": Path("s/__init__.py"),
        "whileai.simulations._hosting": Path("s/_hosting.py"),
        "whileai.domain.export": Path("s/export/__init__.py"),
        "whileai.domain.export._gate": Path("s/export/_gate.py"),
        "whileai.runner": Path("r/__init__.py"),
        "whileai.runner.schema": Path("r/schema.py"),
    }
    source = tmp_path / "schema.py"
    source.write_text(
        "from whileai.simulations._hosting import check\n"
        "from whileai.domain.export import _gate\n"
        "from whileai.domain.export import export_dataset, _helper\n"
        "from whileai.simulations import export\n",
        encoding="utf-8",
    )
    found = private_imports("whileai.runner.schema", source, modules)
    assert [f.split(":")[0] for f in found] == ["1", "2", "3"]
    inside = tmp_path / "_build.py"
    inside.write_text("from . import _gate\nfrom .._hosting import _x\n", encoding="utf-8")
    assert private_imports("whileai.domain.export._build", inside, modules) == []
