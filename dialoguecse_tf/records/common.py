"""What every record type shares: the spec base class, the sharded writer, the reader,
``records_info.json`` and the checks of record files against a spec.

A record type is one module of this package holding its spec (a ``RecordSpec`` subclass:
feature names, shapes, serializer and parser) beside its writer, so the two sides cannot
drift apart; ``registry`` names them all. Multi-dimensional features are stored flattened in
row-major order (as TFRecord int64 lists are 1-D) and come back from ``parse`` in their real
shapes. A ``records_info.json`` written beside the shards records the record type, the spec
and counts, so readers take shapes from the data instead of from flags that may disagree with
it.
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

RECORDS_INFO_FILE = "records_info.json"

_INT32_MIN = np.iinfo(np.int32).min
_INT32_MAX = np.iinfo(np.int32).max
# Fixed rather than AUTOTUNE so the read order does not depend on the
# machine's CPU count.
_MAX_PARALLEL_FILES = 16
_READ_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class FixedFeature:
    """One feature of a record type: its name, wire dtype and real (unflattened) shape."""

    name: str
    dtype: tf.DType  # wire dtype: tf.int64 or tf.float32
    shape: tuple[int, ...]


def check_positive_int(owner: str, name: str, value: Any, minimum: int) -> None:
    # bool is an int subclass and JSON/flag parsing can hand over floats or
    # strings; any of them would silently produce wrong shapes.
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{owner}.{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{owner}.{name} must be >= {minimum}, got {value}")


class RecordSpec:
    """Serialization, parsing and JSON round trip shared by the record specs.

    A record type subclasses it as a frozen dataclass of its shape parameters, with its
    ``record_type`` name and its ``_features``.
    """

    record_type: ClassVar[str]

    def _features(self) -> tuple[FixedFeature, ...]:
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
                tf_features[name] = _to_tf_feature(FixedFeature(name, tf.int64, (1,)), array)
        proto = tf.train.Example(features=tf.train.Features(feature=tf_features))
        # Features are a protobuf map, whose wire order otherwise varies between processes:
        # deterministic output makes equal records equal files (run_cache hashes them).
        return proto.SerializeToString(deterministic=True)

    def serialize_batch(self, arrays: Mapping[str, np.ndarray]) -> list[bytes]:
        """``serialize`` of a batch of examples, byte for byte the same, many times faster: the
        writers' hot loop. ``arrays`` maps each feature to an array of shape ``[B, *shape]``;
        returns B serialized examples.

        Writes the protobuf wire format itself (``_int64_lists``, ``_float_lists``), in the
        order deterministic serialization gives a map (entries sorted by key), instead of
        building a message per example; tests/test_records_writers.py checks the bytes against
        ``serialize``.
        """
        features = {f.name: f for f in self._features()}
        constants = self._constant_features()
        missing = sorted(set(features) - set(arrays))
        unexpected = sorted(set(arrays) - set(features) - set(constants))
        if missing or unexpected:
            raise ValueError(f"{type(self).__name__}: missing feature(s) {missing}, unexpected feature(s) "
                             f"{unexpected}; expected {sorted(features)}")
        sizes = {len(value) for value in arrays.values()}
        if len(sizes) != 1:
            raise ValueError(f"{type(self).__name__}: features of different batch sizes {sorted(sizes)}")
        (size,) = sizes
        encoded = {}
        for name in sorted(set(features) | set(constants)):
            if name not in arrays:
                encoded[name] = [constants[name].SerializeToString(deterministic=True)] * size
                continue
            feature = features.get(name, FixedFeature(name, tf.int64, (1,)))
            array = _as_array(name, arrays[name])
            if array.shape[1:] != feature.shape:
                raise ValueError(f"feature {name!r}: expected shape [batch, {', '.join(map(str, feature.shape))}], "
                                 f"got {list(array.shape)}")
            array = array.reshape(size, -1)
            _check_dtype(feature, array)
            encoded[name] = _float_lists(array) if feature.dtype == tf.float32 else _int64_lists(array)
        entries = []
        for name, values in encoded.items():
            key = b"\x0a" + _varint(len(name.encode())) + name.encode() + b"\x12"
            entries.append([_length_delimited(key + _varint(len(value)) + value) for value in values])
        return [_length_delimited(b"".join(parts)) for parts in zip(*entries)]

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


def _check_dtype(feature: FixedFeature, array: np.ndarray) -> None:
    kind = array.dtype.kind
    if feature.dtype == tf.float32:
        if kind not in "fiub":
            raise ValueError(f"feature {feature.name!r}: expected float values, got dtype {array.dtype}")
        return
    if kind not in "iub":
        raise ValueError(f"feature {feature.name!r}: expected integer values, got dtype {array.dtype}")
    if array.size and (array.min() < _INT32_MIN or array.max() > _INT32_MAX):
        raise ValueError(
            f"feature {feature.name!r}: values [{array.min()}, {array.max()}] do not fit in int32"
        )


def _to_tf_feature(feature: FixedFeature, array: np.ndarray) -> tf.train.Feature:
    _check_dtype(feature, array)
    if feature.dtype == tf.float32:
        return tf.train.Feature(
            float_list=tf.train.FloatList(value=array.astype(np.float32).reshape(-1).tolist())
        )
    return tf.train.Feature(int64_list=tf.train.Int64List(value=array.astype(np.int64).reshape(-1).tolist()))


def _varint(value: int) -> bytes:
    return _SHORT_VARINTS[value] if value < len(_SHORT_VARINTS) else _long_varint(value)


def _long_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SHORT_VARINTS = tuple(_long_varint(value) for value in range(1 << 14))


def _length_delimited(payload: bytes) -> bytes:
    """A field 1 (tag 0x0a) holding `payload`: how Example holds Features, and Features each entry."""
    return b"\x0a" + _varint(len(payload)) + payload


def _list_features(packed: list, tag: bytes) -> list:
    """tf.train.Feature bytes (int64_list: tag 0x1a, float_list: 0x12) of each row's packed values."""
    return [tag + _varint(len(lists)) + lists for lists in
            (_length_delimited(values) if values else b"" for values in packed)]


