"""`dialoguecse-embed`'s library: reading texts or dialogues, embedding them with a checkpoint or an
export, writing the vectors.

Lines of text: one text per line, UTF-8 (a byte-order mark before the first line is dropped).
Blank lines (empty or only whitespace) stay rows, so row i is always line i, but they are
never nearest neighbours and get none listed; a file with no other line is refused like an
empty one.

Output, chosen by the suffix of the output file:
  .npy    float32 matrix [rows, dimension], row i for line (or dialogue) i;
  .jsonl  JSON Lines, one object per row: {"text": line, "embedding": [floats]}, or
          {"dialogue_id": id, "embedding": [floats]} for dialogues;
  .json   one JSON array of those objects.

An export (a SavedModel) fixed its pooling and lengths when it was written; asking for other
values is refused, asking for the ones it records is allowed. `normalize` is applied to an
export's vectors like to a checkpoint's.
"""

import dataclasses
import json
import os
import sys
import tempfile

import numpy as np
from absl import logging

from dialoguecse_tf.io_utils import atomic_open
from dialoguecse_tf.precision import DEFAULT_PRECISION
from dialoguecse_tf.serving.layout import export_settings, export_version_dir

OUTPUT_SUFFIXES = (".npy", ".jsonl", ".json")
DEFAULT_MAX_SEQ_LENGTH = 128
DEFAULT_DIALOGUE_MAX_SEQ_LENGTH = 512
DEFAULT_DIALOGUE_POOLING = "interlocutor"
# Settings a SavedModel fixes when it is written; `None` in `EmbedConfig` takes the export's.
_EXPORT_FIXED = ("max_seq_length", "pooling", "dialogue_max_seq_length", "dialogue_pooling", "precision")
_SENTENCE_ONLY = ("max_seq_length", "pooling")
_DIALOGUE_ONLY = ("dialogue_max_seq_length", "dialogue_pooling")


@dataclasses.dataclass(frozen=True)
class EmbedConfig:
    """What to embed with what. A setting left None was not asked for: a checkpoint uses the
    defaults above, an export its own values."""

    input_file: str
    output_file: str
    checkpoint: str | None = None
    export_dir: str | None = None
    max_seq_length: int | None = None
    pooling: str | None = None
    normalize: bool | None = None
    batch_size: int = 64
    dialogue_format: str | None = None
    dialogue_max_seq_length: int | None = None
    dialogue_pooling: str | None = None
    precision: str | None = None  # a checkpoint's compute precision (`precision`): None is float32

    def __post_init__(self):
        if (self.checkpoint is None) == (self.export_dir is None):
            raise ValueError("give exactly one of checkpoint and export_dir")
        wrong = _SENTENCE_ONLY if self.dialogue_format else _DIALOGUE_ONLY
        given = [name for name in wrong if getattr(self, name) is not None]
        if given:
            mode = "dialogues (dialogue_format)" if self.dialogue_format else "lines of text"
            raise ValueError(f"{', '.join(given)} cannot apply when embedding {mode}")


@dataclasses.dataclass(frozen=True)
class Embeddings:
    keys: list  # the texts, or the dialogue ids
    vectors: np.ndarray
    key_field: str  # "text" or "dialogue_id"
    searchable: np.ndarray  # bool per row: may be listed as a nearest neighbour


def read_texts(path: str) -> list:
    """One text per line, UTF-8; `-` reads standard input. Blank lines are kept as texts."""
    if path == "-":
        data = sys.stdin.buffer.read()
        source = "<stdin>"
    else:
        with open(path, "rb") as reader:
            data = reader.read()
        source = path
    # A line ends at "\n", "\r\n" or a lone "\r" (old Mac files), as the corpus readers read; the
    # final end closes the last text and starts no new one.
    lines = data.splitlines()
    # A byte-order mark (Windows editors write one) is not text; the line it starts stays a line.
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    texts = []
    for number, raw in enumerate(lines, start=1):
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise ValueError(f"{source}:{number}: invalid UTF-8 ({error.reason})") from None
    return texts


def check_output_file(path: str) -> None:
    """Raises ValueError unless `path` has a known suffix and can be written (before any work).

    Missing parent folders are fine (writing creates them); the nearest existing one must take
    a new file.
    """
    if not path.endswith(OUTPUT_SUFFIXES):
        raise ValueError(f"output file {path}: the suffix must be one of {', '.join(OUTPUT_SUFFIXES)}")
    if os.path.isdir(path):
        raise ValueError(f"output file {path} is a directory")
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(folder):
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"output file {path}: {folder} is not a directory")
    try:
        # Trying is the only reliable test: permission bits say nothing for root or immutable folders.
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise ValueError(f"output file {path}: cannot write in {folder} ({error.strerror})") from None


def check_export_request(config: EmbedConfig, settings: dict, version_dir: str) -> None:
    """Refuses settings that `version_dir`'s SavedModel cannot honour (it fixed them when written)."""
    # Exports written before the setting existed compute in float32.
    settings = {"precision": DEFAULT_PRECISION, **settings}
    for name in _EXPORT_FIXED:
        asked = getattr(config, name)
        if asked is not None and asked != settings.get(name):
            recorded = f"was written with {name}={settings[name]!r}" if settings.get(name) is not None \
                else f"records no {name}"
            raise ValueError(f"{name}={asked!r}: the export {version_dir} {recorded} and cannot change it; "
                             f"leave {name} out or export again")
    if config.normalize is False and settings.get("normalize"):
        raise ValueError(f"normalize=False: the export {version_dir} normalizes its vectors and cannot undo it")


