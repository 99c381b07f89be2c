"""Mutation testing of the modules that hold whileai's checks: each one mutated and run against its own tests only.

    python scripts/mutation.py                         # every module in MODULES, one after the other
    python scripts/mutation.py whileai/core/stats.py   # one module (or several)
    python scripts/mutation.py --list                  # the modules and the test files each one runs
    python scripts/mutation.py --keep whileai/core/stats.py   # keep the scratch copy: `mutmut show NAME` works there

mutmut (pinned in pyproject.toml's test extra) changes one thing at a time in a module (``<`` to ``<=``,
``and`` to ``or``, a number plus one, a string with ``XX`` around it, an argument dropped) and runs the
module's tests against each change; a test that fails "kills" the mutant. A mutant no test kills is a
check whose behaviour no test pins. Each module runs in a scratch copy of the checkout (what git lists, new
files included; mutmut writes its ``mutants/`` folder there, never in the checkout), with the test files
MODULES gives it, so a module's score says what its own tests catch.

It prints, per module, the mutants, how many were killed (a timeout counts: the change hung the tests),
how many survived (no test failed, or no test of the module ran the function) and the score. It exits 1
when a module's score is under MIN_SCORE or when a survivor is not listed in SURVIVORS with the reason it
is equivalent or not worth a test; it prints such survivors as rows to paste there once the reason is
written. A survivor is matched by module, function and the mutation itself (the line is shown for the
reader and not compared, so an edit elsewhere in the module does not unlist it). Run it before a change
to one of these modules lands (README.md, Development); tests/test_mutation_script.py keeps MODULES and
SURVIVORS consistent without running mutmut, which takes minutes a module.

mutmut mutates the bodies of functions and methods only: module-level code, class bodies (a pydantic
field's range) and decorated functions (a pydantic validator, a property) are left as they are.
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the committed list of surviving mutants, each with the reason it is left alive
SURVIVORS = ROOT / "tests" / "mutation_survivors.md"
#: the share of a module's mutants its tests must kill: the few left are listed in SURVIVORS, one reason each
MIN_SCORE = 0.90
#: module -> the test files that are its own; only these run against its mutants. The key hashing and account
#: scoping are the store's (store/_accounts.py); platform/accounts.py is the command line over them and holds no
#: rule. Suites that start servers, train or run the whole monitor (test_platform_hardening, test_monitor,
#: test_resolved_spec) are left out: mutmut runs a module's tests once per mutant, so its own tests must be fast.
MODULES: dict[str, tuple[str, ...]] = {
    "whileai/core/_knob.py": ("tests/test_spec.py", "tests/test_spec_checks.py"),
    "whileai/core/_spec_versions.py": ("tests/test_spec.py", "tests/test_spec_checks.py"),
    "whileai/core/_spec_checks.py": ("tests/test_spec.py", "tests/test_spec_checks.py"),
    "whileai/core/_spec_models.py": ("tests/test_spec.py", "tests/test_spec_checks.py"),
    "whileai/core/_spec_io.py": ("tests/test_spec.py", "tests/test_spec_checks.py"),
    "whileai/core/stats.py": ("tests/test_stats.py",),
    "whileai/core/alarms.py": ("tests/test_alarms.py",),
    "whileai/domain/monitor/_arming.py": ("tests/test_monitor_arming.py",),
    "whileai/domain/monitor/_checks.py": ("tests/test_monitor_checks_values.py",),
    "whileai/domain/monitor/_stats.py": ("tests/test_monitor_stats_values.py", "tests/test_monitor_length.py"),
    "whileai/platform/store/_accounts.py": ("tests/test_store_accounts.py",),
    "whileai/platform/api/_guard.py": ("tests/test_guard.py",),
    "whileai/platform/_loadable.py": ("tests/test_loadable.py", "tests/test_loadable_rules.py"),
}
#: mutmut's statuses that count as killed (a timeout or a crash is the tests noticing the change)
KILLED = ("killed", "timeout", "segfault", "caught by type check")
#: what ``mutmut run`` starts: its console script's entry in this interpreter (``python -m mutmut`` would import
#: mutmut.__main__ twice, and its second set_start_method call fails)
MUTMUT = [sys.executable, "-c", "from mutmut.__main__ import cli; cli()"]
#: characters kept on each side of a change when a survivor is shown (enough to tell two changes of one line apart)
CONTEXT_CHARS = 12


@dataclass(frozen=True)
class Survivor:
    """One surviving mutant: where it is and what it changed (``before -> after``, each on one line)."""

    module: str
    line: int
    function: str
    mutation: str
    reason: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return self.module, self.function, self.mutation

    def row(self) -> str:
        """The survivors file's row; the mutation in <code> (a backticked ``mod.name(...)`` would read to
        tests/test_docs_paths.py as a name the docs claim), with ``&`` and ``<`` escaped and ``|`` too."""
        code = self.mutation.replace("&", "&amp;").replace("<", "&lt;")
        cells = [self.module, str(self.line), self.function, f"<code>{code}</code>", self.reason or "TODO: why"]
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


# --------------------------------------------------------------------------- the survivors file


_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def read_survivors(path: Path = SURVIVORS) -> list[Survivor]:
    """The rows of the survivors file's table(s): ``| module | line | function | <code>mutation</code> | reason |``."""
    found = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not text.startswith("| whileai/"):
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in _CELL_SPLIT.split(text.strip())[1:-1]]
        if len(cells) != 5 or not cells[1].isdigit() or not (cells[3].startswith("<code>")
                                                              and cells[3].endswith("</code>")):
            raise ValueError(f"{path.name}:{number}: {text!r} is not a row | module | line | function | "
                             "<code>mutation</code> | reason |; write it as the script prints it")
        if not cells[4] or cells[4].startswith("TODO"):
            raise ValueError(f"{path.name}:{number}: the survivor has no reason; say in one line why it is equivalent "
                             "or not worth a test, or write the test that kills it")
        code = cells[3].removeprefix("<code>").removesuffix("</code>").replace("&lt;", "<").replace("&amp;", "&")
        found.append(Survivor(cells[0], int(cells[1]), cells[2], code, cells[4]))
    return found


