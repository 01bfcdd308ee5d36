#!/usr/bin/env bash
# Evaluates checkpoints on the ECD dev files (run_scripts/eval_dev.sh ecd), e.g.
#   bash run_scripts/eval_ecd.sh --checkpoint=runs/finetune/ecd --model_name=DialogueCSE
#   bash run_scripts/eval_ecd.sh --checkpoint=chinese_L-12_H-768_A-12,runs/pretrain/ecd \
#     --model_name='BERT,BERT(adapt)' --baselines=avg_token_embeddings,cls,avg,flow,whitening
exec bash "$(dirname "${BASH_SOURCE[0]}")/eval_dev.sh" ecd "$@"
