#!/usr/bin/env bash
# Sets up .venv if needed and runs the test suite. Extra arguments go to pytest.
#   bash run_scripts/test.sh                  # every test, as CI runs them (about 15 minutes on 2 cores)
#   bash run_scripts/test.sh -m "not slow"    # the fast tier (about 5 minutes): leaves out the tests
#                                             # marked slow, entry points doing real work and checks that
#                                             # train two runs or more (mirrored, resumed, killed, repeated)
#   bash run_scripts/test.sh tests/test_objectives.py --durations=25   # one file, its slowest tests
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python -m pytest tests -q -p no:cacheprovider "$@"
