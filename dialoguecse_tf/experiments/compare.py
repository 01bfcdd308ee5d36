"""Whether two runs of the same experiment made the same numbers: `dialoguecse-experiment compare`.

A change meant to keep behaviour (a refactor, a dependency bump) is checked by running an
experiment before and after it into two folders and comparing them: every metric of every model
in the results files both folders hold, every variable of every encoder checkpoint both hold,
and every loss a training run logged. Equal means bit-identical; otherwise the report gives the
largest absolute difference, so float noise (e.g. another oneDNN kernel) reads as such.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from dialoguecse_tf.io_utils import parse_json_object

CHECKPOINT_INDEX = "bert_model.ckpt.index"
TRAIN_LOG = "train_log.jsonl"
# Train-log fields that measure the machine, not the model.
_TIMING_FIELDS = frozenset({"steps_per_second", "seconds", "examples_per_second", "time"})


def _files(root: str, accept) -> dict:
    """{path relative to root: absolute path} of the files under `root` that `accept(name)` keeps."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if accept(name):
                path = os.path.join(folder, name)
                found[os.path.relpath(path, root)] = path
    return found


def _difference(before: dict, after: dict) -> dict:
    """Counts of equal and differing numbers of two {key: number} maps, with the largest gap."""
    keys = sorted(set(before) | set(after))
    missing = [key for key in keys if key not in before or key not in after]
    shared = [key for key in keys if key in before and key in after]
    gaps = [abs(before[key] - after[key]) for key in shared
            if not (before[key] == after[key] or (math.isnan(before[key]) and math.isnan(after[key])))]
    return {"values": len(shared), "differing": len(gaps), "max_abs_diff": max(gaps, default=0.0),
            "only_in_one": missing}


def model_metrics(path: str) -> dict:
    """{"<model>/<dataset>/<metric>": value} of a results file (`results.json`, `all_metrics.json`).

    Args:
      path: a results file the evaluation stage or a merge wrote.

    Returns:
      Every numeric metric of every model, keyed by the model's display name (`name#k` for the
      k-th row of a repeated name, e.g. seed rows), dataset and metric. {} for a JSON file without
      models, a JSON array among them (an evaluation folder's `suite.json`).
    """
    with open(path, "rb") as reader:
        data = reader.read()
    if data.lstrip().startswith(b"["):
        return {}
    record = parse_json_object(data, path, "a results file")
    values, seen = {}, {}
    for model in record.get("models", []) if isinstance(record.get("models"), list) else []:
        # Seed rows share a display name and differ in checkpoint paths, which differ between the
        # two folders anyway: the k-th row of a name is matched with the other file's k-th.
        name = model.get("display_name") or model.get("name") or "?"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        for dataset, metrics in (model.get("metrics") or {}).items():
            for metric, value in metrics.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    values[f"{name}/{dataset}/{metric}"] = float(value)
    return values


def checkpoint_values(folder: str) -> dict:
    """{variable name: array} of the TF checkpoint `folder`/bert_model.ckpt."""
    import tensorflow as tf

    reader = tf.train.load_checkpoint(os.path.join(folder, CHECKPOINT_INDEX[:-len(".index")]))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
            if not name.startswith("_CHECKPOINTABLE_OBJECT_GRAPH")}


def _checkpoint_difference(before: str, after: str) -> dict:
    first, second = checkpoint_values(before), checkpoint_values(after)
    shared = sorted(set(first) & set(second))
    differing = [name for name in shared if not np.array_equal(first[name], second[name])]
    gaps = [float(np.max(np.abs(first[name].astype(np.float64) - second[name].astype(np.float64))))
            for name in differing if np.issubdtype(first[name].dtype, np.number)
            and first[name].shape == second[name].shape]
    return {"values": len(shared), "differing": len(differing), "max_abs_diff": max(gaps, default=0.0),
            "only_in_one": sorted(set(first) ^ set(second))}


def train_log_values(path: str) -> dict:
    """{"<step>/<field>": value} of a train log's numeric fields, timings left out."""
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            entry = json.loads(line)
            for field, value in entry.items():
                if field not in _TIMING_FIELDS and field != "step" and isinstance(value, (int, float)) \
                        and not isinstance(value, bool):
                    values[f"{entry.get('step')}/{field}"] = float(value)
    return values


def compare_folders(before: str, after: str, tolerance: float = 0.0) -> dict:
    """Compares every results file, encoder checkpoint and train log two folders both hold.

    Args:
      before: a results or run folder of the experiment made by one version of the code.
      after: the same made by another, with the same relative layout.
      tolerance: the largest absolute difference `within_tolerance` accepts.

    Returns:
      {"results": {relative path: counts}, "checkpoints": {...}, "train_logs": {...},
       "identical": bool}, where counts are {"values", "differing", "max_abs_diff",
      "only_in_one"}. `identical` holds when at least one file was compared, no number differs
      and no compared file lacks a key the other has. Files only one folder holds are listed under
      "unmatched" and make `identical` false.
    """
    report = {"results": {}, "checkpoints": {}, "train_logs": {}}
    kinds = (("results", lambda name: name.endswith(".json"), model_metrics, _difference),
             ("checkpoints", lambda name: name == CHECKPOINT_INDEX, None, None),
             ("train_logs", lambda name: name == TRAIN_LOG, train_log_values, _difference))
    unmatched = []
    for kind, accept, read, diff in kinds:
        first, second = _files(before, accept), _files(after, accept)
        unmatched.extend(sorted(set(first) ^ set(second)))
        for relative in sorted(set(first) & set(second)):
            if kind == "checkpoints":
                report[kind][relative] = _checkpoint_difference(os.path.dirname(first[relative]),
                                                                os.path.dirname(second[relative]))
                continue
            values = read(first[relative]), read(second[relative])
            if values[0] or values[1]:
                report[kind][relative] = diff(*values)
    compared = [counts for kind in ("results", "checkpoints", "train_logs") for counts in report[kind].values()]
    if kind_unmatched := [path for path in unmatched if _is_compared_kind(path)]:
        report["unmatched"] = kind_unmatched
    complete = bool(compared) and not kind_unmatched and not any(counts["only_in_one"] for counts in compared)
    report["identical"] = complete and all(counts["differing"] == 0 for counts in compared)
    report["tolerance"] = tolerance
    report["within_tolerance"] = complete and all(counts["max_abs_diff"] <= tolerance for counts in compared)
    return report


def _is_compared_kind(path: str) -> bool:
    name = os.path.basename(path)
    return name in (CHECKPOINT_INDEX, TRAIN_LOG) or name in ("results.json", "all_metrics.json")
