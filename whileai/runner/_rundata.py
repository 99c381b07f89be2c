"""A run's rows, read once: before its stages are resolved where a stage needs what only the data says.

A GRPO stage leaves its group size and temperature to its dataset when the spec does not set them (``FROM_DATA``).
``wai.train`` reads them from the set the stage trains on, the cut's train side, and resolves the stage again to
fill them in. ``run`` resolves a stage that starts from no other once instead: it reads the same facts here, from
the same rows cut the same way (``datasets.cut_sides``), when the stage's resolution asks for them, which it does
only after every other check of the stage has passed, so a spec with a wrong knob is refused before any row is
read. The data files are checked first (``data_problems``, reported as ``validate`` reports them); the rows read
go on to the pipeline (``Context.rows``), which loads nothing twice.

    data = RunData(origin)
    spec, stages, problems = validated_stages(plain, origin, facts=data.facts)
    problems += data.problems(spec)
    run_spec(spec, Context(..., rows=data.rows), stages)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from whileai.runner._datacheck import data_problems
from whileai.runner.pipeline import ReadRows, load_rows, own_split
from whileai.runner.schema import Problem, RecipeSpec

if TYPE_CHECKING:
    from whileai.simulations.training import DataFacts

__all__ = ["RunData"]


class RunData:
    """The data files' problems and the rows of one run's spec, each read once, when first wanted."""

    def __init__(self, origin: Callable[[str], str]):
        self._origin = origin
        self._problems: list[Problem] | None = None
        #: the rows as ``pipeline.load_rows`` gave them, with the cut's sides; None until read
        self.rows: ReadRows | None = None

    def problems(self, spec: RecipeSpec) -> list[Problem]:
        """What is wrong with the data files ``spec`` names, every line of its rows file read (``data_problems``)."""
        if self._problems is None:
            self._problems = data_problems(spec, self._origin, whole=True)
        return self._problems

    def facts(self, spec: RecipeSpec, tasks: tuple[float, float] | None = None) -> DataFacts | None:
        """The facts GRPO reads of the cut's train side (``data_facts``), or of its ``tasks`` share (a stage's
        ``train_tasks``), or None where the data files have problems (those refuse the run; the stage resolves
        without the facts meanwhile)."""
        from whileai.domain.rows.selection import profile_rows
        from whileai.simulations.training import data_facts

        if self.problems(spec):
            return None
        read = self._read(spec)
        drawn = read.train_rows() if tasks is None else read.share(tasks, spec.dataset.cut_seed)
        train: list[Mapping[str, Any]] = [*drawn]
        return data_facts(profile_rows(train))

    def _read(self, spec: RecipeSpec) -> ReadRows:
        """The rows, read once, and the cut's sides drawn from them as the run will draw them (kept on ``rows``)."""
        import whileai.simulations as wai

        if self.rows is None:
            data = spec.dataset
            rows, what = load_rows(data, spec.environment)
            sides = wai.datasets.cut_sides(rows, data.holdout, data.cut_seed, held_out=own_split(data, rows))
            self.rows = ReadRows(rows, what, sides)
        return self.rows
