#!/usr/bin/env bash
# Sets up .venv if needed and runs a declared experiment (experiments/NAME.yaml), e.g.
#   bash run_scripts/experiment.sh run ecd_cpu
#   bash run_scripts/experiment.sh run benchmark --only=zh_eval --rows=dial2vec --dry_run
#   bash run_scripts/experiment.sh list
# Arguments go to dialoguecse-experiment (dialoguecse_tf/cli/experiment.py).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec dialoguecse-experiment "$@"
