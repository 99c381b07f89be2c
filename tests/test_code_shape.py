"""The package's bodies stay short enough to read top to bottom: no function or method over MAX_LINES lines."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "whileai"

#: the longest body, decorators and docstring included, that still reads as one set of named steps
MAX_LINES = 80

def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method in ``tree`` with its qualified name (``Class.method``, ``outer.inner``)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((prefix + node.name, node))
            found.extend(_functions(node, f"{prefix}{node.name}."))
        elif isinstance(node, ast.ClassDef):
            found.extend(_functions(node, f"{prefix}{node.name}."))
        else:
            found.extend(_functions(node, prefix))
    return found


def _length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return (node.end_lineno or node.lineno) - first + 1


@functools.cache
def _long_bodies() -> tuple[tuple[str, str, int, int], ...]:
    """``(path, name, line, length)`` of every function in the package over MAX_LINES."""
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for name, node in _functions(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            length = _length(node)
            if length > MAX_LINES:
                long.append((relative, name, node.lineno, length))
    return tuple(long)


def test_no_function_in_the_package_runs_over_the_limit():
    offenders = [f"whileai/{path}:{line} {name} is {length} lines"
                 for path, name, line, length in _long_bodies()]
    assert not offenders, (
        f"{len(offenders)} function(s) over {MAX_LINES} lines; split each into named steps:\n  "
        + "\n  ".join(offenders))


def test_the_scan_counts_decorators_docstrings_and_nested_functions():
    source = "@decorator\ndef outer():\n    '''doc'''\n    def inner():\n        return 1\n    return inner\n"
    functions = dict(_functions(ast.parse(source)))
    assert set(functions) == {"outer", "outer.inner"}
    assert _length(functions["outer"]) == 6
    assert _length(functions["outer.inner"]) == 2
