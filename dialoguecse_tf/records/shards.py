"""Shard writers: records into `{prefix}-{i:05d}-of-{n:05d}.tfrecord` files, which appear only
once complete.

`ShardedRecordWriter` writes each record to a shard in turn or to the one it names;
`OrderedShardWriter` and `RoundShardWriter` write each shard sorted by its records' keys or round
by round, through hidden spill files. The Beam pipelines (`beam_pipeline`) use the same names,
temporary paths and ordered-record encoding, so both engines leave the same files.
"""

from __future__ import annotations

import os
import re
from typing import Sequence

import tensorflow as tf
from absl import logging

from dialoguecse_tf.records.spec import check_positive_int

_READ_BATCH = 1024

_SHARD_NAME = re.compile(r".+-\d{5}-of-\d{5}\.tfrecord")


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
        self._tmp_paths = [temporary_path(p) for p in self._paths]
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
    """The final paths of `num_shards` shards named after `output_prefix` (a folder and a file
    name prefix, the record type's name)."""
    return [f"{output_prefix}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]


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


def temporary_path(final_path: str) -> str:
    """Where a file is written before its rename to `final_path`: a hidden name in the same
    folder, so the rename stays on one filesystem and globs like "prefix-*" or "*.tfrecord" never
    pick up partial output."""
    directory, base = os.path.split(final_path)
    return os.path.join(directory, f".{base}.tmp")
