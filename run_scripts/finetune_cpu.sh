#!/usr/bin/env bash
# A small CPU setting of the contrastive stage for a small BERT (e.g. 4 layers): the paper's
# turns, negatives and temperature, half the layers frozen, a higher learning rate for the
# short run. Pass --train_file, --output_dir and --init_checkpoint; later flags override these.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python finetune/run_finetuning.py \
  --model_type=dialoguecse \
  --aggregation=mean \
  --temperature=0.1 \
  --num_context_turns=3 \
  --num_negatives=9 \
  --num_frozen_layers=2 \
  --max_seq_length=50 \
  --train_batch_size=20 \
  --learning_rate=2e-4 \
  --num_train_epochs=1 \
  --num_warmup_steps=50 \
  --save_checkpoints_steps=500 \
  --log_steps=20 \
  --random_seed=12345 \
  --distribution_strategy=one_device \
  "$@"
