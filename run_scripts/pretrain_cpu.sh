#!/usr/bin/env bash
# A small CPU setting of MLM pretraining for a small BERT trained from scratch: preset cpu_mlm
# (dialoguecse_tf/presets.py). Pass --input_file, --output_dir, --bert_config_file and
# --vocab_file; flags given here override the preset.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python pretrain/run_pretraining.py --preset=cpu_mlm "$@"
