#!/usr/bin/env bash
# The main job on the project's own demo data (experiments/demo.yaml): sets up .venv if needed,
# generates the demo corpus, trains DialogueCSE_I2, DSE and dial2vec from the installed MiniLM,
# evaluates them and MiniLM on every task, exports the DialogueCSE encoder three ways, and prints
# the table. Runs go under runs/demo, results under runs/demo/results; finished runs are reused.
# Arguments go to the runner, e.g. --set dcse_steps=200, --results_dir=results/demo, --dry_run.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/experiment.sh" run demo "$@"
