#!/usr/bin/env bash
# MLM pretraining of the small BERT from scratch on 2 CPU cores, as ecd_cpu runs it: preset
# cpu_zh_mlm (dialoguecse_tf/presets.py; 4,000 steps of 50 sequences). Pass --input_file,
# --output_dir, --bert_config_file and --vocab_file; flags given here override the preset.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python pretrain/run_pretraining.py --preset=cpu_zh_mlm "$@"
