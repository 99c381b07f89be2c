"""The runner's record: where a run came from when the experiment runner started it, and what reproduces it.

A run's spec carries it as ``runner`` (``RunSpec.runner``) and the platform stores it with the run's config. This
is the one declaration of that JSON object: the runner builds it (``whileai.runner.provenance.runner_record``;
the pipeline adds the pushed dataset, its cut, the held-out note and each stage's fields), the spec validates it
at each boundary, and the pages, ``reproduce``, ``diff`` and ``wait`` read it back as stored.

Every key is optional, so a record another caller writes (``wai.train(runner={"recipe": ...})``) reads too, and
its keys grow with the runner (``extra="allow"``), so an older record still reads.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict  # pydantic validates typing's TypedDict only from python 3.12

__all__ = ["RunnerRecord", "GitState", "ConstraintsFile", "PushedNote", "CutNote", "HeldOutNote", "QuickNote", "KeptRows"]


class GitState(TypedDict):
    """The checkout the package runs from: its commit, whether it has uncommitted changes, and a hash of them."""

    commit: str | None
    dirty: bool
    diff_hash: str | None  # None for a clean checkout


class ConstraintsFile(TypedDict):
    """The constraints file a run's installed packages were compared with (``constraints_differ``): its name at the
    checkout's root, and whether it was found there and read. ``found`` False: there was none to compare with (an
    installed wheel has none beside it), and ``constraints_differ`` is None."""

    name: str
    found: bool


class PushedNote(TypedDict):
    """The dataset a run pushed: its id, its content hash and its row count."""

    id: Any
    content_hash: Any
    rows: Any


class CutNote(TypedDict):
    """How many held-out tasks (and their rows) the cut moved to the train side because training asks the same
    prompt, and the first of their task ids."""

    moved_to_train: dict[str, int]  # tasks, rows
    moved_task_ids: list[str]


class HeldOutNote(TypedDict):
    """What the held-out prompts the last stage measures can show, said before training, and a warning where no
    result on them can be significant."""

    note: str
    warning: str | None


class KeptRows(TypedDict):
    """How many of an SFT stage's passing rows a quick run kept, of how many."""

    kept: int
    of: int


class QuickNote(TypedDict, total=False):
    """What a quick run changed (``whileai.runner.quick``), as its record and closing summary carry it: the step and
    held-out caps, the expect keys set aside, and the SFT rows kept where a stage's rows were cut."""

    steps: int
    holdout_rows: int
    expect_not_checked: list[str]
    sft_rows: KeptRows


class RunnerRecord(BaseModel):
    """The record a run's config carries under ``runner``: recipe, overrides, stage, the resolved recipe spec, the
    command, versions and checkout, the data it pushed and cut, the export.

    The fields stand in the order a record's JSON lists them (a dump writes the fields given, in declaration
    order, then any key not declared here), so a new key goes at the end. ``None``: not recorded (a record from
    before the key, or another caller's); an empty list or dict is a recorded value, empty.
    """

    model_config = ConfigDict(extra="allow", frozen=True)

    recipe: str | None = None
    #: the command line's overrides, as typed (``key=value``)
    overrides: list[str] | None = None
    #: the stage's name, its place among the stages and all of their names, for a stage's run
    stage: str | None = None
    stage_index: int | None = None
    stages: list[str] | None = None
    #: the id of the run this stage continues, None where it continues none
    previous_run: str | None = None
    #: the validated recipe spec as plain data, as the recipe and the command line gave it
    spec: dict[str, Any] | None = None
    #: Hydra's choice of each config group
    choices: dict[str, Any] | None = None
    #: the full command line
    command: str | None = None
    #: the versions of what computes (whileai, torch, transformers, trl, peft, python); a package's None: not installed
    versions: dict[str, str | None] | None = None
    #: the packages installed at another version than constraints.txt pins (``{}``: all match); None: nothing was
    #: compared, for want of a file (``constraints_file``) or in a record that did not record it
    constraints_differ: dict[str, dict[str, str | None]] | None = None
    #: the checkout the package runs from, None outside one
    git: GitState | None = None
    sweep_id: str | None = None
    #: Hydra's output folder of the run
    hydra_dir: str | None = None
    #: the run this one reproduces (``python -m whileai reproduce``)
    reproduces: str | None = None
    #: where each expect line was written, so ``wait`` can check a run the runner only submitted
    expect_lines: dict[str, str] | None = None
    #: what a quick run changed; None for a full run
    quick: QuickNote | None = None
    dataset: PushedNote | None = None
    cut: CutNote | None = None
    held_out: HeldOutNote | None = None
    #: the stage's short export report (the domain's report, its keys kept)
    export: dict[str, Any] | None = None
    #: the constraints file ``constraints_differ`` compared with and whether it was found (``found`` False: there was
    #: none to compare with); None: not recorded (``core.stats.constraints_state`` reads a record without it)
    constraints_file: ConstraintsFile | None = None
