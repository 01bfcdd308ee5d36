#!/usr/bin/env bash
# The DialogueCSE contrastive stage with the paper's JDDC setting: preset paper_jddc_dialoguecse in
# dialoguecse_tf/presets.py, the authors' released code (3 context turns on each side, (1 + alpha)
# round attention, Adam with exponential decay; batch 20, lr 5e-5, 9 negatives, tau 0.1, bottom 6
# layers frozen, max length 100). Pass --train_file (records written with --context_layout=sides),
# --output_dir and --init_checkpoint (the MLM stage's output_dir/encoder). Other presets:
# --preset=paper_jddc_dialoguecse_i2, paper_jddc_dialoguecse_paper_text_i1/_i2 (our reading of the
# paper's equations), paper_jddc_siamese_s/_m (the baselines). Flags given here override the preset.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python train/run_training.py --preset=paper_jddc_dialoguecse --distribution_strategy=mirrored "$@"
