"""`results.json`, the evaluation results of one run: building, reading and validating it.

`results.json` (format_version 1):

    {"format_version": 1, "created_utc": "2021-11-07T12:00:00+00:00", "git_commit": "<sha>" | null,
     "config": {...the run's EvaluationConfig...},
     "datasets": [{"name": "ECD", "select_file": "../shared/data/ecd/dev/select.txt", "select_sha256": "...",
                   "sr_queries": 2373, "sts_file": "../shared/data/ecd/dev/sts.txt", "sts_sha256": "...",
                   "sts_pairs": 500}],
     "models": [{"display_name": "BERT-flow", "checkpoint": "runs/ecd/pretrain/encoder", "baseline": "flow" | null,
                 "description": "...", "fit": {...} | null,
                 "dialogue_protocol": "interlocutor" | "utterance_mean" | "utterance_token_mean" | "plain_mean" | null,
                 "metrics": {"ECD": {"corr": 55.04, "map": 52.16, "mrr": 71.06}},
                 "not_applicable": {"Banking77": ["Intent (fine-tuned)"]}}],
     "model_seconds": {"BERT-flow": 58.3}}

Metrics are percentages. `dialogue_protocol` (absent in files written before it existed) names
how the row embedded dialogues (`registry.DIALOGUE_PROTOCOLS`), null without a dialogue task.
`not_applicable` (present only when a task does not apply to the row: a baseline row and a
fine-tuned task) names those tasks per dataset; the row has no metric for them.
`model_seconds` (absent in files written before it existed) gives each row's wall seconds, its
encoder's loading and every task of the run, so a part's cost per encoder is on record; like
`created_utc` it is when-and-how information, not a result.
Datasets carry the SHA-256 of their files so that merging (`tables`) refuses to put numbers from
different files under one column name; each evaluation task (`evaluation/tasks/`) adds its
`<task>_file`, `<task>_sha256` and count keys, and its metrics become table columns in task order.
Paths are written relative to the repository (files beside it, such as `../shared/data`, start
with `..`), so results hold no machine's layout.
"""

from __future__ import annotations

from dialoguecse_tf.evaluation.provenance import git_commit, portable_path, portable_values, utc_now
from dialoguecse_tf.evaluation.tasks.registry import task_classes
from dialoguecse_tf.io_utils import read_json_object

RESULTS_FILE = "results.json"
FORMAT_VERSION = 1


def file_kinds() -> tuple:
    """(file key, checksum key, count key) of every registered evaluation task."""
    return tuple((f"{task.task}_file", f"{task.task}_sha256", task.count_key) for task in task_classes())


def new_results(config: dict, datasets: list[dict]) -> dict:
    """An empty results document for a run; models are appended as they are evaluated. Absolute
    paths in `config` (e.g. a checkpoint inside the virtual environment) are written relative
    to the repository, as every other path of the document."""
    return {
        "format_version": FORMAT_VERSION,
        "created_utc": utc_now(),
        "git_commit": git_commit(),
        "config": portable_values(config),
        "datasets": datasets,
        "models": [],
        "model_seconds": {},
    }


def model_record(display_name: str, checkpoint: str, baseline: str | None, description: str,
                 fit: dict | None, metrics: dict, dialogue_protocol: str | None = None,
                 not_applicable: dict | None = None) -> dict:
    """One row's entry; `not_applicable` ({dataset: [task label, ...]}, kept only when not empty)
    names the tasks the row has no number for because they do not apply to it."""
    record = {
        "display_name": display_name,
        "checkpoint": portable_path(checkpoint),
        "baseline": baseline,
        "description": description,
        "fit": fit,
        "dialogue_protocol": dialogue_protocol,
        "metrics": metrics,
    }
    if not_applicable:
        record["not_applicable"] = not_applicable
    return record


def read_results(path: str) -> dict:
    """Reads a `results.json`, checking that it is one: format version, and every dataset and
    model entry with the fields merging and tables use (ValueError naming the file and entry)."""
    results = read_json_object(path, "a results.json")
    if results.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: not a results.json of format version {FORMAT_VERSION}")
    missing = [key for key in ("datasets", "models") if not isinstance(results.get(key), list)]
    if missing:
        raise ValueError(f"{path}: results.json lacks {missing}")
    for index, dataset in enumerate(results["datasets"]):
        problem = _dataset_problem(dataset)
        if problem:
            raise ValueError(f"{path}: datasets[{index}] {problem}")
    for index, model in enumerate(results["models"]):
        problem = _model_problem(model)
        if problem:
            raise ValueError(f"{path}: models[{index}] {problem}")
    return results


def _dataset_problem(dataset) -> str | None:
    if not isinstance(dataset, dict) or not isinstance(dataset.get("name"), str):
        return "needs a string 'name'"
    for keys in file_kinds():
        if any(key in dataset for key in keys) and not all(key in dataset for key in keys):
            return f"needs all of {list(keys)} or none"
    return None


def _model_problem(model) -> str | None:
    if not isinstance(model, dict):
        return "is not a JSON object"
    for key in ("display_name", "description"):
        if not isinstance(model.get(key), str):
            return f"needs a string {key!r}"
    if "checkpoint" not in model:
        return "lacks 'checkpoint'"
    metrics = model.get("metrics")
    if not isinstance(metrics, dict) or not all(
        isinstance(values, dict) and all(_is_number(value) for value in values.values()) for values in metrics.values()
    ):
        return "needs 'metrics' of the form {dataset: {metric: number}}"
    return None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
