#!/usr/bin/env bash
# The paper's pipeline on the real ECD training sample (../shared/data), sized for 2 CPU cores:
#   vocabulary + MLM pretraining of a small BERT from scratch on all utterances of the sample
#   (no pretrained Chinese BERT is available here; pass --init_checkpoint=DIR, e.g.
#   chinese_L-12_H-768_A-12, to continue pretraining it instead, as the paper did),
#   DialogueCSE I2 and I1 (each DialogueCSE variant in VARIANTS: "released", the authors' released
#   code, the default; "paper_text", our reading of the paper's equations; "released paper_text"
#   runs both), SiameseBERT_S/_M, and the unsupervised baselines on the MLM encoder,
#   all evaluated on the ECD dev set and the JDDC dev set (cross-domain).
# Sizes (environment variables): BERT hidden 128, 4 layers, 4 heads (HIDDEN, LAYERS), MLM
# PRETRAIN_STEPS=4000 at batch 50, contrastive FINETUNE_STEPS=600 at batch 20. Outputs go
# under RUN_DIR (default runs/ecd_cpu); the merged table is copied to RESULTS_DIR
# (default results/ecd_cpu) with the command that made it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"

INIT_CHECKPOINT=""
for arg in "$@"; do
  case "${arg}" in
    --init_checkpoint=*) INIT_CHECKPOINT="${arg#--init_checkpoint=}" ;;
    *) echo "unknown argument ${arg} (only --init_checkpoint=DIR is accepted)" >&2; exit 2 ;;
  esac
done
DATA="${DATA_DIR:-../shared/data}"
TRAIN="${DATA}/ecd/train/train_data.txt.sample"
RUN="${RUN_DIR:-runs/ecd_cpu}"
RESULTS="${RESULTS_DIR:-results/ecd_cpu}"
HIDDEN="${HIDDEN:-128}"; LAYERS="${LAYERS:-4}"; FROZEN=$((LAYERS / 2))
PRETRAIN_STEPS="${PRETRAIN_STEPS:-4000}"; FINETUNE_STEPS="${FINETUNE_STEPS:-600}"
# 1 encodes every contrastive step at full padding, as the runs before the length buckets did.
NUM_LENGTH_BUCKETS="${NUM_LENGTH_BUCKETS:-4}"
VARIANTS="${VARIANTS:-released}"
mkdir -p "${RUN}" "${RESULTS}"
timings="${RUN}/stage_seconds.tsv"; : > "${timings}"
stage() {  # stage NAME COMMAND...: runs one stage, logging its wall time
  local name="$1"; shift
  echo "=== [$(date +%H:%M:%S)] ${name}"
  local start=${SECONDS}
  "$@"
  printf '%s\t%s\n' "${name}" "$((SECONDS - start))" >> "${timings}"
}

