"""The record spec every record type subclasses, and `records_info.json`, the description of a
folder's records written beside them.

A spec holds a record type's shape parameters and knows its features: their names, wire dtypes
and shapes, the serializer and the parser. Multi-dimensional features are stored flattened in
row-major order (as TFRecord int64 lists are 1-D) and come back from ``parse`` in their real
shapes. ``records_info.json`` records the record type, the spec and counts, so readers take
shapes from the data instead of from flags that may disagree with it.

TensorFlow is imported inside the methods that need it: a record type's module (its spec, its
settings, its `RecordType`) loads without it, so that the data-prep entry points generate their
flags and refuse a bad path before TensorFlow's seconds of loading.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from dialoguecse_tf.records import wire

RECORDS_INFO_FILE = "records_info.json"
INT64, FLOAT32 = "int64", "float32"

_INT32_MIN = np.iinfo(np.int32).min
_INT32_MAX = np.iinfo(np.int32).max


@dataclasses.dataclass(frozen=True)
class FixedFeature:
    """One feature of a record type: its name, wire dtype (`INT64` or `FLOAT32`) and real
    (unflattened) shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]


def check_positive_int(owner: str, name: str, value: Any, minimum: int) -> None:
    """Raises ValueError unless `value` is an int (not a bool) of at least `minimum`."""
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

    def _constant_features(self) -> dict[str, int]:
        """{name: value} of [1] int64 features always written with a fixed value (unless the
        example gives one) and ignored by ``parse``."""
        return {}

    def feature_spec(self) -> dict:
        """The features ``parse`` reads, with their real (unflattened) shapes.

        A ``FixedLenFeature`` with a multi-dimensional shape parses the flat
        stored list and reshapes it row-major, matching ``serialize``.
        """
        import tensorflow as tf

        return {f.name: tf.io.FixedLenFeature(list(f.shape), tf.as_dtype(f.dtype)) for f in self._features()}

    def serialize(self, example: Mapping[str, np.ndarray | Sequence]) -> bytes:
        """Validates ``example`` against the spec and returns a serialized tf.train.Example.

        Every feature must be present with exactly its real shape (e.g.
        ``[num_context_turns, max_seq_length]``, not flattened). Integer
        features accept integer or bool values that fit in int32 (``parse``
        returns int32); float features also accept integers.
        """
        import tensorflow as tf

        features = self._features()
        constants = self._constant_features()
        expected_names = {f.name for f in features}
        missing = [f.name for f in features if f.name not in example]
        if missing:
            raise ValueError(f"{type(self).__name__}: missing feature(s) {missing}")
        unexpected = sorted(set(example) - expected_names - set(constants))
        if unexpected:
            raise ValueError(
                f"{type(self).__name__}: unexpected feature(s) {unexpected}; "
                f"expected {sorted(expected_names)}"
            )

        tf_features = {name: _to_tf_feature(FixedFeature(name, INT64, (1,)), np.array([value]))
                       for name, value in constants.items()}
        for feature in features:
            array = _as_array(feature.name, example[feature.name])
            if array.shape != feature.shape:
                raise ValueError(
                    f"feature {feature.name!r}: expected shape {list(feature.shape)}, "
                    f"got {list(array.shape)}"
                )
            tf_features[feature.name] = _to_tf_feature(feature, array)
        for name in constants:
            if name in example:
                # Accept the field from callers converting existing BERT data,
                # but it must still match the schema.
                array = _as_array(name, example[name])
                if array.shape != (1,):
                    raise ValueError(f"feature {name!r}: expected shape [1], got {list(array.shape)}")
                tf_features[name] = _to_tf_feature(FixedFeature(name, INT64, (1,)), array)
        proto = tf.train.Example(features=tf.train.Features(feature=tf_features))
        # Features are a protobuf map, whose wire order otherwise varies between processes:
        # deterministic output makes equal records equal files (run keys hash them).
        return proto.SerializeToString(deterministic=True)

    def serialize_batch(self, arrays: Mapping[str, np.ndarray]) -> list[bytes]:
        """``serialize`` of a batch of examples, byte for byte the same, many times faster: the
        writers' hot loop.

        Writes the protobuf wire format itself (`wire`), in the order deterministic
        serialization gives a map (entries sorted by key), instead of building a message per
        example; tests/records/test_records_writers.py checks the bytes against ``serialize``.

        Args:
          arrays: {feature name: [B, *shape] array} of every feature of the spec, and
            optionally of its constant features ([B, 1]).

        Returns:
          B serialized tf.train.Examples.
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
                encoded[name] = wire.int64_lists(np.array([[constants[name]]])) * size
                continue
            feature = features.get(name, FixedFeature(name, INT64, (1,)))
            array = _as_array(name, arrays[name])
            if array.shape[1:] != feature.shape:
                raise ValueError(f"feature {name!r}: expected shape [batch, {', '.join(map(str, feature.shape))}], "
                                 f"got {list(array.shape)}")
            array = array.reshape(size, -1)
            _check_dtype(feature, array)
            encoded[name] = wire.float_lists(array) if feature.dtype == FLOAT32 else wire.int64_lists(array)
        return wire.examples(encoded)

    def parse(self, serialized):
        """Parses ONE serialized example (a scalar string tensor).

        Usable in ``tf.data.Dataset.map`` before batching. Integer features
        come back as int32 and float features as float32, in their real
        shapes.
        """
        import tensorflow as tf

        parsed = tf.io.parse_single_example(serialized, self.feature_spec())
        return {
            name: tf.cast(tensor, tf.int32) if tensor.dtype == tf.int64 else tensor
            for name, tensor in parsed.items()
        }

    def first_feature(self) -> str:
        """The name of the spec's first feature: every record has it."""
        return self._features()[0].name

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
    if feature.dtype == FLOAT32:
        if kind not in "fiub":
            raise ValueError(f"feature {feature.name!r}: expected float values, got dtype {array.dtype}")
        return
    if kind not in "iub":
        raise ValueError(f"feature {feature.name!r}: expected integer values, got dtype {array.dtype}")
    if array.size and (array.min() < _INT32_MIN or array.max() > _INT32_MAX):
        raise ValueError(
            f"feature {feature.name!r}: values [{array.min()}, {array.max()}] do not fit in int32"
        )