def _int64_lists(array: np.ndarray) -> list:
    """The int64_list Feature of each row of `array` [B, n]: its values as packed varints
    (a negative value takes 10 bytes, its two's complement), all rows encoded at once."""
    values = array.astype(np.int64).view(np.uint64)
    rows, count = values.shape
    top = int(values.max()) if values.size else 0
    widths = np.ones(values.shape, np.uint8)
    width = 1
    while width < 10 and top >> (7 * width):
        widths += values >> np.uint64(7 * width) > 0
        width += 1
    if width == 1:  # masks and small ids: one byte each, as they are
        blob = values.astype(np.uint8).tobytes()
        return _list_features([blob[row * count:(row + 1) * count] for row in range(rows)], b"\x1a")
    if top < 1 << 32:  # no negative value: shifts on 4 bytes are faster than on 8
        values = values.astype(np.uint32)
    digits = np.empty((rows, count, width), np.uint8)
    kept = np.empty((rows, count, width), bool)
    for place in range(width):
        digits[..., place] = (values >> place * 7 & 0x7F).astype(np.uint8) | (widths > place + 1).view(np.uint8) << 7
        kept[..., place] = widths > place
    blob = digits[kept].tobytes()
    ends = np.cumsum(widths.sum(axis=1, dtype=np.int64)).tolist()
    return _list_features([blob[start:end] for start, end in zip([0] + ends[:-1], ends)], b"\x1a")


def _float_lists(array: np.ndarray) -> list:
    """The float_list Feature of each row of `array` [B, n]: packed little-endian float32."""
    return _list_features([row.tobytes() for row in array.astype("<f4")], b"\x12")


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


def count_unknown_pieces(stats, pieces, unk_id: int) -> None:
    """Counts `word_pieces` and `unknown_word_pieces` ([UNK]) of the ids `pieces` in `stats`."""
    pieces = np.asarray(pieces)
    stats.increment("word_pieces", int(pieces.size))
    stats.increment("unknown_word_pieces", int((pieces == unk_id).sum()))


