"""Finding a finished training run with the same configuration, so it is reused, not repeated.

A run's key is a hash of its `config.json` record (objective, options, settings) where every
input is replaced by the hash of its content: the record files `train_file` matches, the start
checkpoint's weights, vocabulary and config, the evaluation sets. Two runs share a key exactly
when they train the same way on the same bytes, wherever the files lie; so a benchmark that
writes its own records finds the encoders a per-method script trained from identical records.
Settings that do not change the trained weights are left out: where the run is written, how
often it logs and checkpoints, the search folders themselves, `num_warmup_steps` when
`warmup_proportion` decides it, and `eval_steps` when no evaluation set is given. An evaluation
suite (`eval_suite`, `eval_task`) counts as its entries with each file's content hash, however it
was given, and is left out while empty, so that the runs keyed before suites keep their keys.

The same settings decide whether a run folder may be resumed (`differing_settings`), and a
run's encoder records the digest of the settings it was trained under (`settings_digest`), so
a folder whose config.json no longer describes its encoder is never reused.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os

from dialoguecse_tf.encoder.checkpoints import CHECKPOINT_MARKER_FILE, TF1_CONFIG_FILE, VOCAB_FILE
from dialoguecse_tf.evaluation.suite import suite_entries
from dialoguecse_tf.io_utils import read_json_object, write_json
from dialoguecse_tf.stage_config import load_stage_config, stage_record

KEY_LENGTH = 16
REUSED_FROM_FILE = "reused_from.json"
# The key of `settings_digest` in a written encoder's metadata.
SETTINGS_DIGEST_KEY = "settings_digest"
_NOT_TRAINING = ("output_dir", "log_steps", "save_checkpoints_steps", "tpu_address", "reuse_runs_under",
                 "overwrite_output_dir")
_EVAL_FILES = ("eval_select_file", "eval_sts_file", "eval_dialogue_file")
_SUITE_SETTINGS = ("eval_suite", "eval_task")
_EVAL_SETTINGS = _EVAL_FILES + _SUITE_SETTINGS
_FILE_SETTINGS = ("init_checkpoint", "bert_config_file", "vocab_file") + _EVAL_FILES
# Settings added after runs were keyed, with the value at which a run trains as before: left out
# there, so that the runs keyed before keep their keys.
_ADDED_SETTINGS = {"max_examples_per_pass": 0}
# The folders a finished run leaves its encoders in (stage.ENCODER_DIR, stage.BEST_ENCODER_DIR).
_ENCODER_DIRS = ("encoder", "best_encoder")
_digests: dict = {}


def content_digest(path: str) -> str:
    """sha256 of a file's bytes, or of a folder's files (relative names and bytes, sorted),
    leaving out a checkpoint's marker, which records when it was written. A TF checkpoint
    prefix (`.../bert_model.ckpt`) stands for its files and the folder's config and vocabulary."""
    path = os.path.realpath(path)
    if not os.path.exists(path) and os.path.exists(path + ".index"):
        folder = os.path.dirname(path)
        parts = sorted(glob.glob(glob.escape(path) + ".*")) + [
            os.path.join(folder, name) for name in (TF1_CONFIG_FILE, VOCAB_FILE)
            if os.path.exists(os.path.join(folder, name))]
        digest = hashlib.sha256()
        for part in parts:
            digest.update(os.path.basename(part).encode("utf-8") + b"\0" + _file_digest(part).encode("ascii"))
        return digest.hexdigest()
    if os.path.isdir(path):
        digest = hashlib.sha256()
        for root, dirs, names in os.walk(path):
            dirs.sort()
            for name in sorted(set(names) - {CHECKPOINT_MARKER_FILE}):
                full = os.path.join(root, name)
                digest.update(os.path.relpath(full, path).encode("utf-8") + b"\0")
                digest.update(_file_digest(full).encode("ascii"))
        return digest.hexdigest()
    return _file_digest(path)


def _file_digest(path: str) -> str:
    status = os.stat(path)
    cache_key = (path, status.st_size, status.st_mtime_ns)
    if cache_key not in _digests:
        digest = hashlib.sha256()
        with open(path, "rb") as reader:
            for block in iter(lambda: reader.read(1 << 20), b""):
                digest.update(block)
        _digests[cache_key] = digest.hexdigest()
    return _digests[cache_key]


def _records_digest(patterns) -> list:
    if not patterns:
        raise ValueError("no training records given (train_file / --train_file is empty)")
    files = sorted({path for pattern in patterns for path in glob.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"train_file {list(patterns)} matches no file")
    return [content_digest(path) for path in files]


def _settings(record: dict) -> dict:
    """The record without what does not change the weights, inputs still as paths."""
    values = {key: value for key, value in record.items() if key not in _NOT_TRAINING}
    if values.get("warmup_proportion"):
        values.pop("num_warmup_steps", None)
    if not any(values.get(key) for key in _EVAL_SETTINGS):
        values.pop("eval_steps", None)
    for key in _SUITE_SETTINGS:
        if not values.get(key):
            values.pop(key, None)
    for key, default in _ADDED_SETTINGS.items():
        if values.get(key, default) == default:
            values.pop(key, None)
    return values


def settings_digest(record: dict) -> str:
    """A digest of a `config.json` record's settings, inputs as their paths: the encoder a run
    writes records it, and it equals the digest of that run's config.json as written."""
    values = _settings(json.loads(json.dumps(record)))
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:KEY_LENGTH]


