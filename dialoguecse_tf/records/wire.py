"""The protobuf wire format of a `tf.train.Example`, written by hand for a batch of examples at once.

`RecordSpec.serialize_batch` (`spec`) calls it in the writers' hot loop: building one Example
message per record and serializing it costs more than the rest of a writer. The bytes are those
of `Example.SerializeToString(deterministic=True)`: the features map's entries sorted by key,
int64 lists as packed varints, float lists as packed little-endian float32;
tests/records/test_records_writers.py checks them against protobuf's. Pure NumPy.
"""

from __future__ import annotations

import numpy as np


def _long_varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SHORT_VARINTS = tuple(_long_varint(value) for value in range(1 << 14))


def _varint(value: int) -> bytes:
    return _SHORT_VARINTS[value] if value < len(_SHORT_VARINTS) else _long_varint(value)


def _length_delimited(payload: bytes) -> bytes:
    """A field 1 (tag 0x0a) holding `payload`: how Example holds Features, and Features each entry."""
    return b"\x0a" + _varint(len(payload)) + payload


def _list_features(packed: list, tag: bytes) -> list:
    """tf.train.Feature bytes (int64_list: tag 0x1a, float_list: 0x12) of each row's packed values."""
    return [tag + _varint(len(lists)) + lists for lists in
            (_length_delimited(values) if values else b"" for values in packed)]


def int64_lists(array: np.ndarray) -> list:
    """The serialized int64_list `tf.train.Feature` of each row of an integer array.

    Args:
      array: [B, n] integers (a negative value takes 10 bytes, its two's complement).

    Returns:
      B byte strings, every row's values as packed varints, all rows encoded at once.
    """
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


def float_lists(array: np.ndarray) -> list:
    """The serialized float_list `tf.train.Feature` of each row of a number array.

    Args:
      array: [B, n] numbers, stored as float32.

    Returns:
      B byte strings, every row's values as packed little-endian float32.
    """
    return _list_features([row.tobytes() for row in array.astype("<f4")], b"\x12")


def examples(features: dict) -> list:
    """Serialized `tf.train.Example`s from their serialized features.

    Args:
      features: {feature name: B serialized `tf.train.Feature`s (`int64_lists`, `float_lists`)},
        in the order the entries are written: sorted by name for deterministic serialization.

    Returns:
      B byte strings, example i holding feature i of every name.
    """
    entries = []
    for name, values in features.items():
        key = b"\x0a" + _varint(len(name.encode())) + name.encode() + b"\x12"
        entries.append([_length_delimited(key + _varint(len(value)) + value) for value in values])
    return [_length_delimited(b"".join(parts)) for parts in zip(*entries)]