def embed(config: EmbedConfig) -> Embeddings:
    """Reads `config.input_file` and embeds it as `config` says (the output file is checked first)."""
    check_output_file(config.output_file)
    version_dir = None
    if config.export_dir:
        version_dir = export_version_dir(config.export_dir)
        check_export_request(config, export_settings(version_dir), version_dir)
    if config.dialogue_format:
        keys, vectors = _embed_dialogues(config, version_dir)
        searchable = np.ones(len(keys), dtype=bool)
        key_field = "dialogue_id"
    else:
        keys = read_texts(config.input_file)
        searchable = np.array([bool(text.strip()) for text in keys], dtype=bool)
        if not searchable.any():
            raise ValueError(f"{config.input_file}: no text to embed" + (" (only blank lines)" if keys else ""))
        vectors = _embed_texts(config, keys, version_dir)
        key_field = "text"
    if config.normalize:
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    logging.info("embedded %d rows of dimension %d", len(keys), vectors.shape[1])
    return Embeddings(keys, vectors, key_field, searchable)


def _embed_texts(config: EmbedConfig, texts: list, version_dir: str | None) -> np.ndarray:
    # Imported only now: TensorFlow takes seconds to load, and a bad command line or input should not wait.
    from dialoguecse_tf.encoder.sentence import SentenceEncoder
    from dialoguecse_tf.serving.savedmodel import ExportedEncoder

    if version_dir:
        exported = ExportedEncoder(version_dir)
        _report_unknown(exported, texts, config.input_file, f"the vocabulary of {version_dir}")
        return exported.encode(texts, batch_size=config.batch_size, verbose=True)
    encoder = SentenceEncoder.from_checkpoint(config.checkpoint, max_seq_length=config.max_seq_length or
                                              DEFAULT_MAX_SEQ_LENGTH, pooling=config.pooling,
                                              precision=config.precision or DEFAULT_PRECISION)
    _report_unknown(encoder.tokenizer, texts, config.input_file)
    return encoder.encode(texts, batch_size=config.batch_size, verbose=True)


def _report_unknown(counter, texts, what: str, vocabulary: str | None = None) -> None:
    """Logs the [UNK] share of `texts` (a warning above 5 %); `counter` is a `Tokenizer` or an
    `ExportedEncoder`, each with `count_unknown`."""
    from dialoguecse_tf.encoder.tokenization import unknown_share

    logging.info("%s", unknown_share(*counter.count_unknown(texts), vocabulary or counter.vocab_file, what))


def _embed_dialogues(config: EmbedConfig, version_dir: str | None):
    from dialoguecse_tf.data.readers import read_corpus

    dialogues = list(read_corpus(config.input_file, config.dialogue_format))
    if not dialogues:
        raise ValueError(f"{config.input_file}: no dialogue to embed")
    from dialoguecse_tf.encoder.dialogue import DialogueEncoder
    from dialoguecse_tf.serving.savedmodel import ExportedEncoder

    texts = [turn.text for dialogue in dialogues for turn in dialogue.turns]
    if version_dir:
        exported = ExportedEncoder(version_dir)
        _report_unknown(exported, texts, config.input_file, f"the vocabulary of {version_dir}")
        vectors = exported.encode_dialogues(dialogues)
    else:
        encoder = DialogueEncoder.from_checkpoint(config.checkpoint,
                                                  config.dialogue_max_seq_length or DEFAULT_DIALOGUE_MAX_SEQ_LENGTH,
                                                  config.dialogue_pooling or DEFAULT_DIALOGUE_POOLING,
                                                  precision=config.precision or DEFAULT_PRECISION)
        _report_unknown(encoder.tokenizer, texts, config.input_file)
        vectors = encoder.encode_dialogues(dialogues, verbose=True)
    return [dialogue.dialogue_id for dialogue in dialogues], vectors


def write_embeddings(path: str, keys: list, vectors: np.ndarray, key_field: str = "text") -> None:
    """Writes `.npy`, `.jsonl` or `.json` (see the module docstring), atomically."""
    check_output_file(path)
    if path.endswith(".npy"):
        with atomic_open(path, "wb") as writer:
            np.save(writer, vectors.astype(np.float32))
        return
    rows = (json.dumps({key_field: key, "embedding": vector.tolist()}, ensure_ascii=False)
            for key, vector in zip(keys, vectors))
    with atomic_open(path, "w", encoding="utf-8") as writer:
        if path.endswith(".jsonl"):
            for row in rows:
                writer.write(row + "\n")
        else:
            writer.write("[\n" + ",\n".join(rows) + "\n]\n")


def nearest_neighbors(vectors: np.ndarray, k: int, searchable: np.ndarray | None = None) -> list:
    """For each row, the indices and cosine similarities of its k most similar other rows.

    Rows where `searchable` is False are never listed as neighbours and get an empty list.
    """
    searchable = np.ones(len(vectors), dtype=bool) if searchable is None else np.asarray(searchable, dtype=bool)
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    similarity = unit @ unit.T
    np.fill_diagonal(similarity, -np.inf)
    similarity[:, ~searchable] = -np.inf
    order = np.argsort(-similarity, axis=1, kind="stable")[:, :min(k, int(searchable.sum()))]
    return [[(int(j), float(similarity[i, j])) for j in row if np.isfinite(similarity[i, j])] if searchable[i] else []
            for i, row in enumerate(order)]