if [ -z "${INIT_CHECKPOINT}" ]; then
  stage vocab python data_prep/build_vocab.py --input_file="${TRAIN}" --input_format=authors \
    --output_dir="${RUN}/vocab" --vocab_size=8000 --min_count=2
  VOCAB="${RUN}/vocab/vocab.txt"
  VOCAB_SIZE=$(wc -l < "${VOCAB}")
  cat > "${RUN}/bert_config.json" <<JSON
{"vocab_size": ${VOCAB_SIZE}, "hidden_size": ${HIDDEN}, "num_hidden_layers": ${LAYERS},
 "num_attention_heads": 4, "intermediate_size": $((HIDDEN * 4)), "max_position_embeddings": 128,
 "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "type_vocab_size": 2, "initializer_range": 0.02}
JSON
  MODEL_FLAGS=(--bert_config_file="${RUN}/bert_config.json" --vocab_file="${VOCAB}")
  PRETRAIN_LR=1e-3
else
  VOCAB="${INIT_CHECKPOINT}/vocab.txt"
  MODEL_FLAGS=(--init_checkpoint="${INIT_CHECKPOINT}")
  FROZEN=6; PRETRAIN_LR=2e-5
fi

stage mlm_records python data_prep/create_pretraining_data.py --input_file="${TRAIN}" --input_format=authors \
  --vocab_file="${VOCAB}" --output_dir="${RUN}/mlm_records" --max_seq_length=50 \
  --max_predictions_per_seq=10 --masked_lm_prob=0.15 --dupe_factor=5 --random_seed=12345
stage contrastive_records python data_prep/create_contrastive_data.py --input_file="${TRAIN}" \
  --input_format=authors --use_given_candidates=false --vocab_file="${VOCAB}" \
  --output_dir="${RUN}/contrastive_records" --max_seq_length=50 --context_layout=sides --num_context_turns=5 \
  --num_negatives=19 \
  --random_seed=12345

stage pretrain python pretrain/run_pretraining.py --input_file="${RUN}/mlm_records/mlm-*" \
  --output_dir="${RUN}/pretrain" "${MODEL_FLAGS[@]}" --max_seq_length=50 --max_predictions_per_seq=10 \
  --train_batch_size=50 --learning_rate="${PRETRAIN_LR}" --num_train_steps="${PRETRAIN_STEPS}" \
  --num_warmup_steps=200 --save_checkpoints_steps=500 --log_steps=50 --random_seed=12345
ADAPT="${RUN}/pretrain/encoder"

finetune() {  # finetune NAME FLAGS...
  local name="$1"; shift
  stage "finetune_${name}" python finetune/run_finetuning.py --train_file="${RUN}/contrastive_records/contrastive-*" \
    --init_checkpoint="${ADAPT}" --output_dir="${RUN}/finetune/${name}" --max_seq_length=50 \
    --num_context_turns=3 --num_negatives=9 --temperature=0.1 --num_frozen_layers="${FROZEN}" \
    --train_batch_size=20 --learning_rate=1e-4 --num_train_steps="${FINETUNE_STEPS}" --num_warmup_steps=60 \
    --save_checkpoints_steps=200 --log_steps=20 --random_seed=12345 --num_length_buckets="${NUM_LENGTH_BUCKETS}" "$@"
}
CHECKPOINTS=(); NAMES=()
for variant in ${VARIANTS}; do
  suffix=""; label=""
  [ "${variant}" = released ] || { suffix="_${variant}"; label=" (${variant})"; }
  finetune "dialoguecse_i2${suffix}" --model_type=dialoguecse --variant="${variant}" --aggregation=mean
  finetune "dialoguecse_i1${suffix}" --model_type=dialoguecse --variant="${variant}" --aggregation=attention
  CHECKPOINTS+=("${RUN}/finetune/dialoguecse_i1${suffix}/encoder" "${RUN}/finetune/dialoguecse_i2${suffix}/encoder")
  NAMES+=("DialogueCSE_I1${label}" "DialogueCSE_I2${label}")
done
finetune siamese_s --model_type=siamese_s
finetune siamese_m --model_type=siamese_m

DATASETS=(--dataset_name=ECD --select_file="${DATA}/ecd/dev/select.txt" --sts_file="${DATA}/ecd/dev/sts.txt"
          --dataset_name=JDDC --select_file="${DATA}/jddc/dev/select.txt" --sts_file="${DATA}/jddc/dev/sts.txt")
stage eval_baselines python evaluation/run_evaluation.py "${DATASETS[@]}" --checkpoint="${ADAPT}" \
  --model_name='BERT(adapt)' --baselines=avg_token_embeddings,cls,avg,flow,whitening \
  --train_text_file="${TRAIN}" --train_text_format=authors --max_seq_length=50 \
  --output_dir="${RUN}/eval/baselines"
stage eval_dialogue_models python evaluation/run_evaluation.py "${DATASETS[@]}" \
  --checkpoint="${RUN}/finetune/siamese_s/encoder,${RUN}/finetune/siamese_m/encoder,$(IFS=,; echo "${CHECKPOINTS[*]}")" \
  --model_name="SiameseBERT_S,SiameseBERT_M,$(IFS=,; echo "${NAMES[*]}")" --pooling=mean --max_seq_length=50 \
  --output_dir="${RUN}/eval/dialogue_models"
stage merge python evaluation/merge_results.py --results="${RUN}/eval/baselines/results.json" \
  --results="${RUN}/eval/dialogue_models/results.json" --output_dir="${RESULTS}" --output_name=table

cp "${timings}" "${RESULTS}/stage_seconds.tsv"
{
  echo "# produced by:"
  echo "RUN_DIR=${RUN} RESULTS_DIR=${RESULTS} HIDDEN=${HIDDEN} LAYERS=${LAYERS} PRETRAIN_STEPS=${PRETRAIN_STEPS} FINETUNE_STEPS=${FINETUNE_STEPS} NUM_LENGTH_BUCKETS=${NUM_LENGTH_BUCKETS} VARIANTS='${VARIANTS}' bash run_scripts/ecd_cpu.sh $*"
  echo "# commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
} > "${RESULTS}/command.txt"
cat "${RESULTS}/table.md"