class PieceTable:
    """The word pieces of a set of texts, tokenized once in large batches, packed into record
    rows as `Tokenizer.pack` packs them (`pack`): a writer that uses an utterance many times (a
    negative) tokenizes it once, and one tokenizer call covers thousands of texts."""

    _BATCH = 4096

    def __init__(self, texts, tokenizer, stats=None):
        # The empty text (a missing context turn) has no pieces: a chunk whose other texts are all
        # known calls no tokenizer, which costs milliseconds a call however few its texts.
        unique = [""] + [text for text in dict.fromkeys(texts) if text]
        self._row_of = {text: row for row, text in enumerate(unique)}
        pieces, counts = [np.zeros(0, np.int32)], [np.zeros(1, np.int64)]
        for start in range(1, len(unique), self._BATCH):
            ragged = tokenizer.tokenize(unique[start:start + self._BATCH])
            pieces.append(ragged.flat_values.numpy().astype(np.int32))
            counts.append(ragged.row_lengths().numpy())
        self._pieces = np.concatenate(pieces)
        self._counts = np.concatenate(counts)
        if stats is not None:
            count_unknown_pieces(stats, self._pieces, tokenizer.unk_id)
        self._starts = np.cumsum(self._counts) - self._counts
        self._cls_id, self._sep_id = tokenizer.cls_id, tokenizer.sep_id

    def __contains__(self, text) -> bool:
        return text in self._row_of

    def __len__(self) -> int:
        return len(self._row_of)

    def pack(self, texts, length: int) -> tuple:
        """(ids, mask) [len(texts), length] int64: `[CLS]`, a text's first `length - 2` pieces,
        `[SEP]`, padding; and each text's number of pieces before the cut."""
        rows = np.array([self._row_of[text] for text in texts], np.int64)
        counts = self._counts[rows]
        kept = np.minimum(counts, length - 2)
        place = np.arange(length - 2)
        inside = place < kept[:, None]
        ids = np.zeros((len(rows), length), np.int64)
        ids[:, 1:length - 1][inside] = self._pieces[(self._starts[rows][:, None] + place)[inside]]
        ids[:, 0] = self._cls_id
        ids[np.arange(len(rows)), kept + 1] = self._sep_id
        mask = (np.arange(length) < kept[:, None] + 2).astype(np.int64)
        return ids, mask, counts


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
    """Writes serialized examples to ``{prefix}-{i:05d}-of-{n:05d}.tfrecord``, round-robin or
    to the shard each ``write`` names.

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
        check_positive_int("ShardedRecordWriter", "num_shards", num_shards, 1)
        if not os.path.basename(output_prefix):
            raise ValueError(f"output_prefix {output_prefix!r} must end in a file name prefix, not a directory")
        self._paths = shard_paths(output_prefix, num_shards)
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
    def num_shards(self) -> int:
        return len(self._paths)

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

    def write(self, serialized: bytes, shard: int | None = None) -> None:
        """Appends one record to `shard`, or to the next shard in turn when None."""
        if not self._writers:
            raise RuntimeError("ShardedRecordWriter.write called outside its `with` block")
        if not isinstance(serialized, bytes):
            raise TypeError(f"write expects serialized bytes (spec.serialize(...)), got {type(serialized).__name__}")
        if shard is None:
            shard = self._next_shard
            self._next_shard = (self._next_shard + 1) % len(self._paths)
        self._writers[shard].write(serialized)
        self._shard_counts[shard] += 1

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
        self._stale_removed = remove_stale_shards(self._paths)

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


def ordered_record(order: int, serialized: bytes) -> bytes:
    """A record with its 64-bit order key in front (big-endian), so that sorting such byte
    strings sorts records by key (then by bytes): what `OrderedShardWriter` and the Beam
    pipelines' shard writers sort."""
    return order.to_bytes(8, "big") + serialized


def unordered_records(keyed_records) -> list:
    """`ordered_record`s sorted, their keys removed."""
    return [record[8:] for record in sorted(keyed_records)]


