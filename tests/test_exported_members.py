"""Adding or losing a public name is a visible decision: this list pins wai.__all__."""

import whileai.simulations as wai

EXPECTED = [
    "ExportValidationError",
    "ExportWarning",
    "HackMonitor",
    "MirrorWarning",
    "MissingPolicyWarning",
    "MonitorWarning",
    "NotFoundError",
    "PlatformError",
    "RowFormatError",
    "ScoredData",
    "ServingWarning",
    "SimulationData",
    "StoreVersionError",
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
    "resume",
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


# The exception hierarchy (one module, the whole package scanned) is pinned in tests/test_errors.py.


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
