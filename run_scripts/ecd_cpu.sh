#!/usr/bin/env bash
# The paper's pipeline on the real ECD training sample (../shared/data), sized for 2 CPU cores:
#   vocabulary + MLM pretraining of a small BERT from scratch on all utterances of the sample
#   (no pretrained Chinese BERT is available here), DialogueCSE with each aggregation (each
#   DialogueCSE variant in VARIANTS: "released", the authors' released code, the default, whose
#   round attention is the row "DialogueCSE (release)" and whose I2 mean is not the authors' code;
#   "paper_text", our reading of the paper's equations, I1 and I2; "released paper_text" runs
#   both), SiameseBERT_S/_M, and the
#   unsupervised baselines on the MLM encoder, all evaluated on the ECD dev set and the JDDC dev
#   set (cross-domain).
# DialogueCSE_I2 and SiameseBERT_M, the paper's key comparison, train once per seed in SEEDS
# (default 3 seeds) and the table gives their mean ± sample std; the other rows train with the
# first seed only and are marked "(1 seed)".
# Sizes (environment variables): BERT hidden 128, 4 layers, 4 heads (HIDDEN, LAYERS), MLM
# PRETRAIN_STEPS=4000 at batch 50, contrastive FINETUNE_STEPS=600 at batch 20, lr 1e-4.
# --init_checkpoint=DIR (e.g. chinese_L-12_H-768_A-12) switches to the paper's setting instead:
# continued MLM pretraining of DIR for half an epoch at lr 2e-5 (preset paper_ecd_mlm), the
# authors' own candidates as negatives, and every contrastive run on its paper_ecd_* preset
# (lr 5e-5, batch 20, one epoch, 3 context turns per side, 9 negatives, bottom 6 layers frozen,
# evaluated on ECD dev every 5,000 steps, the best kept and tabled): a GPU job, not a CPU one.
# Outputs go under RUN_DIR (default runs/ecd_cpu); a stage whose output is already there is
# reused (rerun after an interruption, or delete the folder to start over). The merged table and
# every contrastive run's per-step log (loss, positive/negative cosine and their gap) are copied
# to RESULTS_DIR (default results/ecd_cpu) with the command that made them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/stage_lib.sh"
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
SEEDS="${SEEDS:-12345 23456 34567}"
read -r FIRST_SEED _ <<< "${SEEDS}"
mkdir -p "${RUN}" "${RESULTS}/train_logs"
timings="${RUN}/stage_seconds.tsv"; : > "${timings}"

