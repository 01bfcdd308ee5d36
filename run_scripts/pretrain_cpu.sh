#!/usr/bin/env bash
# A small CPU setting: MLM pretraining of a small BERT from scratch. Pass --input_file,
# --output_dir, --bert_config_file and --vocab_file; later flags override these.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python pretrain/run_pretraining.py \
  --max_seq_length=50 \
  --max_predictions_per_seq=10 \
  --train_batch_size=32 \
  --learning_rate=1e-3 \
  --num_train_epochs=3 \
  --num_warmup_steps=100 \
  --save_checkpoints_steps=500 \
  --log_steps=20 \
  --random_seed=12345 \
  --distribution_strategy=one_device \
  "$@"
