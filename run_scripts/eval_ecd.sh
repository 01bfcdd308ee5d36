#!/usr/bin/env bash
# Evaluates checkpoints on the ECD dev files: D-STS Corr. and SR MAP/MRR, the E-commerce
# columns of Table 2. Give at least --checkpoint; all arguments go on to
# evaluation/run_evaluation.py and override the settings here (except the dataset files, which
# would add a dataset: call run_evaluation.py directly for other files). Examples:
#   bash run_scripts/eval_ecd.sh --checkpoint=runs/finetune/ecd --model_name=DialogueCSE
#   bash run_scripts/eval_ecd.sh --checkpoint=chinese_L-12_H-768_A-12,runs/pretrain/ecd \
#     --model_name='BERT,BERT(adapt)' --baselines=avg_token_embeddings,cls,avg,flow,whitening
# Whitening and flow are fitted on the utterances of the ECD training sample (authors' format).
# Results go to OUTPUT_DIR (default runs/eval/ecd); DATA_DIR defaults to ../shared/data/ecd.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
DATA_DIR="${DATA_DIR:-../shared/data/ecd}"
exec python evaluation/run_evaluation.py \
  --dataset_name=ECD \
  --select_file="${DATA_DIR}/dev/select.txt" \
  --sts_file="${DATA_DIR}/dev/sts.txt" \
  --train_text_file="${DATA_DIR}/train/train_data.txt.sample" \
  --train_text_format=authors \
  --max_seq_length=50 \
  --output_dir="${OUTPUT_DIR:-runs/eval/ecd}" \
  "$@"
