#!/usr/bin/env bash
# The BFCL multi-turn agent's GPU variant (recipes/real/agent_smollm2_bfcl_gpu.yaml) at seeds 0, 1 and 2 on one
# NVIDIA GPU, all three at once, in one command of under ten minutes: scripts/device_real_seeds.sh on this recipe
# alone (its checks, deadline and tables), since beside that script's six runs these three would not finish in one:
#
#   scripts/device_agent_seeds.sh [DIR]         # the table goes to DIR, else to $OUT
#
# Needs what scripts/device_real_seeds.sh needs, and bfcl-eval installed (its backends play the entries; BFCL_DATA
# alone is not enough). A seed is estimated at 5-9 minutes on one GPU (the recipe's notes: not measured yet), so a
# seed the deadline (DEADLINE_S, 480 s) stops is reported as not finished: fewer seeds, never a changed recipe.
# Writes DIR/agent_smollm2_bfcl_gpu.md (each finished seed's held-out before -> after per stage, and the pooled
# paired test), DIR/agent_smollm2_bfcl_gpu.json and each seed's output and log. Exit codes as that script's.
set -euo pipefail
RECIPES=(real/agent_smollm2_bfcl_gpu)
DEVICE_RECIPES="${RECIPES[*]}" exec "$(dirname "$0")/device_real_seeds.sh" "$@"