def unlisted(found: list[Survivor], listed: list[Survivor]) -> tuple[list[Survivor], list[Survivor]]:
    """The survivors the file does not list, and the listed ones of these modules that no longer survive."""
    left = collections.Counter(s.key for s in listed)
    missing = []
    for survivor in found:
        if left[survivor.key] > 0:
            left[survivor.key] -= 1
        else:
            missing.append(survivor)
    modules = {s.module for s in found}
    stale = [s for s in listed if s.module in modules and left[s.key] > 0]
    return missing, stale


# --------------------------------------------------------------------------- one module's run


def _files() -> list[str]:
    """The checkout's files as git sees them (tracked and new, not ignored): what a scratch copy holds."""
    done = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                          capture_output=True, check=True)
    return [name for name in done.stdout.decode().split("\0") if name and (ROOT / name).is_file()]


def pyproject(module: str, tests: tuple[str, ...], also_copy: list[str]) -> str:
    """The scratch copy's pyproject.toml: the checkout's (its pytest settings) with mutmut told what to mutate and
    run, and to copy ``also_copy`` (what the tests read besides the package: tests/, benchmarks/, recipes/, ...)."""
    lines = ["", "[tool.mutmut]",
             'source_paths = ["whileai"]',
             f"only_mutate = {json.dumps([module])}",
             f"pytest_add_cli_args_test_selection = {json.dumps(list(tests))}",
             'pytest_add_cli_args = ["-p", "no:cacheprovider"]',
             f"also_copy = {json.dumps(also_copy)}",
             "use_git_change_detection = false",
             ""]
    return (ROOT / "pyproject.toml").read_text(encoding="utf-8").rstrip("\n") + "\n" + "\n".join(lines)


