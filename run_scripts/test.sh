#!/usr/bin/env bash
# Sets up .venv if needed and runs the test suite on PYTEST_WORKERS pytest-xdist workers (default 2,
# the machine's cores; 0 runs in one process). Extra arguments go to pytest.
#   bash run_scripts/test.sh                  # every test, as CI runs them
#   bash run_scripts/test.sh -m "not slow"    # the fast tier: leaves out the tests
#                                             # marked slow, entry points doing real work and checks that
#                                             # train two runs or more (mirrored, resumed, killed, repeated)
#   bash run_scripts/test.sh tests/objectives/test_objectives.py --durations=25   # one file, its slowest tests
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
# Whole files per worker, so a file's shared fixtures are built once; tests/conftest.py orders
# the longest files first.
exec python -m pytest -q -p no:cacheprovider -n "${PYTEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@"
