#!/usr/bin/env bash
# Evaluates checkpoints on a DialogueCSE corpus's dev files: `eval_dev.sh ecd|jddc FLAGS...`, D-STS
# Corr. and SR MAP/MRR, that corpus's columns of Table 2, at the paper's length (ECD 50, JDDC 100
# tokens). Give at least --checkpoint; the other arguments go on to evaluation/run_evaluation.py
# and override the settings here. On ECD the whitening and flow baselines are fitted on the
# utterances of the ECD training sample; no JDDC training text ships in ../shared/data, so there
# they need --train_text_file. Results go to OUTPUT_DIR (default runs/eval/CORPUS); DATA_DIR
# defaults to ../shared/data/CORPUS.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
corpus="${1:?give the corpus: ecd or jddc}"; shift
case "${corpus}" in
  ecd) name=ECD; length=50; train=(--train_text_file="${DATA_DIR:-../shared/data/ecd}/train/train_data.txt.sample"
                                   --train_text_format=authors) ;;
  jddc) name=JDDC; length=100; train=() ;;
  *) echo "eval_dev.sh: unknown corpus ${corpus} (ecd or jddc)" >&2; exit 2 ;;
esac
data="${DATA_DIR:-../shared/data/${corpus}}"
exec python evaluation/run_evaluation.py --eval_task="${name}:sr:${data}/dev/select.txt" \
  --eval_task="${name}:dsts:${data}/dev/sts.txt" "${train[@]}" --max_seq_length="${length}" \
  --output_dir="${OUTPUT_DIR:-runs/eval/${corpus}}" "$@"
