#!/usr/bin/env bash
# MLM continued pretraining with the paper's MDC setting (section 5.3): preset paper_mdc_mlm in
# dialoguecse_tf/presets.py (lr 2e-5, batch 50, ~0.5 epoch, 10 predictions per sequence, max length
# 50). Pass --input_file, --output_dir and --init_checkpoint (the paper starts from Google's
# BERT-base, e.g. chinese_L-12_H-768_A-12); flags given here override the preset.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python pretrain/run_pretraining.py --preset=paper_mdc_mlm --distribution_strategy=mirrored "$@"
