"""The trackio mirror: one trackio run per whileai run, named by the whileai run id, in trackio's local store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import defaults


class TrackioSink:
    name = "trackio"

    def __init__(self, run: Any, where: str):
        self.run = run
        self.where = where
        self.last_step = 0

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        self.last_step = max(self.last_step, step)
        self.run.log(dict(metrics), step=step)

    def finish(self, status: str, final: Mapping[str, Any]) -> None:
        from trackio import AlertLevel

        # trackio has no run summary: the final numbers are points at the last step, the rest an alert
        numbers = {k: float(v) for k, v in final.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if numbers:
            self.run.log(numbers, step=self.last_step)
        text = "; ".join(f"{k.removeprefix('whileai/')}={v}" for k, v in final.items())
        level = AlertLevel.INFO if status == "done" else AlertLevel.ERROR
        self.run.alert(title=f"whileai run {status}", text=text, level=level, step=self.last_step)
        self.run.finish()


def open_trackio(*, run_id: str, name: str, url: str, config: Mapping[str, Any]) -> TrackioSink:
    import trackio
    from trackio.utils import TRACKIO_DIR

    project = defaults.MIRROR_PROJECT
    run = trackio.init(project=project, name=run_id, config={**config, "whileai_name": name}, embed=False,
                       auto_log_gpu=False, auto_log_cpu=False)
    return TrackioSink(run, f"{TRACKIO_DIR} (project {project}, run {run_id})")
