#!/usr/bin/env bash
# equiv_run.sh TREE OUT: short real-data runs of every training path (MLM pretraining, DialogueCSE
# I2/I1, SiameseBERT_S/_M, evaluation) with the code of the checkout TREE, logging the loss of
# every step to OUT/summary.json, to compare two commits step by step. Later commits need
# RECORD_FLAGS=--context_layout=nearest DIALOGUECSE_FLAGS=--variant=paper_text to run the same
# computation (those flags did not exist before), and NUM_LENGTH_BUCKETS=1 for the siamese
# models to encode as before (the length buckets draw other dropout masks).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
TREE="$(cd "$1" && pwd)"; mkdir -p "$2"; OUT="$(cd "$2" && pwd)"
source "${HERE}/../../.venv/bin/activate"
export PYTHONPATH="$TREE" KERAS_BACKEND=tensorflow TF_CPP_MIN_LOG_LEVEL=3
cd "$TREE"
python -c "import dialoguecse_tf; print(dialoguecse_tf.__file__)"
DATA="${HERE}/../../../shared/data"; TRAIN=$DATA/ecd/train/train_data.txt.sample
python data_prep/build_vocab.py --input_file=$TRAIN --input_format=authors --output_dir=$OUT/vocab --vocab_size=8000 --min_count=2 >/dev/null
V=$(wc -l < $OUT/vocab/vocab.txt)
cat > $OUT/bert_config.json <<JSON
{"vocab_size": $V, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "max_position_embeddings": 128, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "type_vocab_size": 2, "initializer_range": 0.02}
JSON
python data_prep/create_pretraining_data.py --input_file=$TRAIN --input_format=authors --vocab_file=$OUT/vocab/vocab.txt --output_dir=$OUT/mlm_records --max_seq_length=50 --max_predictions_per_seq=10 --dupe_factor=1 --random_seed=12345 >/dev/null
python data_prep/create_contrastive_data.py --input_file=$TRAIN --input_format=authors --use_given_candidates=false --vocab_file=$OUT/vocab/vocab.txt --output_dir=$OUT/contrastive_records --max_seq_length=50 --num_context_turns=5 --num_negatives=19 --random_seed=12345 ${RECORD_FLAGS:-} >/dev/null
python pretrain/run_pretraining.py --input_file="$OUT/mlm_records/mlm-*" --output_dir=$OUT/pretrain --bert_config_file=$OUT/bert_config.json --vocab_file=$OUT/vocab/vocab.txt --max_seq_length=50 --max_predictions_per_seq=10 --train_batch_size=32 --learning_rate=1e-3 --num_train_steps=40 --num_warmup_steps=5 --log_steps=1 --random_seed=12345 > $OUT/pretrain.log 2>&1
for m in "dialoguecse_i2 --model_type=dialoguecse --aggregation=mean ${DIALOGUECSE_FLAGS:-}" "dialoguecse_i1 --model_type=dialoguecse --aggregation=attention ${DIALOGUECSE_FLAGS:-}" "siamese_s --model_type=siamese_s ${SIAMESE_FLAGS:-}" "siamese_m --model_type=siamese_m ${SIAMESE_FLAGS:-}"; do
  set -- $m; name=$1; shift
  python finetune/run_finetuning.py --train_file="$OUT/contrastive_records/contrastive-*" --init_checkpoint=$OUT/pretrain/encoder --output_dir=$OUT/finetune/$name --max_seq_length=50 --num_context_turns=3 --num_negatives=9 --temperature=0.1 --num_frozen_layers=1 --train_batch_size=8 --learning_rate=1e-4 --num_train_steps=15 --num_warmup_steps=3 --log_steps=1 --random_seed=12345 "$@" > $OUT/$name.log 2>&1
done
python evaluation/run_evaluation.py --dataset_name=ECD --select_file=$DATA/ecd/dev/select.txt --sts_file=$DATA/ecd/dev/sts.txt --checkpoint=$OUT/pretrain/encoder,$OUT/finetune/dialoguecse_i2/encoder,$OUT/finetune/dialoguecse_i1/encoder,$OUT/finetune/siamese_s/encoder,$OUT/finetune/siamese_m/encoder --model_name=adapt,i2,i1,s,m --max_seq_length=50 --output_dir=$OUT/eval > $OUT/eval.log 2>&1
python - "$OUT" <<'PY'
import glob, json, os, sys
import tensorflow as tf
out = sys.argv[1]; dump = {}
for run in ["pretrain"] + ["finetune/" + n for n in ("dialoguecse_i2", "dialoguecse_i1", "siamese_s", "siamese_m")]:
    vals = {}
    for p in sorted(glob.glob(os.path.join(out, run, "tensorboard", "events.*"))):
        for e in tf.compat.v1.train.summary_iterator(p):
            for v in e.summary.value:
                if v.tag == "loss": vals[e.step] = float(tf.make_ndarray(v.tensor))
    dump[run] = vals
res = json.load(open(os.path.join(out, "eval", "results.json")))
dump["eval"] = {m["display_name"]: m["metrics"] for m in res["models"]}
json.dump(dump, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(dump["eval"]))
PY
