#!/usr/bin/env bash
# The paper's hyper-parameter analyses on the ECD sample, after run_scripts/ecd_cpu.sh (it reuses
# that run's MLM encoder, contrastive records and DialogueCSE_I2 result as the default point):
#   temperature 0.05/0.1/0.2/0.5 (Table 3), negatives 1/4/9/19 (Table 4),
#   context turns 1..5 (Figure 2), training data scale (Figure 3).
# Each point trains DialogueCSE_I2 with ecd_cpu.sh's settings but one value changed, evaluates
# it on the ECD and JDDC dev sets, and each sweep writes a table and a PNG plot to RESULTS_DIR.
# VARIANT (default released) picks the DialogueCSE variant; with "released" num_context_turns
# counts turns on each side of the response, with "paper_text" the nearest turns in total.
# Usage: bash run_scripts/ecd_sweeps.sh [temperature] [negatives] [turns] [scale]   (default: all)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
DATA="${DATA_DIR:-../shared/data}"
RUN="${RUN_DIR:-runs/ecd_cpu}"
RESULTS="${RESULTS_DIR:-results/ecd_cpu/sweeps}"
FINETUNE_STEPS="${FINETUNE_STEPS:-600}"; LAYERS="${LAYERS:-4}"; FROZEN=$((LAYERS / 2))
VARIANT="${VARIANT:-released}"
SWEEPS=("$@"); [ ${#SWEEPS[@]} -gt 0 ] || SWEEPS=(temperature negatives turns scale)
DEFAULT_RESULTS="${RUN}/eval/dialogue_models/results.json"
for needed in "${RUN}/pretrain/encoder" "${RUN}/contrastive_records/records_info.json" "${DEFAULT_RESULTS}"; do
  [ -e "${needed}" ] || { echo "missing ${needed}: run run_scripts/ecd_cpu.sh first" >&2; exit 1; }
done
mkdir -p "${RESULTS}"

point() {  # point NAME FLAGS...: trains and evaluates one DialogueCSE_I2 variant; prints its results.json
  local name="$1"; shift
  local out="${RUN}/sweeps/${name}"
  if [ ! -f "${out}/eval/results.json" ]; then
    echo "=== [$(date +%H:%M:%S)] ${name}" >&2
    python finetune/run_finetuning.py --train_file="${RUN}/contrastive_records/contrastive-*" \
      --init_checkpoint="${RUN}/pretrain/encoder" --output_dir="${out}/finetune" --max_seq_length=50 \
      --model_type=dialoguecse --variant="${VARIANT}" --aggregation=mean --num_context_turns=3 --num_negatives=9 --temperature=0.1 \
      --num_frozen_layers="${FROZEN}" --train_batch_size=20 --learning_rate=1e-4 \
      --num_train_steps="${FINETUNE_STEPS}" --num_warmup_steps=60 --save_checkpoints_steps=200 --log_steps=20 \
      --random_seed=12345 "$@" >&2
    python evaluation/run_evaluation.py \
      --dataset_name=ECD --select_file="${DATA}/ecd/dev/select.txt" --sts_file="${DATA}/ecd/dev/sts.txt" \
      --dataset_name=JDDC --select_file="${DATA}/jddc/dev/select.txt" --sts_file="${DATA}/jddc/dev/sts.txt" \
      --checkpoint="${out}/finetune/encoder" --model_name=DialogueCSE_I2 --pooling=mean --max_seq_length=50 \
      --output_dir="${out}/eval" >&2
  fi
  echo "${out}/eval/results.json"
}
# The main run's table holds four models; the sweeps compare DialogueCSE_I2 alone.
default_point() {
  local out="${RUN}/sweeps/default/eval"
  mkdir -p "${out}"
  python - "${DEFAULT_RESULTS}" "${out}" <<'PY'
import sys
from dialoguecse_tf.evaluation.results import read_results, write_results
results = read_results(sys.argv[1])
results["models"] = [m for m in results["models"] if m["display_name"] == "DialogueCSE_I2"]
write_results(results, sys.argv[2])
PY
  echo "${out}/results.json"
}
plot() {  # plot PARAMETER VALUE=PATH...
  local parameter="$1"; shift
  local args=()
  for p in "$@"; do args+=(--point="${p}"); done
  python evaluation/plot_sweep.py --parameter="${parameter}" "${args[@]}" --output_dir="${RESULTS}"
}

DEFAULT="$(default_point)"
for sweep in "${SWEEPS[@]}"; do
  case "${sweep}" in
    temperature)
      plot temperature "0.05=$(point temperature_0.05 --temperature=0.05)" "0.1=${DEFAULT}" \
        "0.2=$(point temperature_0.2 --temperature=0.2)" "0.5=$(point temperature_0.5 --temperature=0.5)" ;;
    negatives)
      plot num_negatives "1=$(point negatives_1 --num_negatives=1)" "4=$(point negatives_4 --num_negatives=4)" \
        "9=${DEFAULT}" "19=$(point negatives_19 --num_negatives=19)" ;;
    turns)
      plot num_context_turns "1=$(point turns_1 --num_context_turns=1)" "2=$(point turns_2 --num_context_turns=2)" \
        "3=${DEFAULT}" "4=$(point turns_4 --num_context_turns=4)" "5=$(point turns_5 --num_context_turns=5)" ;;
    scale)
      TOTAL=$(python -c "import json;print(json.load(open('${RUN}/contrastive_records/records_info.json'))['stats']['samples_written'])")
      plot train_examples "$((TOTAL / 8))=$(point scale_8 --max_train_examples=$((TOTAL / 8)))" \
        "$((TOTAL / 4))=$(point scale_4 --max_train_examples=$((TOTAL / 4)))" \
        "$((TOTAL / 2))=$(point scale_2 --max_train_examples=$((TOTAL / 2)))" "${TOTAL}=${DEFAULT}" ;;
    *) echo "unknown sweep ${sweep}; use temperature, negatives, turns or scale" >&2; exit 2 ;;
  esac
done
echo "sweep tables and plots in ${RESULTS}"
