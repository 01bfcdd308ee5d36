#!/usr/bin/env bash
# The main job on the project's own data, end to end on 2 CPU cores (about 10-15 minutes):
#   generate the demo corpus (English customer-service dialogues, with held-out SR and D-STS
#   sets) -> WordPiece vocabulary -> MLM and contrastive TFRecords -> MLM pretraining of a small
#   BERT from scratch -> DialogueCSE I2 and I1, SiameseBERT_S and _M -> evaluation of all of
#   them and of the unsupervised baselines -> SavedModel export -> a Table 2-style results table.
# Every step's output goes under RUN_DIR (default runs/demo).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
RUN="${RUN_DIR:-runs/demo}"
PRETRAIN_STEPS="${PRETRAIN_STEPS:-1500}"; FINETUNE_STEPS="${FINETUNE_STEPS:-300}"
mkdir -p "${RUN}"
timings="${RUN}/stage_seconds.tsv"; : > "${timings}"
stage() {  # stage NAME COMMAND...: runs one stage, logging its wall time
  local name="$1"; shift
  echo; echo "=== [$(date +%H:%M:%S)] ${name}"
  local start=${SECONDS}
  "$@"
  printf '%s\t%s\n' "${name}" "$((SECONDS - start))" >> "${timings}"
}
CORPUS="${RUN}/corpus"

stage corpus python data_prep/generate_demo_corpus.py --output_dir="${CORPUS}" --num_dialogues=3000 --seed=0
stage vocab python data_prep/build_vocab.py --input_file="${CORPUS}/train.jsonl" --input_format=jsonl \
  --output_dir="${RUN}/vocab" --vocab_size=2000 --min_count=2
VOCAB="${RUN}/vocab/vocab.txt"
cat > "${RUN}/bert_config.json" <<JSON
{"vocab_size": $(wc -l < "${VOCAB}"), "hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4,
 "intermediate_size": 512, "max_position_embeddings": 64, "hidden_act": "gelu",
 "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "type_vocab_size": 2}
JSON
stage mlm_records python data_prep/create_pretraining_data.py --input_file="${CORPUS}/train.jsonl" \
  --input_format=jsonl --vocab_file="${VOCAB}" --output_dir="${RUN}/mlm_records" --max_seq_length=32 \
  --max_predictions_per_seq=5 --masked_lm_prob=0.15 --dupe_factor=3
stage contrastive_records python data_prep/create_contrastive_data.py --input_file="${CORPUS}/train.jsonl" \
  --input_format=jsonl --vocab_file="${VOCAB}" --output_dir="${RUN}/contrastive_records" --max_seq_length=32 \
  --num_context_turns=3 --num_negatives=9 --max_responses_per_dialogue=3
stage pretrain python pretrain/run_pretraining.py --input_file="${RUN}/mlm_records/mlm-*" \
  --output_dir="${RUN}/pretrain" --bert_config_file="${RUN}/bert_config.json" --vocab_file="${VOCAB}" \
  --max_seq_length=32 --max_predictions_per_seq=5 --train_batch_size=50 --learning_rate=1e-3 \
  --num_train_steps="${PRETRAIN_STEPS}" --num_warmup_steps=100 --save_checkpoints_steps=500 --log_steps=50
ADAPT="${RUN}/pretrain/encoder"

finetune() {  # finetune NAME FLAGS...
  local name="$1"; shift
  stage "finetune_${name}" python finetune/run_finetuning.py --train_file="${RUN}/contrastive_records/contrastive-*" \
    --init_checkpoint="${ADAPT}" --output_dir="${RUN}/finetune/${name}" --max_seq_length=32 \
    --num_context_turns=3 --num_negatives=9 --temperature=0.1 --num_frozen_layers=2 --train_batch_size=20 \
    --learning_rate=1e-4 --num_train_steps="${FINETUNE_STEPS}" --num_warmup_steps=30 \
    --save_checkpoints_steps=100 --log_steps=20 "$@"
}
finetune dialoguecse_i2 --model_type=dialoguecse --aggregation=mean
finetune dialoguecse_i1 --model_type=dialoguecse --aggregation=attention
finetune siamese_s --model_type=siamese_s
finetune siamese_m --model_type=siamese_m

DATASET=(--dataset_name=Demo --select_file="${CORPUS}/sr/select.txt" --sts_file="${CORPUS}/sts/sts.txt")
stage eval_baselines python evaluation/run_evaluation.py "${DATASET[@]}" --checkpoint="${ADAPT}" \
  --model_name='BERT(adapt)' --baselines=avg_token_embeddings,cls,avg,flow,whitening \
  --train_text_file="${CORPUS}/train_sentences.txt" --train_text_format=lines --max_seq_length=32 \
  --flow_steps=500 --output_dir="${RUN}/eval/baselines"
stage eval_dialogue_models python evaluation/run_evaluation.py "${DATASET[@]}" \
  --checkpoint="${RUN}/finetune/siamese_s/encoder,${RUN}/finetune/siamese_m/encoder,${RUN}/finetune/dialoguecse_i1/encoder,${RUN}/finetune/dialoguecse_i2/encoder" \
  --model_name='SiameseBERT_S,SiameseBERT_M,DialogueCSE_I1,DialogueCSE_I2' --pooling=mean --max_seq_length=32 \
  --output_dir="${RUN}/eval/dialogue_models"
stage export python finetune/export_savedmodel.py --checkpoint="${RUN}/finetune/dialoguecse_i2/encoder" \
  --export_dir="${RUN}/export/dialoguecse" --max_seq_length=32 --pooling=mean
stage merge python evaluation/merge_results.py --results="${RUN}/eval/baselines/results.json" \
  --results="${RUN}/eval/dialogue_models/results.json" --output_dir="${RUN}" --output_name=results_table

echo; echo "=== stage wall times (s)"; cat "${timings}"
echo; echo "=== results (${RUN}/results_table.md)"; cat "${RUN}/results_table.md"
