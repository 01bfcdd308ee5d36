#!/usr/bin/env bash
# Runs the benchmarks of benchmarks/ (encoding throughput and training step vs the
# HuggingFace/PyTorch peer, FLOP/s, scaling, input pipeline) and writes their JSON to
# benchmarks/results/. Installs the `bench` extra (CPU torch, transformers) into .venv first.
# TRAIN_FILE (default: the ECD records `dialoguecse-experiment run ecd_cpu` writes) adds the runs on real
# dialogue lengths. Run it on an idle machine; about 45 minutes on 2 CPU cores, more with bfloat16.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
python -m pip install --quiet -e "${REPO_ROOT}[bench]" 2>&1 | grep -v "is ignored" || true
OUT="${BENCH_DIR:-benchmarks/results}"
TRAIN_FILE="${TRAIN_FILE:-runs/ecd_cpu/contrastive_records/contrastive-*}"
mkdir -p "${OUT}"
python -m benchmarks.encode_throughput --output_json="${OUT}/encode_throughput.json"
python -m benchmarks.objective_steps --mode=train_step --output_json="${OUT}/train_step_synthetic.json"
if compgen -G "${TRAIN_FILE}" > /dev/null; then
  python -m benchmarks.objective_steps --mode=train_step --train_file="${TRAIN_FILE}" --output_json="${OUT}/train_step_ecd.json"
  python -m benchmarks.input_pipeline --train_file="${TRAIN_FILE}" \
    --train_step_json="${OUT}/train_step_ecd.json" --output_json="${OUT}/input_pipeline.json"
else
  echo "[benchmarks] no records match ${TRAIN_FILE}: skipping the real-length training step and input pipeline"
fi
python -m benchmarks.dse_step --output_json="${OUT}/dse_step.json"
python -m benchmarks.scaling --objective=dial2vec --output_json="${OUT}/dial2vec_step.json"
python -m benchmarks.objective_steps --output_json="${OUT}/objective_steps.json"
python -m benchmarks.flops --output_json="${OUT}/flops.json"
# bfloat16 (issue 51) where the CPU has bfloat16 arithmetic; elsewhere it would be emulated and is refused.
if python -c "import sys; from dialoguecse_tf.precision import cpu_bfloat16_flags; sys.exit(not cpu_bfloat16_flags())"; then
  python -m benchmarks.flops --precision=float32,bfloat16 --output_json="${OUT}/flops_bfloat16.json"
  python -m benchmarks.encode_throughput --precision=float32,bfloat16 --output_json="${OUT}/encode_throughput_bfloat16.json"
  python -m benchmarks.objective_steps --precision=float32,bfloat16 --output_json="${OUT}/objective_steps_bfloat16.json"
  python -m benchmarks.objective_steps --mode=step_profile --objectives=dialoguecse --precision=float32,bfloat16 \
    --output_json="${OUT}/step_profile_bfloat16.json"
else
  echo "[benchmarks] this CPU has no bfloat16 arithmetic (avx512_bf16, amx_bf16): skipping the bfloat16 runs"
fi
python -m benchmarks.scaling --output_json="${OUT}/scaling.json"
