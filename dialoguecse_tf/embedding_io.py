"""Reading texts to embed and writing embeddings (`.npy` or JSON Lines)."""

import json
import sys

import numpy as np

from dialoguecse_tf.io_utils import atomic_open


def read_texts(path: str) -> list:
    """One text per line, UTF-8; `-` reads standard input. Empty lines are kept as texts."""
    if path == "-":
        data = sys.stdin.buffer.read()
        source = "<stdin>"
    else:
        with open(path, "rb") as reader:
            data = reader.read()
        source = path
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the final newline ends the last text; it does not start a new one
    texts = []
    for number, raw in enumerate(lines, start=1):
        try:
            texts.append(raw.rstrip(b"\r").decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(f"{source}:{number}: invalid UTF-8 ({error.reason})") from None
    return texts


def check_output_file(path: str) -> None:
    """Raises ValueError unless `path` names a format `write_embeddings` writes."""
    if not path.endswith((".npy", ".jsonl", ".json")):
        raise ValueError(f"output file must end in .npy or .jsonl, got {path}")


def write_embeddings(path: str, texts: list, vectors: np.ndarray) -> None:
    """Writes `.npy` (float32 matrix) or `.jsonl` ({"text", "embedding"} per line), atomically."""
    check_output_file(path)
    if path.endswith(".npy"):
        with atomic_open(path, "wb") as writer:
            np.save(writer, vectors.astype(np.float32))
    elif path.endswith((".jsonl", ".json")):
        with atomic_open(path, "w", encoding="utf-8") as writer:
            for text, vector in zip(texts, vectors):
                writer.write(json.dumps({"text": text, "embedding": vector.tolist()}, ensure_ascii=False))
                writer.write("\n")


def nearest_neighbors(vectors: np.ndarray, k: int) -> list:
    """For each row, the indices and cosine similarities of its k most similar other rows."""
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    order = np.argsort(-similarity, axis=1, kind="stable")[:, :k]
    return [[(int(j), float(similarity[i, j])) for j in row] for i, row in enumerate(order)]
