#!/usr/bin/env bash
# Sets up .venv if needed and runs the whole test suite. Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
exec python -m pytest tests -q -p no:cacheprovider "$@"
