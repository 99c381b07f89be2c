"""What a person sees while a spec runs: one line per step, a bar for training, plain lines off a terminal.

On a terminal (stderr is a TTY) training is a tqdm bar whose ETA comes from
the run's own step and total as the platform reports them; anywhere else
(CI logs, a pipe) progress is a plain line at most every PLAIN_LINE_EVERY_S, so a log stays readable.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any, TypedDict

from whileai.runner import defaults

__all__ = ["Progress", "StepNote", "interrupted_line"]


class StepNote(TypedDict, total=False):
    """What a step says it found, shown after its title on its line; a step that found nothing to say sets none."""

    result: str


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def interrupted_line(run: Any) -> str:
    """What Ctrl-C left, true to the run's ``save_steps``: ``resume`` continues from a checkpoint only if one was saved.

    A local job with no checkpoint has nothing to resume (the platform refuses it; ``reproduce`` runs it
    again); on Modal ``resume`` starts the job again from the start.
    """
    line = f"- {run.id} is {run.status}"
    if run.status != "stopped":
        return line
    config = run.config if isinstance(run.config, dict) else {}
    save_steps, step = config.get("save_steps"), int(run.step or 0)
    resume = f"`python -m whileai resume {run.id}`"
    if isinstance(save_steps, int) and save_steps > 0 and step >= save_steps:
        return line + (f"; {resume} continues it from its last checkpoint "
                       f"(step {step // save_steps * save_steps}; save_steps={save_steps})")
    why = ("it saved no checkpoint (save_steps=0: checkpoints off)" if not save_steps else
           f"it stopped at step {step}, before its first checkpoint (save_steps={save_steps})")
    if config.get("target") == "modal":
        return line + f"; {why}, so {resume} restarts the job from the start"
    return line + (f"; {why}, so there is nothing to resume: `python -m whileai reproduce {run.id}` "
                   "runs it again from the start")


def _phase_kind(phase: Any) -> str | None:
    """A phase without its counts: "sampling the policy's pairs: 40/280 prompts x 2" -> "sampling the policy's pairs"."""
    return str(phase).split(":")[0] if phase else None


class Progress:
    """Step lines and training bars on ``stream`` (stderr by default); ``tty`` None asks the stream."""

    def __init__(self, stream: Any = None, tty: bool | None = None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)()) if tty is None else tty
        self.started = time.monotonic()

    def line(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def interrupted(self, run: Any) -> None:
        """The line after Ctrl-C stopped ``run``: its status and what ``resume`` will do (``interrupted_line``)."""
        self.line(interrupted_line(run))

    @contextlib.contextmanager
    def step(self, title: str) -> Iterator[StepNote]:
        """``with progress.step("push") as note: ...; note["result"] = "ds_..."`` -> one line with the time."""
        note: StepNote = {}
        began = time.monotonic()
        if self.tty:
            print(f"- {title} ...", end="\r", file=self.stream, flush=True)
        try:
            yield note
        except BaseException:
            self.line(f"- {title}: interrupted or failed after {time.monotonic() - began:.1f} s")
            raise
        result = note.get("result")
        self.line(f"- {title}" + (f": {result}" if result else "") + f" ({time.monotonic() - began:.1f} s)")

    def training(self, label: str) -> _TrainingBar:
        return _TrainingBar(self, label)


class _TrainingBar:
    """Follows a run's step/total and phase; ``update(run)`` after each refresh, ``close()`` at the end."""

    def __init__(self, progress: Progress, label: str):
        self.progress = progress
        self.label = label
        self.bar: Any = None
        self.last: tuple[Any, Any, Any] | None = None
        self.began = time.monotonic()
        self.first_step: tuple[float, int] | None = None
        self.printed_at = 0.0
        self.highest = 0  # a resumed job reports from its checkpoint (101) after the stale step (130): never go back

    def _eta(self, step: int, total: int) -> str:
        now = time.monotonic()
        if self.first_step is None or step <= self.first_step[1]:
            return "ETA -"
        rate = (step - self.first_step[1]) / max(now - self.first_step[0], 1e-6)
        return f"ETA {_clock((total - step) / rate)}" if rate > 0 else "ETA -"

    def update(self, run: Any) -> None:
        step, total = run.step, run.total_steps
        if step is not None:
            self.highest = step = max(self.highest, int(step))
        # the job notes its phases: shown before the first step (loading, measuring, sampling) and after the last
        # (measuring after); between them the step count says where it is
        phase = (run.summary or {}).get("phase") if not step or (total and step >= total) else None
        if phase in ("training", "done"):
            phase = None
        if step is not None and self.first_step is None and step > 0:
            self.first_step = (time.monotonic(), int(step))
        if self.progress.tty and total:
            if self.bar is None:
                from tqdm import tqdm

                self.bar = tqdm(total=int(total), desc=self.label, file=self.progress.stream, unit="step",
                                dynamic_ncols=True, leave=True)
            self.bar.total = int(total)
            self.bar.n = int(step or 0)
            self.bar.set_postfix_str(str(phase or ""), refresh=False)
            self.bar.refresh()
            return
        state = (step, total, phase)
        now = time.monotonic()
        # a new phase is written at once; the same phase with new counts ("sampling: 40/280") at the usual pace
        quiet = (now - self.printed_at < defaults.PLAIN_LINE_EVERY_S
                 and _phase_kind(phase) == _phase_kind((self.last or (0, 0, None))[2]))
        if state == self.last or (quiet and step != total):
            return
        self.last, self.printed_at = state, now
        where = f"step {step}/{total}" if total else (f"step {step}" if step is not None else "starting")
        eta = f", {self._eta(int(step), int(total))}" if total and step else ""
        self.progress.line(f"  {self.label}: {where}{eta}" + (f" ({phase})" if phase else ""))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
