#!/usr/bin/env bash
# The cross-method benchmark (experiments/benchmark.yaml; --preset=paper: benchmark_paper.yaml,
# a GPU job). Other arguments go to the runner, e.g. --only=zh_eval --rows=dial2vec for one part,
# --only=results to merge the parts present, --dry_run for the plan.
set -euo pipefail
experiment=benchmark
if [ "${1:-}" = --preset=paper ]; then experiment=benchmark_paper; shift; fi
exec bash "$(dirname "${BASH_SOURCE[0]}")/experiment.sh" run "${experiment}" "$@"