if [ -z "${INIT_CHECKPOINT}" ]; then
  stage vocab "${RUN}/vocab/vocab.txt" python data_prep/build_vocab.py --input_file="${TRAIN}" --input_format=authors \
    --output_dir="${RUN}/vocab" --vocab_size=8000 --min_count=2
  VOCAB="${RUN}/vocab/vocab.txt"
  VOCAB_SIZE=$(wc -l < "${VOCAB}")
  cat > "${RUN}/bert_config.json" <<JSON
{"vocab_size": ${VOCAB_SIZE}, "hidden_size": ${HIDDEN}, "num_hidden_layers": ${LAYERS},
 "num_attention_heads": 4, "intermediate_size": $((HIDDEN * 4)), "max_position_embeddings": 128,
 "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "type_vocab_size": 2, "initializer_range": 0.02}
JSON
  PRETRAIN_FLAGS=(--bert_config_file="${RUN}/bert_config.json" --vocab_file="${VOCAB}" --max_seq_length=50
    --max_predictions_per_seq=10 --train_batch_size=50 --learning_rate=1e-3 --num_train_steps="${PRETRAIN_STEPS}"
    --num_warmup_steps=200 --save_checkpoints_steps=500 --log_steps=50 --random_seed=12345)
  CANDIDATE_FLAGS=(--use_given_candidates=false --num_negatives=19)
  finetune_flags() {  # finetune_flags MODEL: sets FT_FLAGS to the CPU setting, the same for every model
    FT_FLAGS=(--max_seq_length=50 --num_context_turns=3 --num_negatives=9 --temperature=0.1
      --num_frozen_layers="${FROZEN}" --train_batch_size=20 --learning_rate=1e-4
      --num_train_steps="${FINETUNE_STEPS}" --num_warmup_steps=60 --save_checkpoints_steps=200 --log_steps=10)
  }
  ENCODER=encoder
else
  VOCAB="${INIT_CHECKPOINT}/vocab.txt"
  PRETRAIN_FLAGS=(--preset=paper_ecd_mlm --init_checkpoint="${INIT_CHECKPOINT}")
  CANDIDATE_FLAGS=(--use_given_candidates=true --num_negatives=9)
  finetune_flags() {  # finetune_flags MODEL: sets FT_FLAGS to the model's paper preset, evaluated on ECD dev
    FT_FLAGS=(--preset="paper_ecd_$1" --eval_select_file="${DATA}/ecd/dev/select.txt"
      --eval_sts_file="${DATA}/ecd/dev/sts.txt")
  }
  # As the release chose among its checkpoints offline (eval/batch_test_cmd.sh), the table reads
  # the encoder best on ECD dev, the set it reports: dev numbers, not held-out ones.
  ENCODER=best_encoder
fi

stage mlm_records "${RUN}/mlm_records/prep_stats.json" python data_prep/create_pretraining_data.py --input_file="${TRAIN}" --input_format=authors \
  --vocab_file="${VOCAB}" --output_dir="${RUN}/mlm_records" --max_seq_length=50 \
  --max_predictions_per_seq=10 --masked_lm_prob=0.15 --dupe_factor=5 --random_seed=12345
stage contrastive_records "${RUN}/contrastive_records/records_info.json" python data_prep/create_contrastive_data.py \
  --input_file="${TRAIN}" --input_format=authors "${CANDIDATE_FLAGS[@]}" --vocab_file="${VOCAB}" \
  --output_dir="${RUN}/contrastive_records" --max_seq_length=50 --context_layout=sides --num_context_turns=5 \
  --random_seed=12345

stage pretrain "${RUN}/pretrain/encoder" python pretrain/run_pretraining.py --input_file="${RUN}/mlm_records/mlm-*" \
  --output_dir="${RUN}/pretrain" "${PRETRAIN_FLAGS[@]}"
ADAPT="${RUN}/pretrain/encoder"

CHECKPOINTS=(); NAMES=(); CURVES=()
finetune() {  # finetune NAME DISPLAY_NAME PRESET_MODEL SEED FLAGS...
  local name="$1" display="$2" model="$3" seed="$4"; shift 4
  finetune_flags "${model}"
  stage "finetune_${name}_seed${seed}" "${RUN}/finetune/${name}_seed${seed}/encoder" python finetune/run_finetuning.py \
    --train_file="${RUN}/contrastive_records/contrastive-*" --init_checkpoint="${ADAPT}" \
    --output_dir="${RUN}/finetune/${name}_seed${seed}" "${FT_FLAGS[@]}" --random_seed="${seed}" \
    --num_length_buckets="${NUM_LENGTH_BUCKETS}" "$@"
  cp "${RUN}/finetune/${name}_seed${seed}/train_log.jsonl" "${RESULTS}/train_logs/${name}_seed${seed}.jsonl"
  CHECKPOINTS+=("${RUN}/finetune/${name}_seed${seed}/${ENCODER}"); NAMES+=("${display} [seed ${seed}]")
  [ "${seed}" != "${FIRST_SEED}" ] || CURVES+=(--log="${display}=${RESULTS}/train_logs/${name}_seed${seed}.jsonl")
}
for variant in ${VARIANTS}; do
  suffix=""; label=""; preset_suffix=""
  [ "${variant}" = released ] || { suffix="_${variant}"; label=" (${variant})"; preset_suffix="_paper_text"; }
  for seed in ${SEEDS}; do
    finetune "dialoguecse_i2${suffix}" "DialogueCSE_I2${label}" "dialoguecse${preset_suffix}_i2" "${seed}" \
      --model_type=dialoguecse --variant="${variant}" --aggregation=mean
  done
  # Under the released variant "attention" is the release's own (1 + alpha) round attention, not
  # the paper's I1: the row is named after its source.
  i1_preset=dialoguecse; i1_display="DialogueCSE (release)"
  [ "${variant}" = released ] || { i1_preset=dialoguecse_paper_text_i1; i1_display="DialogueCSE_I1${label}"; }
  finetune "dialoguecse_i1${suffix}" "${i1_display}" "${i1_preset}" "${FIRST_SEED}" \
    --model_type=dialoguecse --variant="${variant}" --aggregation=attention
done
finetune siamese_s SiameseBERT_S siamese_s "${FIRST_SEED}" --model_type=siamese_s
for seed in ${SEEDS}; do
  finetune siamese_m SiameseBERT_M siamese_m "${seed}" --model_type=siamese_m
done

DATASETS=(--dataset_name=ECD --select_file="${DATA}/ecd/dev/select.txt" --sts_file="${DATA}/ecd/dev/sts.txt"
          --dataset_name=JDDC --select_file="${DATA}/jddc/dev/select.txt" --sts_file="${DATA}/jddc/dev/sts.txt")
stage eval_baselines "${RUN}/eval/baselines/results.json" python evaluation/run_evaluation.py "${DATASETS[@]}" --checkpoint="${ADAPT}" \
  --model_name='BERT(adapt)' --baselines=avg_token_embeddings,cls,avg,flow,whitening \
  --train_text_file="${TRAIN}" --train_text_format=authors --max_seq_length=50 \
  --output_dir="${RUN}/eval/baselines"
# Rerun whenever the script runs: the list of trained models may have grown.
rm -f "${RUN}/eval/dialogue_models/results.json"
stage eval_dialogue_models "${RUN}/eval/dialogue_models/results.json" python evaluation/run_evaluation.py \
  "${DATASETS[@]}" --checkpoint="$(IFS=,; echo "${CHECKPOINTS[*]}")" --model_name="$(IFS=,; echo "${NAMES[*]}")" \
  --pooling=mean --max_seq_length=50 --output_dir="${RUN}/eval/dialogue_models"
rm -f "${RESULTS}/table.json"
stage merge "${RESULTS}/table.json" python evaluation/merge_results.py --results="${RUN}/eval/baselines/results.json" \
  --results="${RUN}/eval/dialogue_models/results.json" --output_dir="${RESULTS}" --output_name=table

# Loss and positive/negative cosine over the steps, first seed of each model.
python evaluation/plot_train_logs.py "${CURVES[@]}" --output_dir="${RESULTS}" --output_name=train_curves
cp "${timings}" "${RESULTS}/stage_seconds.tsv"
write_command "${RESULTS}/command.txt" "RUN_DIR=${RUN} RESULTS_DIR=${RESULTS} HIDDEN=${HIDDEN} LAYERS=${LAYERS} PRETRAIN_STEPS=${PRETRAIN_STEPS} FINETUNE_STEPS=${FINETUNE_STEPS} NUM_LENGTH_BUCKETS=${NUM_LENGTH_BUCKETS} VARIANTS='${VARIANTS}' SEEDS='${SEEDS}' bash run_scripts/ecd_cpu.sh $*"
cat "${RESULTS}/table.md"