def differing_settings(old: dict, new: dict) -> list:
    """(name, old value, new value) of the settings that differ between two `config.json`
    records, leaving out those that do not change the weights (see the module docstring);
    the objective's options are named like the settings, as their flags are."""

    def flat(record):
        values = {key: value for key, value in json.loads(json.dumps(record)).items() if key not in _NOT_TRAINING}
        return {**values.pop("options", {}), **values}

    old_values, new_values = flat(old), flat(new)
    both = (old_values, new_values)
    # As in `_settings`, but judged on both records, so that a change shows as itself.
    if any(values.get("warmup_proportion") for values in both):
        for values in both:
            values.pop("num_warmup_steps", None)
    if not any(values.get(key) for values in both for key in _EVAL_SETTINGS):
        for values in both:
            values.pop("eval_steps", None)
    return [(name, old_values.get(name), new_values.get(name)) for name in sorted(set(old_values) | set(new_values))
            if old_values.get(name) != new_values.get(name)]


def _without_inputs(values: dict) -> dict:
    inputs = _FILE_SETTINGS + _SUITE_SETTINGS + ("train_file",)
    return {key: value for key, value in values.items() if key not in inputs}


def _normalized(record: dict) -> dict:
    values = _settings(record)
    values["train_file"] = _records_digest(record.get("train_file") or ())
    for key in _FILE_SETTINGS:
        if values.get(key):
            values[key] = content_digest(values[key])
    if any(key in values for key in _SUITE_SETTINGS):
        entries = suite_entries(values.pop("eval_suite", None), values.pop("eval_task", ()))
        values["eval_suite"] = [[entry.dataset, entry.task, content_digest(entry.file)] for entry in entries]
    return values


def record_key(record: dict) -> str:
    """The key of a `config.json` record (`stage_config.stage_record`)."""
    canonical = json.dumps(_normalized(record), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:KEY_LENGTH]


def _stage_record(objective, config) -> dict:
    return stage_record(objective, config.resolved(objective))


def run_key(objective, config) -> str:
    """The key of the run `(objective, config)` would make (defaults filled as the stage fills them)."""
    return record_key(_stage_record(objective, config))


def finished_runs(search_dirs) -> list:
    """(run folder, config.json path) of the runs under `search_dirs` with a training
    `config.json` and a written encoder trained under that config (an encoder written before
    encoders recorded their settings' digest is taken at its config.json's word)."""
    runs = []
    for folder in search_dirs:
        for config_path in sorted(glob.glob(os.path.join(folder, "**", "config.json"), recursive=True)):
            run_dir = os.path.dirname(config_path)
            if not os.path.isdir(os.path.join(run_dir, _ENCODER_DIRS[0])):
                continue
            if os.path.exists(os.path.join(run_dir, REUSED_FROM_FILE)):
                continue  # a link to another run, which the search finds itself
            try:
                record = read_json_object(config_path, "a training config.json")
            except ValueError:
                continue
            if "objective" in record and "options" in record and _encoder_digest(run_dir) in (
                    None, settings_digest(record)):
                runs.append((run_dir, config_path))
    return runs


def _encoder_digest(run_dir: str) -> str | None:
    marker = os.path.join(run_dir, _ENCODER_DIRS[0], CHECKPOINT_MARKER_FILE)
    try:
        return read_json_object(marker, "a checkpoint marker").get(SETTINGS_DIGEST_KEY)
    except (ValueError, OSError):
        return None


def find_finished_run(objective, config, search_dirs, exclude: str | None = None) -> str | None:
    """The first finished run under `search_dirs` with the key of `(objective, config)`, not
    `exclude` itself.

    A candidate's key is recomputed from its config.json read as a stage config, so settings
    added to the project after it ran take their defaults, as they did in effect. Inputs are
    hashed only for candidates whose other settings already agree."""
    wanted = _stage_record(objective, config)
    wanted_settings = _without_inputs(_settings(wanted))
    key = record_key(wanted)
    excluded = os.path.realpath(exclude) if exclude else None
    for run_dir, config_path in finished_runs(search_dirs):
        if os.path.realpath(run_dir) == excluded:
            continue
        try:
            record = _stage_record(*load_stage_config(config_path))
            if _without_inputs(_settings(record)) == wanted_settings and record_key(record) == key:
                return run_dir
        except (ValueError, TypeError, OSError):
            continue  # another project version's settings, or its inputs are gone: no match
    return None


def link_run(found: str, output_dir: str, record: dict, key: str) -> None:
    """Makes `output_dir` present `found`'s encoders (relative symlinks) with this run's record."""
    os.makedirs(output_dir, exist_ok=True)
    for name in _ENCODER_DIRS + ("train_log.jsonl",):
        source = os.path.join(found, name)
        target = os.path.join(output_dir, name)
        if os.path.exists(source) and not os.path.lexists(target):
            os.symlink(os.path.relpath(os.path.realpath(source), os.path.realpath(output_dir)), target)
    write_json(os.path.join(output_dir, REUSED_FROM_FILE),
               {"run": os.path.relpath(os.path.realpath(found), os.path.realpath(output_dir)), "key": key})
    write_json(os.path.join(output_dir, "config.json"), record, sort_keys=True)
