#!/usr/bin/env bash
# Evaluates checkpoints on the JDDC dev files (run_scripts/eval_dev.sh jddc), e.g.
#   bash run_scripts/eval_jddc.sh --checkpoint=runs/finetune/jddc --model_name=DialogueCSE
#   bash run_scripts/eval_jddc.sh --checkpoint=chinese_L-12_H-768_A-12 --model_name=BERT \
#     --baselines=cls,avg,flow,whitening --train_text_file=jddc_sentences.txt
exec bash "$(dirname "${BASH_SOURCE[0]}")/eval_dev.sh" jddc "$@"
