"""The design card in CI: ``grpo_tooluse`` as committed, at a seed no recipe note names, on another CPU kernel path.

The recipes are the project's reproducibility record, so a landing must not depend on the machine or the seed its
figures came from. This runs ``python -m whileai run recipe=grpo_tooluse seed=UNTUNED_SEED`` at full size (the
3,000-task sample, its SFT stage, GRPO with the monitor on, 225 held-out prompts shared with no training task)
under ``ATEN_CPU_CAPABILITY=OTHER_PATH``, which gives torch other float kernels than this machine's own
(AVX-512 or AVX2), and asserts that its ``expect`` passes: GRPO ends significantly above its SFT start and no
alarm fires. The run's record must say it ran on that path and from the packaged base's bytes.

It is the suite's longest single test (about 8 minutes of one process on an idle 2-core machine, 2026-12-05).
"""

from __future__ import annotations

import json

import pytest

from _runner_helpers import record, whileai

pytestmark = pytest.mark.slow

#: a seed that no recipe note and no MEASUREMENTS.md table names: nobody chose the setting by it
UNTUNED_SEED = 23
#: torch's portable kernels: another path than any machine's own vector kernels (torch reads it at import)
OTHER_PATH = "default"


def test_grpo_tooluse_as_committed_passes_its_expect_at_an_untuned_seed_on_another_kernel_path(home):
    from whileai.kit.defaults import BASE_WEIGHTS_SHA256
    from whileai.core import defaults as core_defaults

    done = whileai("run", "recipe=grpo_tooluse", f"seed={UNTUNED_SEED}", "--json",
                   env={"ATEN_CPU_CAPABILITY": OTHER_PATH}, timeout=3600)
    assert done.stdout.strip(), done.stderr[-4000:]
    closing = json.loads(done.stdout.strip().splitlines()[-1])
    stages = {}
    for entry in closing["runs"]:
        training = record(entry["id"])["summary"]["training"]
        stats = training.get("stats") or {}
        stages[entry["stage"]] = training
        print(entry["stage"], training.get("before"), "->", training.get("after"), "n", stats.get("n"),
              "paired", stats.get("paired"), "cpu", training["compute"].get("cpu_capability"))
    assert set(stages) == {"sft", "grpo"}, closing["runs"]
    for training in stages.values():
        assert str(training["compute"]["cpu_capability"]).lower() == OTHER_PATH, training["compute"]
        assert training["base_weights"]["sha256"] == BASE_WEIGHTS_SHA256
    grpo = record(next(e["id"] for e in closing["runs"] if e["stage"] == "grpo"))["summary"]
    # the reward is the exact judge: the monitor arms only the gold-free alarms, says why, and none fires
    assert grpo["monitor"]["alarms"] == [], grpo["monitor"]["alarms"]
    assert grpo["monitor"]["armed"]["divergence"].startswith("off: the reward is the exact first-action judge")
    # GRPO's groups carried signal: enough of them mixed passes and failures
    assert stages["grpo"]["prompts_per_step"] == core_defaults.TRAIN_GRPO_PROMPTS_PER_STEP
    assert stages["grpo"]["mixed_groups"]["mean"] >= core_defaults.TRAIN_GRPO_MIN_MIXED_SHARE
    assert not stages["grpo"].get("groups_note"), stages["grpo"]["groups_note"]
    assert closing["expect"]["passed"] and done.returncode == 0, (
        f"grpo_tooluse at seed {UNTUNED_SEED} under ATEN_CPU_CAPABILITY={OTHER_PATH} failed its expect: "
        f"{closing['expect'].get('failed')}; stderr tail:\n{done.stderr[-3000:]}")
