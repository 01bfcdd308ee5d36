#!/usr/bin/env bash
# MLM continued pretraining with the paper's MDC setting (section 5.3): mask prob 0.15 and
# 10 predictions per sequence (set when writing the records), lr 2e-5, batch 50, ~0.5 epoch,
# max_seq_length 50. Pass --input_file, --output_dir and --init_checkpoint (the paper starts
# from Google's BERT-base, e.g. chinese_L-12_H-768_A-12); later flags override these.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python pretrain/run_pretraining.py \
  --max_seq_length=50 \
  --max_predictions_per_seq=10 \
  --train_batch_size=50 \
  --learning_rate=2e-5 \
  --num_train_epochs=0.5 \
  --num_warmup_steps=1000 \
  --save_checkpoints_steps=1000 \
  --log_steps=100 \
  --random_seed=12345 \
  --distribution_strategy=mirrored \
  "$@"