def scratch_copy(module: str, tests: tuple[str, ...], where: Path) -> Path:
    """A copy of the checkout under ``where`` whose pyproject.toml has mutmut mutate ``module`` alone."""
    work = Path(tempfile.mkdtemp(prefix=Path(module).stem + "-", dir=where))
    files = _files()
    for name in files:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, work / name)
    tops = sorted({name.split("/")[0] for name in files} - {"whileai", "pyproject.toml"})
    (work / "pyproject.toml").write_text(pyproject(module, tests, tops), encoding="utf-8")
    return work


def run_mutmut(work: Path, max_children: int) -> int:
    """``mutmut run`` in the scratch copy, its output in ``mutmut.log`` there; mutmut's exit status."""
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    env.pop("PYTHONPATH", None)  # the scratch copy's mutants/, never the checkout, is what the tests import
    with open(work / "mutmut.log", "w", encoding="utf-8") as log:
        done = subprocess.run([*MUTMUT, "run", "--max-children", str(max_children)], cwd=work, env=env,
                              stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return done.returncode


def statuses(work: Path, module: str) -> dict[str, str]:
    """Mutant name -> mutmut's status for it (killed, survived, no tests, timeout, ...)."""
    from mutmut.stats import status_by_exit_code

    meta = json.loads((work / "mutants" / (module + ".meta")).read_text(encoding="utf-8"))
    return {name: status_by_exit_code[code] for name, code in meta["exit_code_by_key"].items()}


def _functions(module_path: Path) -> dict[tuple[str | None, str], int]:
    """(class or None, function) -> the line of its ``def``, for the top-level functions and methods."""
    tree = ast.parse(module_path.read_text(encoding="utf-8"))
    found: dict[tuple[str | None, str], int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[(None, node.name)] = node.lineno
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[(node.name, item.name)] = item.lineno
    return found


def describe(work: Path, module: str, name: str, defs: dict[tuple[str | None, str], int]) -> Survivor:
    """What the mutant ``name`` changed, and on which line of the module."""
    import libcst as cst
    from mutmut.mutation.diff_apply import read_functions_from_index, read_mutant_function, read_mutants_module, \
        read_original_function
    from mutmut.utils.format_utils import orig_function_and_class_names_from_key

    with contextlib.chdir(work):
        functions = read_functions_from_index(name, module)
        if functions is None:
            parsed = read_mutants_module(module)
            functions = (read_original_function(parsed, name), read_mutant_function(parsed, name))
    before, after = (cst.Module([f]).code.splitlines() for f in functions)
    function, cls = orig_function_and_class_names_from_key(name)
    function = function.rpartition(".")[-1]
    def_index = next(i for i, text in enumerate(before) if re.match(r"\s*(async\s+)?def\s", text))
    removed: list[str] = []
    added: list[str] = []
    first = None
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag != "equal":
            first = i1 if first is None else first
            removed += [t.strip() for t in before[i1:i2]]
            added += [t.strip() for t in after[j1:j2]]
    line = defs[(cls, function)] + ((first or def_index) - def_index)
    mutation = _changed(" ".join(removed), " ".join(added)) if added else f"{' '.join(removed)} -> (removed)"
    return Survivor(module, line, f"{cls}.{function}" if cls else function, mutation)


def _changed(before: str, after: str) -> str:
    """``before -> after`` cut to the part that differs and CONTEXT_CHARS around it, at word ends."""
    same = 0
    while same < min(len(before), len(after)) and before[same] == after[same]:
        same += 1
    tail = 0
    while tail < min(len(before), len(after)) - same and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    start = before.rfind(" ", 0, max(0, same - CONTEXT_CHARS)) + 1
    keep = max(0, tail - CONTEXT_CHARS)
    cut = before.find(" ", len(before) - keep) if keep else -1
    drop = len(before) - cut if cut != -1 and len(before) - cut <= tail else 0
    return f"{before[start:len(before) - drop]} -> {after[start:len(after) - drop]}"


@dataclass
class Outcome:
    module: str
    mutants: int
    killed: int
    survivors: list[Survivor]
    error: str = ""

    @property
    def score(self) -> float:
        return self.killed / self.mutants if self.mutants else 1.0


def mutate_module(module: str, where: Path, max_children: int, keep: bool) -> Outcome:
    """Mutate ``module`` in a scratch copy and run its own tests against each mutant."""
    work = scratch_copy(module, MODULES[module], where)
    try:
        code = run_mutmut(work, max_children)
        meta = work / "mutants" / (module + ".meta")
        if code != 0 or not meta.exists():
            tail = (work / "mutmut.log").read_text(encoding="utf-8", errors="replace")[-3000:]
            return Outcome(module, 0, 0, [], f"mutmut exited {code}; the end of its log:\n{tail}")
        found = statuses(work, module)
        if "not checked" in found.values():
            return Outcome(module, len(found), 0, [], "mutmut left mutants unchecked (interrupted?)")
        defs = _functions(work / module)
        survivors = [describe(work, module, name, defs) for name, status in sorted(found.items())
                     if status not in KILLED]
        killed = sum(status in KILLED for status in found.values())
        return Outcome(module, len(found), killed, sorted(survivors, key=lambda s: (s.line, s.mutation)))
    finally:
        if keep:
            print(f"  scratch copy kept: {work} (cd there and run `mutmut browse` or `mutmut show NAME`)")
        else:
            shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------- the command


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Mutation testing of the modules in MODULES, each with its own tests.")
    p.add_argument("modules", nargs="*", help="modules to mutate (paths as in MODULES; default: all of them)")
    p.add_argument("--list", action="store_true", help="print the modules and their test files, and run nothing")
    p.add_argument("--max-children", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                   help="mutants tested at once (default: the CPU count, at most 4)")
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()), help="where the scratch copies go")
    p.add_argument("--keep", action="store_true", help="keep each scratch copy (to look at the mutants there)")
    p.add_argument("--survivors", type=Path, default=SURVIVORS, help="the survivors file to check against")
    return p.parse_args(argv)


