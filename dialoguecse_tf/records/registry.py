"""The record types by name, and what reads records whose type a folder's
``records_info.json`` names: the one module that knows every record type.

Adding a record type: a module of this package with its ``RecordSpec`` subclass and its writer,
and its entry in ``SPEC_TYPES``.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import tensorflow as tf

from dialoguecse_tf.io_utils import parse_json_object
from dialoguecse_tf.records.common import RECORDS_INFO_FILE, RecordSpec, check_record_files
from dialoguecse_tf.records.contrastive import RECORD_TYPE_CONTRASTIVE, ContrastiveRecordSpec
from dialoguecse_tf.records.dialogues import RECORD_TYPE_DIALOGUES, DialogueRecordSpec
from dialoguecse_tf.records.mlm import RECORD_TYPE_MLM, MlmRecordSpec
from dialoguecse_tf.records.pairs import RECORD_TYPE_PAIRS, PairRecordSpec

SPEC_TYPES: dict[str, type[RecordSpec]] = {
    RECORD_TYPE_MLM: MlmRecordSpec,
    RECORD_TYPE_CONTRASTIVE: ContrastiveRecordSpec,
    RECORD_TYPE_PAIRS: PairRecordSpec,
    RECORD_TYPE_DIALOGUES: DialogueRecordSpec,
}


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
    if not isinstance(file_type, str) or file_type not in SPEC_TYPES:
        raise ValueError(f"{path}: unknown record_type {file_type!r}; expected one of {sorted(SPEC_TYPES)}")
    if record_type is not None and file_type != record_type:
        raise ValueError(f"{path}: holds {file_type!r} records but {record_type!r} records were expected")
    spec_values, stats = info.get("spec"), info.get("stats", {})
    if not isinstance(spec_values, dict) or not isinstance(stats, dict):
        raise ValueError(f"{path}: 'spec' and 'stats' must be JSON objects")
    try:
        spec = SPEC_TYPES[file_type].from_dict(spec_values)
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
