#!/usr/bin/env bash
# Runs the four benchmarks of benchmarks/ (encoding throughput and training step vs the
# HuggingFace/PyTorch peer, scaling, FLOP/s) and writes their JSON to benchmarks/results/.
# Installs the `bench` extra (CPU torch, transformers) into .venv first. Run it on an idle
# machine: the timings are only as quiet as the machine. About 25 minutes on 2 CPU cores.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
python -m pip install --quiet -e "${REPO_ROOT}[bench]" 2>&1 | grep -v "is ignored" || true
OUT="${BENCH_DIR:-benchmarks/results}"
mkdir -p "${OUT}"
python benchmarks/encode_throughput.py --output_json="${OUT}/encode_throughput.json"
python benchmarks/train_step.py --output_json="${OUT}/train_step.json"
python benchmarks/flops.py --output_json="${OUT}/flops.json"
python benchmarks/scaling.py --output_json="${OUT}/scaling.json"
