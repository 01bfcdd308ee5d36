#!/usr/bin/env bash
# The DialogueCSE contrastive stage with the paper's JDDC setting (sections 4, 5.3): batch 20,
# lr 5e-5, 3 context turns, 9 negatives, temperature 0.1, bottom 6 layers frozen, I2 (mean)
# aggregation, max_seq_length 100. Pass --train_file, --output_dir and --init_checkpoint (the
# MLM stage's output_dir/encoder); add --aggregation=attention for I1, or
# --model_type=siamese_s|siamese_m for the baselines. Later flags override these.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python finetune/run_finetuning.py \
  --model_type=dialoguecse \
  --aggregation=mean \
  --temperature=0.1 \
  --num_context_turns=3 \
  --num_negatives=9 \
  --num_frozen_layers=6 \
  --max_seq_length=100 \
  --train_batch_size=20 \
  --learning_rate=5e-5 \
  --num_train_epochs=1 \
  --num_warmup_steps=1000 \
  --save_checkpoints_steps=1000 \
  --log_steps=100 \
  --eval_steps=5000 \
  --random_seed=12345 \
  --distribution_strategy=mirrored \
  "$@"
