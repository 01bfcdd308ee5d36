#!/usr/bin/env bash
# The contrastive stage of the small BERT on 2 CPU cores, as ecd_cpu runs DialogueCSE_I2: preset
# cpu_zh_dialoguecse_i2 (dialoguecse_tf/presets.py): the paper's turns, negatives and temperature,
# half of 4 layers frozen, 600 steps at lr 1e-4. Pass --train_file, --output_dir and
# --init_checkpoint; flags given here override the preset.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python finetune/run_finetuning.py --preset=cpu_zh_dialoguecse_i2 "$@"
