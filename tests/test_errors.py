"""One hierarchy: every exception and warning class whileai raises lives in whileai.core.errors.

The checks read the whole ``whileai`` package's source (AST, nothing imported but the errors
module), so a class defined anywhere else, a raise of a class that is neither ours nor Python's
own, and a warning issued with a builtin category (or none) fail here, naming file and line.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from pathlib import Path

import whileai
from whileai.core import errors

ROOT = Path(whileai.__file__).parent
OURS = frozenset(errors.__all__)
BUILTIN_EXCEPTIONS = frozenset(
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
)

#: Exception classes allowed outside whileai/core/errors.py, each with its reason.
PRIVATE_CLASSES = {
    "domain/tracking/_spool.py:_SpoolWriteError": (
        "control flow inside the tracker: raised by the spool, caught by the tracker and its flusher, never "
        "reaching a caller (an OSError so the spool's own `except OSError` paths keep working)"
    ),
}

#: Raises of a class that is neither ours nor a builtin, each with its reason.
FOREIGN_RAISES = {
    "domain/client.py:httpx.ReadTimeout": (
        "the embedded platform is an httpx transport, and a transport reports a timeout with httpx's own "
        "class; Client.request turns it into PlatformError(status=0) like any remote timeout"
    ),
}

#: Warnings issued without a category from whileai.core.errors, each with its reason.
UNCATEGORISED_WARNINGS: dict[str, str] = {}


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(ROOT.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _name(node: ast.expr) -> str:
    """``X`` for a Name, ``a.b.X`` for an attribute chain, '' for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _name(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _imported(tree: ast.Module) -> dict[str, str]:
    """Each name a module imports with ``from X import name``: name -> X."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                found[alias.asname or alias.name] = "." * node.level + (node.module or "")
    return found


def _factories() -> dict[tuple[str, str], set[str]]:
    """Every function in the package: (file, name) -> the class names it is annotated to return."""
    returns: dict[tuple[str, str], set[str]] = {}
    for where, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                returns.setdefault((where, node.name), set()).add(_name(node.returns) if node.returns else "")
    return returns


def _module_file(where: str, source: str) -> str:
    """The package file of a module named in an import from ``where`` ('' when it is not ours)."""
    if source.startswith("."):
        level = len(source) - len(source.lstrip("."))
        parts = where.split("/")[:-level] + [p for p in source.lstrip(".").split(".") if p]
    elif source == "whileai" or source.startswith("whileai."):
        parts = source.split(".")[1:]
    else:
        return ""
    stem = "/".join(parts)
    return f"{stem}.py" if (ROOT / f"{stem}.py").exists() else f"{stem}/__init__.py"


def _factory(where: str, name: str, imported: dict[str, str], factories: dict[tuple[str, str], set[str]]) -> set[str] | None:
    """What the function ``name`` (``f`` or ``module.f``) called in ``where`` returns; None when it is not ours."""
    head, _, last = name.rpartition(".")
    if not head:
        if (where, name) in factories:
            return factories[(where, name)]
        home = _module_file(where, imported.get(name, ""))
    else:
        source = imported.get(head.split(".")[0], "")
        home = _module_file(where, f"{source}.{head}" if source and not source.endswith(".") else source + head)
    return factories.get((home, last)) if home else None


def _is_exception_class(node: ast.ClassDef) -> bool:
    for base in node.bases:
        last = _name(base).rsplit(".", 1)[-1]
        if last in BUILTIN_EXCEPTIONS or last in OURS or last.endswith(("Error", "Exception", "Warning")):
            return True
    return False


def test_no_exception_or_warning_class_is_defined_outside_core_errors():
    """A new exception or warning class goes into whileai.core.errors, so the hierarchy stays one module."""
    found = []
    for where, tree in _modules():
        if where == "core/errors.py":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and _is_exception_class(node):
                if f"{where}:{node.name}" not in PRIVATE_CLASSES:
                    found.append(f"whileai/{where}:{node.lineno} class {node.name}: define it in whileai/core/errors.py")
    assert not found, "\n".join(found)


def _allowed_class(name: str, imported: dict[str, str]) -> bool:
    """A class name is ours (imported from whileai, under its one name) or Python's own."""
    if name in OURS:
        source = imported.get(name)
        return source is None or source.startswith((".", "whileai"))
    return name in BUILTIN_EXCEPTIONS and name not in imported


def _raise_problems(where: str, tree: ast.Module, factories: dict[tuple[str, str], set[str]]) -> list[str]:
    imported = _imported(tree)
    assigned: dict[str, list[ast.expr]] = {}  # local names bound to a class (error = A if c else B)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
    local_private = {key.split(":", 1)[1] for key in PRIVATE_CLASSES if key.startswith(f"{where}:")}
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        called = isinstance(node.exc, ast.Call)
        name = _name(node.exc.func if isinstance(node.exc, ast.Call) else node.exc)
        last = name.rsplit(".", 1)[-1]
        if not name:
            problems.append(f"whileai/{where}:{node.lineno} raises an expression the check cannot name")
        elif not called and last[:1].islower():
            continue  # re-raising a caught exception (raise exc)
        elif f"{where}:{name}" in FOREIGN_RAISES or last in local_private:
            continue
        elif _allowed_class(last, imported) if "." not in name else last in OURS:
            continue
        elif called and (built := _factory(where, name, imported, factories)) is not None:  # builds the exception
            bad = sorted(r for r in built if not _allowed_class(r.rsplit(".", 1)[-1], {}))
            if bad:
                problems.append(f"whileai/{where}:{node.lineno} raises {name}(...), annotated to return {bad}; "
                                "annotate it with the class from whileai.core.errors it returns")
        elif last in assigned:
            values = [n.id for value in assigned[last] for n in ast.walk(value) if isinstance(n, ast.Name)]
            bad = [v for v in values if v[:1].isupper() and not _allowed_class(v, imported)]
            if bad:
                problems.append(f"whileai/{where}:{node.lineno} raises {name}, bound to {bad}")
        else:
            problems.append(f"whileai/{where}:{node.lineno} raises {name}, which is neither in whileai.core.errors "
                            "nor a builtin exception")
    return problems


def test_every_raise_is_of_our_hierarchy_or_a_builtin():
    """``raise X(...)``: X is a class of whileai.core.errors, a builtin exception, or a function returning one."""
    factories = _factories()
    problems = [p for where, tree in _modules() for p in _raise_problems(where, tree, factories)]
    assert not problems, "\n".join(problems)


def _warn_problems(where: str, tree: ast.Module) -> list[str]:
    imported = _imported(tree)
    problems = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) in {"warnings.warn", "warn"}):
            continue
        if _name(node.func) == "warn" and imported.get("warn") != "warnings":
            continue
        category = node.args[1] if len(node.args) > 1 else next(
            (k.value for k in node.keywords if k.arg == "category"), None)
        shown = _name(category) if category is not None else "no category (UserWarning)"
        if category is not None and shown in OURS and _allowed_class(shown, imported):
            continue
        if where in UNCATEGORISED_WARNINGS and category is None:
            continue
        problems.append(f"whileai/{where}:{node.lineno} warns with {shown}; pass a WhileaiWarning subclass "
                        "from whileai.core.errors (TrackingWarning, TrainingWarning, ...)")
    return problems


