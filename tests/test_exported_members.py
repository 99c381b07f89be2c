"""Adding or losing a public name is a visible decision: this list pins wai.__all__."""

import whileai.simulations as wai

EXPECTED = [
    "ExportValidationError",
    "ExportWarning",
    "HackMonitor",
    "MissingPolicyWarning",
    "MonitorWarning",
    "NotFoundError",
    "PlatformError",
    "RowFormatError",
    "ScoredData",
    "ServingWarning",
    "SimulationData",
    "TrackingWarning",
    "TrainerCallback",
    "TrainingConfigError",
    "TrainingRun",
    "TrainingSelectionError",
    "TrainingWarning",
    "WhileaiError",
    "WhileaiWarning",
    "attach_delta",
    "attach_holdout",
    "build_preference_pairs",
    "datasets",
    "defaults",
    "delete_dataset",
    "delete_model",
    "delete_run",
    "delta_report",
    "evaluate",
    "export_dataset",
    "export_preference",
    "export_training",
    "first_action_judge",
    "format_hack_monitor",
    "get_run",
    "judge_pairs",
    "judge_trust",
    "list_runs",
    "loss_mask",
    "models",
    "profile",
    "push",
    "reward_model",
    "selection_report",
    "serve",
    "to_trl",
    "tool_call_roundtrip",
    "train",
    "training_rows",
    "training_run",
    "unserve",
]


def test_all_is_pinned():
    assert wai.__all__ == EXPECTED


def test_every_public_name_resolves():
    for name in wai.__all__:
        assert getattr(wai, name) is not None, name


def test_export_dataset_is_export_training():
    assert wai.export_dataset is wai.export_training


def test_unserve_is_delete_model():
    assert wai.unserve is wai.delete_model


def test_every_exception_and_warning_is_exported_in_one_hierarchy():
    """Each error the SDK raises derives from WhileaiError, each warning from WhileaiWarning, and all are wai names."""
    import inspect

    from whileai.core import errors

    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    assert classes and all(c.__name__ in wai.__all__ for c in classes)
    for c in classes:
        assert issubclass(c, (wai.WhileaiError, wai.WhileaiWarning)), c
    assert issubclass(wai.NotFoundError, wai.PlatformError) and issubclass(wai.TrackingWarning, RuntimeWarning)


def test_no_other_exception_or_warning_class_is_defined_in_the_sdk():
    """A new exception or warning class goes into whileai.core.errors, so the hierarchy stays one module.

    A private class (``_SpoolWriteError``: control flow inside the tracker, caught before it could reach
    the caller) is the module's own business and is not counted.
    """
    import ast
    from pathlib import Path

    root = Path(wai.__file__).parent
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if any(b.endswith(("Error", "Exception", "Warning")) for b in bases):
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name}")
    assert not found, found


def test_public_names_are_visible_to_type_checkers():
    """Every lazily loaded name is also imported under TYPE_CHECKING, so IDEs and mypy see it."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(wai.__file__).read_text(encoding="utf-8"))
    seen: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    seen |= {a.asname or a.name for a in inner.names}
    assert set(wai.__all__) <= seen, sorted(set(wai.__all__) - seen)
