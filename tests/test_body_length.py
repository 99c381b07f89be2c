"""No function body in the package runs over MAX_BODY_LINES lines, from its first statement after the docstring to
its last line (nested functions and classes included), so each reads as a short sequence of named steps."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "whileai"

#: the longest body a reader can still name step by step; past it a step wants a helper with its own name
MAX_BODY_LINES = 60


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


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's last line (0 for a docstring alone)."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return 0
    return (node.end_lineno or node.lineno) - body[0].lineno + 1


def test_no_function_body_in_the_package_runs_over_the_limit():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).as_posix()
        for name, node in _functions(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            lines = _body_lines(node)
            if lines > MAX_BODY_LINES:
                offenders.append(f"{relative}:{node.lineno} {name} has a {lines}-line body")
    assert not offenders, (
        f"{len(offenders)} function(s) with a body over {MAX_BODY_LINES} lines; split each where a reader would "
        "name the steps (a private helper per step, with a docstring saying what it does and returns):\n  "
        + "\n  ".join(offenders))


def test_the_body_starts_after_the_docstring_and_takes_in_nested_functions():
    source = ("@decorator\ndef outer():\n    '''doc\n    more doc'''\n    x = 1\n    def inner():\n"
              "        '''doc'''\n        return x\n    return inner\n\n\ndef only_doc():\n    '''doc'''\n")
    functions = dict(_functions(ast.parse(source)))
    assert set(functions) == {"outer", "outer.inner", "only_doc"}
    assert _body_lines(functions["outer"]) == 5  # x = 1 to return inner, the nested function with its docstring
    assert _body_lines(functions["outer.inner"]) == 1
    assert _body_lines(functions["only_doc"]) == 0


def _unreachable(tree: ast.AST) -> list[int]:
    """Lines of statements that follow a return, raise, continue or break in the same block: code no path runs."""
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                found += [block[i + 1].lineno for i, statement in enumerate(block[:-1])
                          if isinstance(statement, (ast.Return, ast.Raise, ast.Continue, ast.Break))]
    return found


def test_no_statement_follows_a_return_in_the_same_block():
    """A body split into steps must not leave its old tail behind the new return."""
    dead = [f"whileai/{path.relative_to(PACKAGE).as_posix()}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
            for line in _unreachable(ast.parse(path.read_text(encoding="utf-8")))]
    assert not dead, f"unreachable statements at: {', '.join(dead)}"
    assert _unreachable(ast.parse("def f():\n    return 1\n    x = 2\n")) == [3]
