"""The TFRecord schema of every record type the project writes.

Every writer and reader imports its feature names, shapes, serializer and
parser from here, so the two sides cannot drift apart.

Four record types:

* ``MlmRecordSpec`` ("mlm"): masked-LM pretraining examples in Google BERT's
  exact schema, so the shards are also readable by Google's
  ``run_pretraining.py`` and the TF Model Garden BERT pretraining loader.
* ``ContrastiveRecordSpec`` ("contrastive"): one response with its
  bidirectional context and its candidates (true response first, then the
  negatives) for the DialogueCSE stage.
* ``PairRecordSpec`` ("pairs"): two utterances that form a positive pair (DSE's
  consecutive utterances, or an utterance with itself for the dropout baseline).
* ``DialogueRecordSpec`` ("dialogues"): a whole dialogue and its negatives as token
  sequences with each token's role and turn (dial2vec).

Multi-dimensional features are stored flattened in row-major order (as
TFRecord int64 lists are 1-D) and come back from ``parse`` in their real
shapes. A ``records_info.json`` written beside the shards records the record
type, the spec and counts, so readers take shapes from the data instead of
from flags that may disagree with it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import tensorflow as tf
from absl import logging

from dialoguecse_tf.dialogue_packing import TRUNCATIONS
from dialoguecse_tf.io_utils import parse_json_object

# Google BERT pretraining features (names and types must not change).
INPUT_IDS = "input_ids"
INPUT_MASK = "input_mask"
SEGMENT_IDS = "segment_ids"
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_IDS = "masked_lm_ids"
MASKED_LM_WEIGHTS = "masked_lm_weights"
NEXT_SENTENCE_LABELS = "next_sentence_labels"

# Contrastive (DialogueCSE) features.
CONTEXT_INPUT_IDS = "context_input_ids"
CONTEXT_INPUT_MASK = "context_input_mask"
CONTEXT_TURN_MASK = "context_turn_mask"
CONTEXT_TURN_OFFSET = "context_turn_offset"
CANDIDATE_INPUT_IDS = "candidate_input_ids"
CANDIDATE_INPUT_MASK = "candidate_input_mask"

# Pair (DSE) features: [2, max_seq_length], the anchor in row 0 and its positive in row 1.
PAIR_INPUT_IDS = "pair_input_ids"
PAIR_INPUT_MASK = "pair_input_mask"

# Dialogue (dial2vec) features: [1 + num_negatives, max_seq_length], the dialogue itself in
# row 0; `dialogue_packing` says what each holds.
DIALOGUE_INPUT_IDS = "dialogue_input_ids"
DIALOGUE_INPUT_MASK = "dialogue_input_mask"
DIALOGUE_ROLE_IDS = "dialogue_role_ids"
DIALOGUE_TURN_IDS = "dialogue_turn_ids"

RECORD_TYPE_MLM = "mlm"
RECORD_TYPE_CONTRASTIVE = "contrastive"
RECORD_TYPE_PAIRS = "pairs"
RECORD_TYPE_DIALOGUES = "dialogues"

RECORDS_INFO_FILE = "records_info.json"

_INT32_MIN = np.iinfo(np.int32).min
_INT32_MAX = np.iinfo(np.int32).max
# Fixed rather than AUTOTUNE so the read order does not depend on the
# machine's CPU count.
_MAX_PARALLEL_FILES = 16


@dataclasses.dataclass(frozen=True)
class _Feature:
    name: str
    dtype: tf.DType  # wire dtype: tf.int64 or tf.float32
    shape: tuple[int, ...]


def _check_positive_int(owner: str, name: str, value: Any, minimum: int) -> None:
    # bool is an int subclass and JSON/flag parsing can hand over floats or
    # strings; any of them would silently produce wrong shapes.
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{owner}.{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{owner}.{name} must be >= {minimum}, got {value}")


class _RecordSpec:
    """Serialization, parsing and JSON round trip shared by the record specs."""

    record_type: ClassVar[str]

    def _features(self) -> tuple[_Feature, ...]:
        raise NotImplementedError

    def _constant_features(self) -> dict[str, tf.train.Feature]:
        """Features always written with a fixed value and ignored by ``parse``."""
        return {}

    def feature_spec(self) -> dict[str, tf.io.FixedLenFeature]:
        """The features ``parse`` reads, with their real (unflattened) shapes.

        A ``FixedLenFeature`` with a multi-dimensional shape parses the flat
        stored list and reshapes it row-major, matching ``serialize``.
        """
        return {f.name: tf.io.FixedLenFeature(list(f.shape), f.dtype) for f in self._features()}

    def serialize(self, example: Mapping[str, np.ndarray | Sequence]) -> bytes:
        """Validates ``example`` against the spec and returns a serialized tf.train.Example.

        Every feature must be present with exactly its real shape (e.g.
        ``[num_context_turns, max_seq_length]``, not flattened). Integer
        features accept integer or bool values that fit in int32 (``parse``
        returns int32); float features also accept integers.
        """
        features = self._features()
        expected_names = {f.name for f in features}
        missing = [f.name for f in features if f.name not in example]
        if missing:
            raise ValueError(f"{type(self).__name__}: missing feature(s) {missing}")
        unexpected = sorted(set(example) - expected_names - set(self._constant_features()))
        if unexpected:
            raise ValueError(
                f"{type(self).__name__}: unexpected feature(s) {unexpected}; "
                f"expected {sorted(expected_names)}"
            )

        tf_features = dict(self._constant_features())
        for feature in features:
            array = _as_array(feature.name, example[feature.name])
            if array.shape != feature.shape:
                raise ValueError(
                    f"feature {feature.name!r}: expected shape {list(feature.shape)}, "
                    f"got {list(array.shape)}"
                )
            tf_features[feature.name] = _to_tf_feature(feature, array)
        for name, value in self._constant_features().items():
            if name in example:
                # Accept the field from callers converting existing BERT data,
                # but it must still match the schema.
                array = _as_array(name, example[name])
                if array.shape != (1,):
                    raise ValueError(f"feature {name!r}: expected shape [1], got {list(array.shape)}")
                tf_features[name] = _to_tf_feature(_Feature(name, tf.int64, (1,)), array)
        proto = tf.train.Example(features=tf.train.Features(feature=tf_features))
        # Features are a protobuf map, whose wire order otherwise varies between processes:
        # deterministic output makes equal records equal files (run_cache hashes them).
        return proto.SerializeToString(deterministic=True)

    def parse(self, serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        """Parses ONE serialized example (a scalar string tensor).

        Usable in ``tf.data.Dataset.map`` before batching. Integer features
        come back as int32 and float features as float32, in their real
        shapes.
        """
        parsed = tf.io.parse_single_example(serialized, self.feature_spec())
        return {
            name: tf.cast(tensor, tf.int32) if tensor.dtype == tf.int64 else tensor
            for name, tensor in parsed.items()
        }

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        # Fields added later have defaults, so records written before them still read.
        required = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING}  # type: ignore[arg-type]
        missing = sorted(required - set(values))
        unknown = sorted(set(values) - names)
        if missing or unknown:
            raise ValueError(
                f"{cls.__name__}.from_dict: missing field(s) {missing}, unknown field(s) {unknown}"
            )
        return cls(**values)


def _as_array(name: str, value: Any) -> np.ndarray:
    try:
        return np.asarray(value)
    except ValueError as err:  # ragged nested lists
        raise ValueError(f"feature {name!r}: not a rectangular array ({err})") from err


def _to_tf_feature(feature: _Feature, array: np.ndarray) -> tf.train.Feature:
    kind = array.dtype.kind
    if feature.dtype == tf.float32:
        if kind not in "fiub":
            raise ValueError(f"feature {feature.name!r}: expected float values, got dtype {array.dtype}")
        return tf.train.Feature(
            float_list=tf.train.FloatList(value=array.astype(np.float32).reshape(-1).tolist())
        )
    if kind not in "iub":
        raise ValueError(f"feature {feature.name!r}: expected integer values, got dtype {array.dtype}")
    if array.size and (array.min() < _INT32_MIN or array.max() > _INT32_MAX):
        raise ValueError(
            f"feature {feature.name!r}: values [{array.min()}, {array.max()}] do not fit in int32"
        )
    return tf.train.Feature(int64_list=tf.train.Int64List(value=array.astype(np.int64).reshape(-1).tolist()))


@dataclasses.dataclass(frozen=True)
class MlmRecordSpec(_RecordSpec):
    """Masked-LM pretraining records in Google BERT's schema.

    ``next_sentence_labels`` is always written as ``[0]`` so BERT's readers,
    which require it, accept the records; ``parse`` ignores it.
    """

    record_type: ClassVar[str] = RECORD_TYPE_MLM

    max_seq_length: int
    max_predictions_per_seq: int

    def __post_init__(self):
        _check_positive_int("MlmRecordSpec", "max_seq_length", self.max_seq_length, 1)
        _check_positive_int("MlmRecordSpec", "max_predictions_per_seq", self.max_predictions_per_seq, 1)

    def _features(self) -> tuple[_Feature, ...]:
        seq = (self.max_seq_length,)
        preds = (self.max_predictions_per_seq,)
        return (
            _Feature(INPUT_IDS, tf.int64, seq),
            _Feature(INPUT_MASK, tf.int64, seq),
            _Feature(SEGMENT_IDS, tf.int64, seq),
            _Feature(MASKED_LM_POSITIONS, tf.int64, preds),
            _Feature(MASKED_LM_IDS, tf.int64, preds),
            _Feature(MASKED_LM_WEIGHTS, tf.float32, preds),
        )

    def _constant_features(self) -> dict[str, tf.train.Feature]:
        return {NEXT_SENTENCE_LABELS: tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))}


CONTEXT_LAYOUTS = ("nearest", "sides")


@dataclasses.dataclass(frozen=True)
class ContrastiveRecordSpec(_RecordSpec):
    """DialogueCSE records: a response's context turns and its candidates.

    ``context_*`` are ``[num_context_slots, max_seq_length]``, with ``context_turn_mask``
    ``[num_context_slots]`` marking real turns (1) versus padding turns (0) of short contexts
    and ``context_turn_offset`` each turn's signed distance from the response (-1 just
    before it, +1 just after, 0 for padding), so a reader can keep fewer, nearest turns or
    find the single nearest one. ``context_layout`` says how the slots are filled:

    * ``"nearest"``: the ``num_context_turns`` turns nearest to the response on either side
      (ties to the earlier turn), in dialogue order, padding last; ``num_context_slots`` =
      ``num_context_turns``.
    * ``"sides"``: up to ``num_context_turns`` turns on EACH side, kept apart as the
      authors' released code reads them (``context`` and ``next_context``): slots
      ``[0, N)`` hold the left context in dialogue order, right-aligned (its padding
      first), slots ``[N, 2N)`` the right context in dialogue order, left-aligned (its
      padding last). All slots are then in dialogue order, the N nearest turns of either
      side sit next to the response, and ``num_context_slots`` = 2N. Such records also
      serve every "nearest" setting up to N turns.

    ``candidate_*`` are ``[num_candidates, max_seq_length]`` with the true response in row 0.
    Segment ids are all zero and are not stored.
    """

    record_type: ClassVar[str] = RECORD_TYPE_CONTRASTIVE

    max_seq_length: int
    num_context_turns: int
    num_negatives: int
    context_layout: str = "nearest"

    def __post_init__(self):
        _check_positive_int("ContrastiveRecordSpec", "max_seq_length", self.max_seq_length, 1)
        _check_positive_int("ContrastiveRecordSpec", "num_context_turns", self.num_context_turns, 1)
        _check_positive_int("ContrastiveRecordSpec", "num_negatives", self.num_negatives, 0)
        if self.context_layout not in CONTEXT_LAYOUTS:
            raise ValueError(f"ContrastiveRecordSpec.context_layout must be one of {CONTEXT_LAYOUTS}, "
                             f"got {self.context_layout!r}")

    @property
    def num_candidates(self) -> int:
        return 1 + self.num_negatives

    @property
    def num_context_slots(self) -> int:
        return 2 * self.num_context_turns if self.context_layout == "sides" else self.num_context_turns

    def _features(self) -> tuple[_Feature, ...]:
        context = (self.num_context_slots, self.max_seq_length)
        candidates = (self.num_candidates, self.max_seq_length)
        return (
            _Feature(CONTEXT_INPUT_IDS, tf.int64, context),
            _Feature(CONTEXT_INPUT_MASK, tf.int64, context),
            _Feature(CONTEXT_TURN_MASK, tf.int64, (self.num_context_slots,)),
            _Feature(CONTEXT_TURN_OFFSET, tf.int64, (self.num_context_slots,)),
            _Feature(CANDIDATE_INPUT_IDS, tf.int64, candidates),
            _Feature(CANDIDATE_INPUT_MASK, tf.int64, candidates),
        )


PAIRINGS = ("consecutive", "self")


@dataclasses.dataclass(frozen=True)
class PairRecordSpec(_RecordSpec):
    """Positive pairs of utterances: ``pair_*`` are ``[2, max_seq_length]``, row 0 the earlier
    utterance and row 1 its positive. ``pairing`` says how the pairs were made:

    * ``"consecutive"``: two adjacent turns of one dialogue (DSE);
    * ``"self"``: an utterance with itself, the two views differing only by dropout (DSE-dropout,
      i.e. unsupervised SimCSE).

    Segment ids are all zero and are not stored.
    """

    record_type: ClassVar[str] = RECORD_TYPE_PAIRS

    max_seq_length: int
    pairing: str = "consecutive"

    def __post_init__(self):
        _check_positive_int("PairRecordSpec", "max_seq_length", self.max_seq_length, 1)
        if self.pairing not in PAIRINGS:
            raise ValueError(f"PairRecordSpec.pairing must be one of {PAIRINGS}, got {self.pairing!r}")

    def _features(self) -> tuple[_Feature, ...]:
        pair = (2, self.max_seq_length)
        return (_Feature(PAIR_INPUT_IDS, tf.int64, pair), _Feature(PAIR_INPUT_MASK, tf.int64, pair))


@dataclasses.dataclass(frozen=True)
class DialogueRecordSpec(_RecordSpec):
    """A dialogue (row 0) and its ``num_negatives`` negatives, each one packed sequence
    (``dialogue_packing``): ``dialogue_input_ids``/``_mask``, ``dialogue_role_ids`` (0/1 per
    token, the token's interlocutor) and ``dialogue_turn_ids`` (the token's turn), all
    ``[1 + num_negatives, max_seq_length]``. ``truncation`` is the packing's rule for too long
    a dialogue (``dialogue_packing.TRUNCATIONS``)."""

    record_type: ClassVar[str] = RECORD_TYPE_DIALOGUES

    max_seq_length: int
    num_negatives: int
    truncation: str = "head"

    def __post_init__(self):
        _check_positive_int("DialogueRecordSpec", "max_seq_length", self.max_seq_length, 4)
        _check_positive_int("DialogueRecordSpec", "num_negatives", self.num_negatives, 1)
        if self.truncation not in TRUNCATIONS:
            raise ValueError(f"DialogueRecordSpec.truncation must be one of {TRUNCATIONS}, got {self.truncation!r}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        # Records written before the spec named its truncation kept the most recent turns, the
        # only rule there was then.
        return super().from_dict({"truncation": "recent_turns", **values})

    @property
    def num_samples(self) -> int:
        return 1 + self.num_negatives

    def _features(self) -> tuple[_Feature, ...]:
        shape = (self.num_samples, self.max_seq_length)
        return tuple(_Feature(name, tf.int64, shape) for name in (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK,
                                                                   DIALOGUE_ROLE_IDS, DIALOGUE_TURN_IDS))


RecordSpec = MlmRecordSpec | ContrastiveRecordSpec | PairRecordSpec | DialogueRecordSpec

_SPEC_TYPES: dict[str, type] = {
    RECORD_TYPE_MLM: MlmRecordSpec,
    RECORD_TYPE_CONTRASTIVE: ContrastiveRecordSpec,
    RECORD_TYPE_PAIRS: PairRecordSpec,
    RECORD_TYPE_DIALOGUES: DialogueRecordSpec,
}


def _json_default(value: Any) -> Any:
    # Counts are often numpy integers, which json cannot encode.
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"records info: {value!r} ({type(value).__name__}) is not JSON serializable")


def write_records_info(output_dir: str, spec: RecordSpec, stats: Mapping[str, Any]) -> str:
    """Writes ``output_dir/records_info.json`` atomically and returns its path.

    The file holds ``{"record_type", "spec", "stats"}``; ``stats`` is free-form
    JSON (e.g. ``num_records``, per-shard counts).
    """
    tf.io.gfile.makedirs(output_dir)
    path = os.path.join(output_dir, RECORDS_INFO_FILE)
    text = json.dumps(
        {"record_type": spec.record_type, "spec": spec.to_dict(), "stats": dict(stats)},
        indent=2,
        sort_keys=True,
        default=_json_default,
    )
    tmp_path = _temporary_path(path)
    with tf.io.gfile.GFile(tmp_path, "w") as f:
        f.write(text + "\n")
    tf.io.gfile.rename(tmp_path, path, overwrite=True)
    return path


def read_records_info(path_or_dir: str, record_type: str | None = None) -> tuple[RecordSpec, dict[str, Any]]:
    """Reads a records info file (or ``dir/records_info.json``) into ``(spec, stats)``.

    With ``record_type`` set, raises ValueError unless the file holds that type.
    """
    path = path_or_dir
    if tf.io.gfile.isdir(path_or_dir):
        path = os.path.join(path_or_dir, RECORDS_INFO_FILE)
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(f"records info file {path} not found (written beside the record shards)")
    with tf.io.gfile.GFile(path, "rb") as f:
        info = parse_json_object(f.read(), path, "a records info file")
    file_type = info.get("record_type")
    if not isinstance(file_type, str) or file_type not in _SPEC_TYPES:
        raise ValueError(f"{path}: unknown record_type {file_type!r}; expected one of {sorted(_SPEC_TYPES)}")
    if record_type is not None and file_type != record_type:
        raise ValueError(f"{path}: holds {file_type!r} records but {record_type!r} records were expected")
    spec_values, stats = info.get("spec"), info.get("stats", {})
    if not isinstance(spec_values, dict) or not isinstance(stats, dict):
        raise ValueError(f"{path}: 'spec' and 'stats' must be JSON objects")
    try:
        spec = _SPEC_TYPES[file_type].from_dict(spec_values)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return spec, stats


def check_compatible(spec: RecordSpec, **expected: Any) -> None:
    """Raises ValueError if any requested value disagrees with ``spec``.

    Values of None are skipped, so flags left unset defer to the file.
    """
    field_names = {f.name for f in dataclasses.fields(spec)}
    for name, requested in expected.items():
        if name not in field_names:
            raise ValueError(f"{type(spec).__name__} has no field {name!r}; fields are {sorted(field_names)}")
        if requested is None:
            continue
        file_value = getattr(spec, name)
        if requested != file_value:
            raise ValueError(
                f"{name}: the records were written with {name}={file_value} "
                f"but {name}={requested} was requested"
            )


_SHARD_NAME = re.compile(r".+-\d{5}-of-\d{5}\.tfrecord")


def _temporary_path(final_path: str) -> str:
    # A hidden name in the same directory: the rename stays on one filesystem,
    # and globs like "prefix-*" or "*.tfrecord" never pick up partial output.
    directory, base = os.path.split(final_path)
    return os.path.join(directory, f".{base}.tmp")


class ShardedRecordWriter:
    """Writes serialized examples round-robin to ``{prefix}-{i:05d}-of-{n:05d}.tfrecord``.

    Use as a context manager. Shards are written under temporary names and
    renamed only when the ``with`` body completes; if it raises, the temporary
    files (and the folder, if the writer created it and it is empty) are removed
    so nothing that looks like complete output is left.
    Existing files with the final names are overwritten on success, and the
    folder's other shard files (``*-NNNNN-of-NNNNN.tfrecord``, e.g. an earlier
    run's with another ``num_shards``) are removed then (`stale_removed`): the
    folder's one records_info.json describes this run's shards only.
    """

    def __init__(self, output_prefix: str, num_shards: int):
        _check_positive_int("ShardedRecordWriter", "num_shards", num_shards, 1)
        if not os.path.basename(output_prefix):
            raise ValueError(f"output_prefix {output_prefix!r} must end in a file name prefix, not a directory")
        self._paths = [
            f"{output_prefix}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)
        ]
        self._tmp_paths = [_temporary_path(p) for p in self._paths]
        self._writers: list[tf.io.TFRecordWriter] = []
        self._shard_counts = [0] * num_shards
        self._next_shard = 0
        self._stale_removed: list[str] = []
        self._created_directory = False

    @property
    def paths(self) -> list[str]:
        """Final shard paths (they exist only after a successful close)."""
        return list(self._paths)

    @property
    def num_written(self) -> int:
        return sum(self._shard_counts)

    @property
    def shard_counts(self) -> list[int]:
        return list(self._shard_counts)

    @property
    def stale_removed(self) -> list[str]:
        """Shard files of an earlier run that a successful close removed."""
        return list(self._stale_removed)

    def __enter__(self) -> "ShardedRecordWriter":
        if self._writers:
            raise RuntimeError("ShardedRecordWriter is already open")
        directory = os.path.dirname(self._paths[0])
        if directory and not tf.io.gfile.exists(directory):
            tf.io.gfile.makedirs(directory)
            self._created_directory = True
        try:
            for tmp_path in self._tmp_paths:
                self._writers.append(tf.io.TFRecordWriter(tmp_path))
        except Exception:
            self._abort()
            raise
        return self

    def write(self, serialized: bytes) -> None:
        if not self._writers:
            raise RuntimeError("ShardedRecordWriter.write called outside its `with` block")
        if not isinstance(serialized, bytes):
            raise TypeError(f"write expects serialized bytes (spec.serialize(...)), got {type(serialized).__name__}")
        self._writers[self._next_shard].write(serialized)
        self._shard_counts[self._next_shard] += 1
        self._next_shard = (self._next_shard + 1) % len(self._paths)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._abort()
            return
        try:
            # Close (flush) every shard before renaming any, so a write error
            # cannot leave a mix of final and missing shards.
            for writer in self._writers:
                writer.close()
        except Exception:
            self._abort()
            raise
        self._writers = []
        for tmp_path, path in zip(self._tmp_paths, self._paths):
            tf.io.gfile.rename(tmp_path, path, overwrite=True)
        self._remove_stale_shards()

    def _remove_stale_shards(self) -> None:
        directory = os.path.dirname(self._paths[0]) or "."
        written = set(self._paths)
        for path in sorted(tf.io.gfile.glob(os.path.join(directory, "*.tfrecord"))):
            if path not in written and _SHARD_NAME.fullmatch(os.path.basename(path)):
                tf.io.gfile.remove(path)
                self._stale_removed.append(path)
        if self._stale_removed:
            logging.warning("%s: removed %d shard files of an earlier run: %s", directory, len(self._stale_removed),
                            [os.path.basename(path) for path in self._stale_removed[:5]])

    def _abort(self) -> None:
        for writer in self._writers:
            try:
                writer.close()
            except Exception:  # the original error matters more
                pass
        self._writers = []
        for tmp_path in self._tmp_paths:
            if tf.io.gfile.exists(tmp_path):
                tf.io.gfile.remove(tmp_path)
        # A folder this writer made and left empty would look like the output of a run.
        directory = os.path.dirname(self._paths[0])
        if self._created_directory and not tf.io.gfile.listdir(directory):
            tf.io.gfile.rmtree(directory)


def _glob(file_pattern: str | Sequence[str]) -> list[str]:
    patterns = [file_pattern] if isinstance(file_pattern, str) else list(file_pattern)
    files: set[str] = set()
    for pattern in patterns:
        try:
            files.update(tf.io.gfile.glob(pattern))
        except tf.errors.NotFoundError:
            pass
    return sorted(files)


def read_dataset(
    file_pattern: str | Sequence[str],
    spec: RecordSpec,
    shuffle_files: bool = False,
    seed: int | None = None,
    parallel: bool = True,
) -> tf.data.Dataset:
    """Returns a dataset of parsed, unbatched examples from the matching files.

    Files are read with ``interleave``, one record per file in turn, and with
    ``parallel`` (benchmarks/input_pipeline.py measures it) files are read and
    records parsed on several threads. With ``shuffle_files=False`` (or a
    ``seed``) the order is deterministic; for at most 16 shards from
    ``ShardedRecordWriter`` it is the original write order.
    """
    files = _glob(file_pattern)
    if not files:
        raise FileNotFoundError(f"no record files match {file_pattern!r}")
    dataset = tf.data.Dataset.from_tensor_slices(files)
    if shuffle_files:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    deterministic = not shuffle_files or seed is not None
    dataset = dataset.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(files), _MAX_PARALLEL_FILES),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE if parallel else None,
        deterministic=deterministic,
    )
    return dataset.map(spec.parse, num_parallel_calls=tf.data.AUTOTUNE if parallel else None,
                       deterministic=deterministic)


def resolve_records(file_patterns: Sequence[str], record_type: str) -> tuple[list[str], RecordSpec, dict[str, Any]]:
    """The files matching `file_patterns` and the spec and stats of their `records_info.json`.

    The info file is read from the first file's folder: a training stage reads the records
    of one data-prep run. Every file is read through once (`check_record_files`), so a
    damaged file fails here, named, rather than as an anonymous error mid-training.
    """
    files = sorted({path for pattern in file_patterns for path in tf.io.gfile.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"{list(file_patterns)} matches no TFRecord file")
    folder = os.path.dirname(files[0])
    spec, stats = read_records_info(folder, record_type)
    num_records = check_record_files(files, spec)
    written = stats.get("samples_written")
    # Only comparable when the files are the folder's whole shard set.
    if isinstance(written, int) and files == sorted(tf.io.gfile.glob(os.path.join(folder, "*.tfrecord"))):
        if num_records != written:
            cause = ("more records than written: extra or stale shards (e.g. of an earlier data-prep run into this "
                     "folder)" if num_records > written else "fewer records than written: a shard is truncated or "
                     "missing")
            raise ValueError(
                f"{folder}: the record files hold {num_records} records but {RECORDS_INFO_FILE} says "
                f"{written} were written; {cause}"
            )
    return files, spec, stats


def canonicalize_record_file(path: str) -> bool:
    """Rewrites a TFRecord file whose Examples were serialized in a process's own map order
    (files written before serialization was made deterministic) in the deterministic form;
    the records and their order are unchanged. Returns whether the bytes changed."""
    changed = False
    records = []
    for raw in tf.data.TFRecordDataset(path).as_numpy_iterator():
        canonical = tf.train.Example.FromString(raw).SerializeToString(deterministic=True)
        changed |= canonical != raw
        records.append(canonical)
    if changed:
        temporary = _temporary_path(path)
        with tf.io.TFRecordWriter(temporary) as writer:
            for record in records:
                writer.write(record)
        os.replace(temporary, path)
    return changed


def check_record_files(files: Sequence[str], spec: RecordSpec, batch_size: int = 1024) -> int:
    """Reads and parses every record of `files` once; returns how many there are.

    A file that is truncated, fails its checksums or holds records of another schema raises
    ValueError naming it.
    """
    # Named functions, not lambdas: AutoGraph finds a lambda's source by parsing its line,
    # and two lambdas close together can make it convert the wrong one.
    def count_parsed(serialized):
        return tf.shape(tf.io.parse_example(serialized, spec.feature_spec())[_first_feature(spec)])[0]

    def add(count, batch_count):
        return count + batch_count

    total = 0
    for path in files:
        counts = tf.data.TFRecordDataset(path).batch(batch_size).map(count_parsed)
        try:
            total += int(counts.reduce(np.int32(0), add))
        except tf.errors.DataLossError as error:
            raise ValueError(f"{path}: truncated or corrupt TFRecord file ({_op_error_message(error)})") from None
        except tf.errors.InvalidArgumentError as error:
            raise ValueError(
                f"{path}: records do not match the {spec.record_type} schema of {RECORDS_INFO_FILE} "
                f"({_op_error_message(error)})"
            ) from None
    return total


def _first_feature(spec: RecordSpec) -> str:
    return spec._features()[0].name


_OP_ERROR_NOISE = re.compile(
    r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\].*$|Error in user-defined function passed to \S+ transformation "
    r"with iterator: \S+: |Name: <unknown>, "
)


def _op_error_message(error: tf.errors.OpError) -> str:
    """The cause in a tf.data error, without TensorFlow's graph and op decorations."""
    lines = [line for line in error.message.splitlines() if line.strip() and not line.strip().startswith("[[")]
    return _OP_ERROR_NOISE.sub("", lines[-1]).strip() if lines else type(error).__name__
