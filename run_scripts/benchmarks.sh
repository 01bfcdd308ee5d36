#!/usr/bin/env bash
# Runs the benchmarks of benchmarks/ (encoding throughput and training step vs the
# HuggingFace/PyTorch peer, FLOP/s, scaling, input pipeline) and writes their JSON to
# benchmarks/results/. Installs the `bench` extra (CPU torch, transformers) into .venv first.
# TRAIN_FILE (default: the ECD records `dialoguecse-experiment run ecd_cpu` writes) adds the runs on real
# dialogue lengths. Run it on an idle machine; about 45 minutes on 2 CPU cores.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
python -m pip install --quiet -e "${REPO_ROOT}[bench]" 2>&1 | grep -v "is ignored" || true
OUT="${BENCH_DIR:-benchmarks/results}"
TRAIN_FILE="${TRAIN_FILE:-runs/ecd_cpu/contrastive_records/contrastive-*}"
mkdir -p "${OUT}"
python benchmarks/encode_throughput.py --output_json="${OUT}/encode_throughput.json"
python benchmarks/train_step.py --output_json="${OUT}/train_step_synthetic.json"
if compgen -G "${TRAIN_FILE}" > /dev/null; then
  python benchmarks/train_step.py --train_file="${TRAIN_FILE}" --output_json="${OUT}/train_step_ecd.json"
  python benchmarks/input_pipeline.py --train_file="${TRAIN_FILE}" \
    --train_step_json="${OUT}/train_step_ecd.json" --output_json="${OUT}/input_pipeline.json"
else
  echo "[benchmarks] no records match ${TRAIN_FILE}: skipping the real-length training step and input pipeline"
fi
python benchmarks/dse_step.py --output_json="${OUT}/dse_step.json"
python benchmarks/dial2vec_step.py --output_json="${OUT}/dial2vec_step.json"
python benchmarks/objective_steps.py --output_json="${OUT}/objective_steps.json"
python benchmarks/flops.py --output_json="${OUT}/flops.json"
python benchmarks/scaling.py --output_json="${OUT}/scaling.json"