def _to_tf_feature(feature: FixedFeature, array: np.ndarray):
    import tensorflow as tf

    _check_dtype(feature, array)
    if feature.dtype == FLOAT32:
        return tf.train.Feature(
            float_list=tf.train.FloatList(value=array.astype(np.float32).reshape(-1).tolist())
        )
    return tf.train.Feature(int64_list=tf.train.Int64List(value=array.astype(np.int64).reshape(-1).tolist()))


def _json_default(value: Any) -> Any:
    # Counts are often numpy integers, which json cannot encode.
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"records info: {value!r} ({type(value).__name__}) is not JSON serializable")


def write_records_info(output_dir: str, spec: RecordSpec, stats: Mapping[str, Any]) -> str:
    """Writes ``output_dir/records_info.json`` atomically.

    Args:
      output_dir: the records' folder (a `gs://` one too).
      spec: the spec of the records.
      stats: free-form JSON (e.g. ``samples_written``, the writer's settings a reader needs).

    Returns:
      The file's path; it holds ``{"record_type", "spec", "stats"}``.
    """
    import tensorflow as tf

    tf.io.gfile.makedirs(output_dir)
    path = os.path.join(output_dir, RECORDS_INFO_FILE)
    text = json.dumps(
        {"record_type": spec.record_type, "spec": spec.to_dict(), "stats": dict(stats)},
        indent=2,
        sort_keys=True,
        default=_json_default,
    )
    tmp_path = os.path.join(output_dir, f".{RECORDS_INFO_FILE}.tmp")
    with tf.io.gfile.GFile(tmp_path, "w") as f:
        f.write(text + "\n")
    tf.io.gfile.rename(tmp_path, path, overwrite=True)
    return path


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