def test_every_warning_has_a_category_from_our_hierarchy():
    """``warnings.filterwarnings`` needs the class: each warning names one of ours, never a builtin or none."""
    problems = [p for where, tree in _modules() for p in _warn_problems(where, tree)]
    assert not problems, "\n".join(problems)


def test_the_checks_catch_what_they_guard():
    """The scans above are not vacuous: a foreign class, a foreign raise and a builtin warning are each caught."""
    source = (
        "import warnings\n"
        "from somewhere import Odd\n"
        "class StrayError(ValueError): ...\n"
        "def f():\n"
        "    raise Odd('x')\n"
        "def g():\n"
        "    warnings.warn('x', RuntimeWarning)\n"
        "    warnings.warn('y')\n"
        "    raise NotFoundError('z')\n"
        "    raise KeyError('k')\n"
    )
    tree = ast.parse(source)
    assert [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and _is_exception_class(n)] == ["StrayError"]
    assert [p.split(" raises ")[1].split(",")[0] for p in _raise_problems("x.py", tree, {})] == ["Odd"]
    assert len(_warn_problems("x.py", tree)) == 2


def test_the_docstring_tree_names_every_class():
    """The module docstring draws the whole tree; a class added without a place in it is caught here."""
    doc = errors.__doc__ or ""
    missing = [name for name in errors.__all__ if f" {name} " not in doc.replace("\n", " ")]
    assert not missing, missing


def test_every_class_has_one_home_and_the_sdk_exports_those_a_caller_meets():
    """Each class derives from WhileaiError or WhileaiWarning (RankEnded, a BaseException like KeyboardInterrupt, is
    the one root of its own: no ``except Exception`` may catch it); each is a wai name or in NOT_IN_SDK with a reason."""
    import inspect

    import whileai.simulations as wai

    classes = {n: c for n, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__}
    assert set(classes) == OURS
    for name, cls in classes.items():
        assert issubclass(cls, (errors.WhileaiError, errors.WhileaiWarning)) or cls is errors.RankEnded, name
        assert (name in wai.__all__) != (name in errors.NOT_IN_SDK), name
    assert set(errors.NOT_IN_SDK) <= OURS and all(errors.NOT_IN_SDK.values())
    assert issubclass(wai.NotFoundError, (wai.PlatformError, LookupError)) and issubclass(wai.TrackingWarning, RuntimeWarning)


def test_old_homes_still_import_the_same_class():
    """Classes that moved into core.errors are still importable where they used to live, as the same class."""
    from whileai.core import package
    from whileai.platform import store
    from whileai.platform.api import _json_rules, common
    from whileai.platform.store import _engine, migrate, values

    assert values.NotFoundError is store.NotFoundError is errors.NotFoundError
    assert values.InvalidError is store.InvalidError is errors.InvalidError
    assert _engine.StoreBusyError is store.StoreBusyError is errors.StoreBusyError
    assert migrate.StoreVersionError is errors.StoreVersionError
    assert common.ApiError is errors.ApiError and _json_rules.BodyRefused is errors.BodyRefused
    assert package.NamespaceImportError is errors.NamespaceImportError
