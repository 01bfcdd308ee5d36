"""Reading records: a dataset of parsed examples, the checks of record files against their
`records_info.json`, and the rewrite of files serialized before serialization was deterministic.

The record type a folder holds is the one its `records_info.json` names, looked up in
`registry`: a reader never trusts flags for shapes.
"""

from __future__ import annotations

import os
import re
from typing import Any, Sequence

import numpy as np
import tensorflow as tf

from dialoguecse_tf.io_utils import parse_json_object
from dialoguecse_tf.records.registry import RECORD_TYPES
from dialoguecse_tf.records.shards import temporary_path
from dialoguecse_tf.records.spec import RECORDS_INFO_FILE, RecordSpec

# Fixed rather than AUTOTUNE so the read order does not depend on the
# machine's CPU count.
_MAX_PARALLEL_FILES = 16


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
        temporary = temporary_path(path)
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
        return tf.shape(tf.io.parse_example(serialized, spec.feature_spec())[spec.first_feature()])[0]

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


_OP_ERROR_NOISE = re.compile(
    r"\{\{function_node [^}]*\}\}\s*|\s*\[Op:\w+\].*$|Error in user-defined function passed to \S+ transformation "
    r"with iterator: \S+: |Name: <unknown>, "
)


def _op_error_message(error: tf.errors.OpError) -> str:
    """The cause in a tf.data error, without TensorFlow's graph and op decorations."""
    lines = [line for line in error.message.splitlines() if line.strip() and not line.strip().startswith("[[")]
    return _OP_ERROR_NOISE.sub("", lines[-1]).strip() if lines else type(error).__name__


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
    if not isinstance(file_type, str) or file_type not in RECORD_TYPES:
        raise ValueError(f"{path}: unknown record_type {file_type!r}; expected one of {sorted(RECORD_TYPES)}")
    if record_type is not None and file_type != record_type:
        raise ValueError(f"{path}: holds {file_type!r} records but {record_type!r} records were expected")
    spec_values, stats = info.get("spec"), info.get("stats", {})
    if not isinstance(spec_values, dict) or not isinstance(stats, dict):
        raise ValueError(f"{path}: 'spec' and 'stats' must be JSON objects")
    try:
        spec = RECORD_TYPES[file_type].spec_class.from_dict(spec_values)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return spec, stats


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