def _report(outcome: Outcome, listed: list[Survivor]) -> bool:
    """Print one module's line and what is wrong with it; True when it passes."""
    if outcome.error:
        print(f"{outcome.module}: {outcome.error}")
        return False
    survived = outcome.mutants - outcome.killed
    print(f"{outcome.module}: {outcome.mutants} mutants, {outcome.killed} killed, {survived} survived, "
          f"score {outcome.score:.1%}", flush=True)
    missing, stale = unlisted(outcome.survivors, listed)
    ok = outcome.score >= MIN_SCORE and not missing
    if outcome.score < MIN_SCORE:
        print(f"  under {MIN_SCORE:.0%}: write the tests that kill the survivors below")
    if missing:
        print(f"  {len(missing)} survivor(s) not in {SURVIVORS.name}: kill each with a test, or add its row with "
              "the reason it is equivalent or not worth a test:")
        print("\n".join("  " + s.row() for s in missing))
    for s in stale:
        print(f"  listed but killed now (remove its row): {s.row()}")
    return ok


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        print(f"not in MODULES: {unknown}; accepted: {list(MODULES)}", file=sys.stderr)
        return 2
    modules = args.modules or list(MODULES)
    if args.list:
        for module in modules:
            print(f"{module}: {' '.join(MODULES[module])}")
        return 0
    listed = read_survivors(args.survivors)
    args.work.mkdir(parents=True, exist_ok=True)
    passed = [_report(mutate_module(module, args.work, args.max_children, args.keep), listed) for module in modules]
    return 0 if all(passed) else 1


if __name__ == "__main__":
    sys.exit(main())