class _SpillingShardWriter:
    """Writes each record to the shard it names, through hidden spill files (`num_parts` per
    shard) that closing turns into the shards (`_shard_records`) with `ShardedRecordWriter`."""

    def __init__(self, output_prefix: str, num_shards: int, num_parts: int):
        self._writer = ShardedRecordWriter(output_prefix, num_shards)
        self._spills = [[f"{temporary_path(path)}.{part}.spill" for part in range(num_parts)]
                        for path in self._writer.paths]
        self._files: list = []
        self._count = 0
        self._created_directory = False

    @property
    def num_shards(self) -> int:
        return self._writer.num_shards

    @property
    def num_written(self) -> int:
        return self._count

    def __enter__(self):
        directory = os.path.dirname(self._spills[0][0]) or "."
        self._created_directory = not tf.io.gfile.exists(directory)
        tf.io.gfile.makedirs(directory)
        self._files = [[tf.io.TFRecordWriter(path) for path in paths] for paths in self._spills]
        return self

    def _spill(self, shard: int, part: int, record: bytes) -> None:
        self._files[shard][part].write(record)
        self._count += 1

    def _shard_records(self, paths):
        raise NotImplementedError

    def __exit__(self, exc_type, exc, tb) -> None:
        for files in self._files:
            for spill in files:
                spill.close()
        try:
            if exc_type is None:
                with self._writer as writer:
                    for shard, paths in enumerate(self._spills):
                        for record in self._shard_records(paths):
                            writer.write(record, shard)
        finally:
            for path in (path for paths in self._spills for path in paths):
                if tf.io.gfile.exists(path):
                    tf.io.gfile.remove(path)
            directory = os.path.dirname(self._spills[0][0]) or "."
            if self._created_directory and not tf.io.gfile.listdir(directory):
                tf.io.gfile.rmtree(directory)


def read_record_files(paths):
    """The records of a record file, or of several in turn, read in batches: a step of a dataset
    iterator costs about 100 µs, as much as the writers spend on a record."""
    for batch in tf.data.TFRecordDataset(paths).batch(_READ_BATCH).as_numpy_iterator():
        yield from batch.tolist()


class OrderedShardWriter(_SpillingShardWriter):
    """Writes each record to the shard it names, every shard in the order of the records' keys
    (a seeded hash: a shuffle that any runner reproduces). Closing reads each shard's spill back
    and sorts it: memory, one shard's records."""

    def __init__(self, output_prefix: str, num_shards: int):
        super().__init__(output_prefix, num_shards, 1)

    def write(self, serialized: bytes, shard: int, order: int) -> None:
        self._spill(shard, 0, ordered_record(order, serialized))

    def _shard_records(self, paths):
        return unordered_records(read_record_files(paths[0]))


class RoundShardWriter(_SpillingShardWriter):
    """Writes each record to the shard it names, every shard round by round (all its records of
    round 0, then of round 1, ...), each round in write order: a spill file per shard and round,
    copied into the shard in round order. Memory: none; disk: the records twice, for a while."""

    def __init__(self, output_prefix: str, num_shards: int, num_rounds: int):
        super().__init__(output_prefix, num_shards, num_rounds)

    def write(self, serialized: bytes, shard: int, sample_round: int) -> None:
        self._spill(shard, sample_round, serialized)

    def _shard_records(self, paths):
        return read_record_files(paths)


def shard_paths(output_prefix: str, num_shards: int) -> list[str]:
    return [f"{output_prefix}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]


def temporary_path(final_path: str) -> str:
    """Where a shard is written before its rename to `final_path` (hidden, same folder)."""
    return _temporary_path(final_path)


def remove_stale_shards(paths: Sequence[str]) -> list[str]:
    """Removes the shard files beside `paths` (one run's shards) that are not among them; returns them."""
    directory = os.path.dirname(paths[0]) or "."
    written = set(paths)
    removed = []
    for path in sorted(tf.io.gfile.glob(os.path.join(directory, "*.tfrecord"))):
        if path not in written and _SHARD_NAME.fullmatch(os.path.basename(path)):
            tf.io.gfile.remove(path)
            removed.append(path)
    if removed:
        logging.warning("%s: removed %d shard files of an earlier run: %s", directory, len(removed),
                        [os.path.basename(path) for path in removed[:5]])
    return removed


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
