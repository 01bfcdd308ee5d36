#!/usr/bin/env bash
# The issue-49 equality check: the same runs made by the code before the refactor (319a87f) and
# after it (fa77f36), each from a clean clone with no run to reuse, compared number by number.
#   bash compare.sh BEFORE AFTER OUT
# BEFORE and AFTER each hold runs/ (benchmark --only=zh_eval --rows=dialoguecse --seeds=12345, then
# --only=en_eval --rows=dse --seeds=12345) and runs_demo/ (dialoguecse-experiment run demo), made with
#   dialoguecse-experiment run benchmark --only=zh_eval --rows=dialoguecse --seeds=12345 --run_dir=X/runs --results_dir=X/results_zh --reuse_under=
#   dialoguecse-experiment run benchmark --only=en_eval --rows=dse --seeds=12345 --run_dir=X/runs --results_dir=X/results_en --reuse_under=
#   dialoguecse-experiment run demo --run_dir=X/runs_demo --results_dir=X/results_demo --reuse_under=
# OUT gets one compare report per run folder (dialoguecse-experiment compare: every metric, encoder
# weight and logged loss) and data_files.tsv, the SHA-256 of every other file a run wrote but its
# JSON settings and stats (which hold the run's own paths) and the model cards (README.md, new with
# the refactor): vocabularies, records, corpora, the
# HuggingFace and keras-hub exports' weights (the SavedModel's graph is left out: its bytes name
# the functions TensorFlow traced).
set -euo pipefail
before=$1 after=$2 out=$3
mkdir -p "$out"
printf "file\tbefore\tafter\tequal\n" > "$out/data_files.tsv"
for runs in runs runs_demo; do
  for folder in "$before/$runs"/*/; do
    name=$(basename "$folder")
    [ "$name" = logs ] && continue
    report="$out/${runs}_$name.json"
    if dialoguecse-experiment compare "$folder" "$after/$runs/$name" --output="$report" > /dev/null 2>&1; then
      echo "$runs/$name: identical"
    elif python -c "import json, sys; r = json.load(open(sys.argv[1])); sys.exit(any(r[k] for k in ('results', 'checkpoints', 'train_logs')))" "$report"; then
      rm "$report"
      echo "$runs/$name: no metric, weight or loss (its files: data_files.tsv)"
    else
      echo "$runs/$name: DIFFERS, see $report"
    fi
    (cd "$folder" && find . -type f ! -name "*.json" ! -name "*.log" ! -name "*.md" ! -path "*/checkpoints/*" \
        ! -path "*/tensorboard/*" ! -path "*/encoder/*" ! -path "*/best_encoder/*" ! -name "train_log.jsonl" \
        ! -path "*/savedmodel/*" | sort) | while read -r file; do
      a=$(sha256sum "$folder/$file" | cut -c1-64)
      b=$( [ -f "$after/$runs/$name/$file" ] && sha256sum "$after/$runs/$name/$file" | cut -c1-64 || echo missing)
      printf "%s\t%s\t%s\t%s\n" "$runs/$name/${file#./}" "$a" "$b" "$([ "$a" = "$b" ] && echo yes || echo no)" \
        >> "$out/data_files.tsv"
    done
  done
done
