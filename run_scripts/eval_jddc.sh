#!/usr/bin/env bash
# Evaluates checkpoints on the JDDC dev files: D-STS Corr. and SR MAP/MRR, the Jing Dong
# columns of Table 2. Give at least --checkpoint; all arguments go on to
# evaluation/run_evaluation.py and override the settings here (except the dataset files, which
# would add a dataset: call run_evaluation.py directly for other files). Examples:
#   bash run_scripts/eval_jddc.sh --checkpoint=runs/finetune/jddc --model_name=DialogueCSE
#   bash run_scripts/eval_jddc.sh --checkpoint=chinese_L-12_H-768_A-12 --model_name=BERT \
#     --baselines=cls,avg,flow,whitening --train_text_file=jddc_sentences.txt
# No JDDC training text ships in ../shared/data, so the whitening and flow baselines need
# --train_text_file (one sentence per line, or a corpus with --train_text_format).
# Results go to OUTPUT_DIR (default runs/eval/jddc); DATA_DIR defaults to ../shared/data/jddc.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
DATA_DIR="${DATA_DIR:-../shared/data/jddc}"
exec python evaluation/run_evaluation.py \
  --dataset_name=JDDC \
  --select_file="${DATA_DIR}/dev/select.txt" \
  --sts_file="${DATA_DIR}/dev/sts.txt" \
  --max_seq_length=100 \
  --output_dir="${OUTPUT_DIR:-runs/eval/jddc}" \
  "$@"
