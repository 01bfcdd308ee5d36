#!/usr/bin/env bash
# The paper's hyper-parameter analyses on the ECD sample, after run_scripts/ecd_cpu.sh (it reuses
# that run's MLM encoder, contrastive records and first-seed results as the default point):
#   context turns 1..5 (Figure 2) and training data scale, 10/25/50/100 % of the records
#   (Figure 3): DialogueCSE_I2 and SiameseBERT_M side by side at every point, as in the paper;
#   temperature 0.05/0.1/0.2/0.5 (Table 3) and negatives 1/4/9/19 (Table 4): DialogueCSE_I2.
# Each point trains the models with ecd_cpu.sh's settings (first seed, FINETUNE_STEPS steps) but
# one value changed, evaluates them on the ECD and JDDC dev sets, and each sweep writes a table
# and a PNG plot (one panel per metric, one line per model) to RESULTS_DIR. The data-scale points
# keep the first N records (the records follow the sample's dialogue order, so about the first
# N % of the training dialogues) and train the same number of steps, repeating the smaller sets.
# VARIANT (default released) picks the DialogueCSE variant; with "released" num_context_turns
# counts turns on each side of the response, with "paper_text" the nearest turns in total.
# Usage: bash run_scripts/ecd_sweeps.sh [turns] [scale] [temperature] [negatives]   (default: all)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/stage_lib.sh"
cd "${REPO_ROOT}"
DATA="${DATA_DIR:-../shared/data}"
RUN="${RUN_DIR:-runs/ecd_cpu}"
RESULTS="${RESULTS_DIR:-results/ecd_cpu/sweeps}"
FINETUNE_STEPS="${FINETUNE_STEPS:-600}"; LAYERS="${LAYERS:-4}"; FROZEN=$((LAYERS / 2))
VARIANT="${VARIANT:-released}"
SEED="${SEED:-12345}"
SWEEPS=("$@"); [ ${#SWEEPS[@]} -gt 0 ] || SWEEPS=(turns scale temperature negatives)
DEFAULT_RESULTS="${RUN}/eval/dialogue_models/results.json"
for needed in "${RUN}/pretrain/encoder" "${RUN}/contrastive_records/records_info.json" "${DEFAULT_RESULTS}"; do
  [ -e "${needed}" ] || { echo "missing ${needed}: run run_scripts/ecd_cpu.sh first" >&2; exit 1; }
done
mkdir -p "${RESULTS}"
LABEL="DialogueCSE_I2"; [ "${VARIANT}" = released ] || LABEL="DialogueCSE_I2 (${VARIANT})"
declare -A MODEL_FLAGS=(
  [dialoguecse_i2]="--model_type=dialoguecse --variant=${VARIANT} --aggregation=mean"
  [siamese_m]="--model_type=siamese_m"
)
declare -A MODEL_NAMES=([dialoguecse_i2]="${LABEL}" [siamese_m]=SiameseBERT_M)

point() {  # point NAME "MODELS" FLAGS...: trains each model with one change, evaluates them; prints results.json
  local name="$1" models="$2"; shift 2
  local out="${RUN}/sweeps/${name}" checkpoints=() names=()
  # eval/done is written after the evaluation finished: a killed one has written some rows only.
  if [ ! -f "${out}/eval/done" ]; then
    for model in ${models}; do
      if [ ! -e "${out}/${model}/encoder" ]; then
        echo "=== [$(date +%H:%M:%S)] ${name} ${model}" >&2
        # shellcheck disable=SC2086  # MODEL_FLAGS holds several flags
        python finetune/run_finetuning.py --train_file="${RUN}/contrastive_records/contrastive-*" \
          --init_checkpoint="${RUN}/pretrain/encoder" --output_dir="${out}/${model}" --max_seq_length=50 \
          ${MODEL_FLAGS[${model}]} --num_context_turns=3 --num_negatives=9 --temperature=0.1 \
          --num_frozen_layers="${FROZEN}" --train_batch_size=20 --learning_rate=1e-4 \
          --num_train_steps="${FINETUNE_STEPS}" --num_warmup_steps=60 --save_checkpoints_steps=200 --log_steps=10 \
          --random_seed="${SEED}" "$@" >&2
      fi
      checkpoints+=("${out}/${model}/encoder"); names+=("${MODEL_NAMES[${model}]}")
    done
    python evaluation/run_evaluation.py \
      --dataset_name=ECD --select_file="${DATA}/ecd/dev/select.txt" --sts_file="${DATA}/ecd/dev/sts.txt" \
      --dataset_name=JDDC --select_file="${DATA}/jddc/dev/select.txt" --sts_file="${DATA}/jddc/dev/sts.txt" \
      --checkpoint="$(IFS=,; echo "${checkpoints[*]}")" --model_name="$(IFS=,; echo "${names[*]}")" \
      --pooling=mean --max_seq_length=50 --output_dir="${out}/eval" >&2
    touch "${out}/eval/done"
  fi
  echo "${out}/eval/results.json"
}
default_point() {  # default_point "MODELS": ecd_cpu.sh's rows of SEED for these models, as a sweep point
  local out="${RUN}/sweeps/default_$(echo "$1" | tr ' ' '_')/eval" wanted=()
  for model in $1; do wanted+=("${MODEL_NAMES[${model}]}"); done
  mkdir -p "${out}"
  python - "${DEFAULT_RESULTS}" "${out}" "${SEED}" "${wanted[@]}" <<'PY'
import sys
from dialoguecse_tf.evaluation.results_io import read_results
from dialoguecse_tf.evaluation.tables import seed_row_name, write_results
path, out, seed, *names = sys.argv[1:]
results = read_results(path)
by_name = {model["display_name"]: model for model in results["models"]}
missing = [seed_row_name(name, int(seed)) for name in names if seed_row_name(name, int(seed)) not in by_name]
if missing:
    sys.exit(f"{path} has no row {missing}: run run_scripts/ecd_cpu.sh with this seed and variant first")
results["models"] = [{**by_name[seed_row_name(name, int(seed))], "display_name": name} for name in names]
write_results(results, out)
PY
  echo "${out}/results.json"
}
plot() {  # plot PARAMETER VALUE=PATH...
  local parameter="$1"; shift
  local args=()
  for p in "$@"; do args+=(--point="${p}"); done
  python evaluation/plot_sweep.py --parameter="${parameter}" "${args[@]}" --output_dir="${RESULTS}"
}

BOTH="dialoguecse_i2 siamese_m"
for sweep in "${SWEEPS[@]}"; do
  case "${sweep}" in
    turns)
      plot num_context_turns "1=$(point turns_1 "${BOTH}" --num_context_turns=1)" \
        "2=$(point turns_2 "${BOTH}" --num_context_turns=2)" "3=$(default_point "${BOTH}")" \
        "4=$(point turns_4 "${BOTH}" --num_context_turns=4)" "5=$(point turns_5 "${BOTH}" --num_context_turns=5)" ;;
    scale)
      TOTAL=$(python -c "import json;print(json.load(open('${RUN}/contrastive_records/records_info.json'))['stats']['samples_written'])")
      points=()
      for percent in 10 25 50; do
        points+=("${percent}%=$(point "scale_${percent}" "${BOTH}" --max_train_examples=$((TOTAL * percent / 100)))")
      done
      plot train_records "${points[@]}" "100%=$(default_point "${BOTH}")" ;;
    temperature)
      plot temperature "0.05=$(point temperature_0.05 dialoguecse_i2 --temperature=0.05)" \
        "0.1=$(default_point dialoguecse_i2)" "0.2=$(point temperature_0.2 dialoguecse_i2 --temperature=0.2)" \
        "0.5=$(point temperature_0.5 dialoguecse_i2 --temperature=0.5)" ;;
    negatives)
      plot num_negatives "1=$(point negatives_1 dialoguecse_i2 --num_negatives=1)" \
        "4=$(point negatives_4 dialoguecse_i2 --num_negatives=4)" "9=$(default_point dialoguecse_i2)" \
        "19=$(point negatives_19 dialoguecse_i2 --num_negatives=19)" ;;
    *) echo "unknown sweep ${sweep}; use turns, scale, temperature or negatives" >&2; exit 2 ;;
  esac
done
write_command "${RESULTS}/command.txt" "RUN_DIR=${RUN} RESULTS_DIR=${RESULTS} FINETUNE_STEPS=${FINETUNE_STEPS} LAYERS=${LAYERS} VARIANT=${VARIANT} SEED=${SEED} bash run_scripts/ecd_sweeps.sh ${SWEEPS[*]}"
echo "sweep tables and plots in ${RESULTS}"
