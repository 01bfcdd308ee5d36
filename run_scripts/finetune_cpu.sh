#!/usr/bin/env bash
# A small CPU setting of the contrastive stage for a small BERT (e.g. 4 layers): preset
# cpu_dialoguecse (dialoguecse_tf/presets.py): the paper's turns, negatives and temperature, half
# the layers frozen, a higher learning rate for the short run. Pass --train_file, --output_dir and
# --init_checkpoint; flags given here override the preset.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python finetune/run_finetuning.py --preset=cpu_dialoguecse "$@"
