"""Evaluation results: `results.json` per run, a Markdown table laid out like Table 2, merging.

`results.json` (format_version 1):

    {"format_version": 1, "created_utc": "2021-11-07T12:00:00+00:00", "git_commit": "<sha>" | null,
     "config": {...the run's EvaluationConfig...},
     "datasets": [{"name": "ECD", "select_file": "/abs/select.txt", "select_sha256": "...",
                   "sr_queries": 2373, "sts_file": "/abs/sts.txt", "sts_sha256": "...", "sts_pairs": 500}],
     "models": [{"display_name": "BERT-flow", "checkpoint": "/abs/ckpt", "baseline": "flow" | null,
                 "description": "...", "fit": {...} | null,
                 "metrics": {"ECD": {"corr": 55.04, "map": 52.16, "mrr": 71.06}}}]}

Metrics are percentages. Datasets carry the SHA-256 of their files so that merging refuses to
put numbers from different files under one column name.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
import re
import subprocess

from dialoguecse_tf.io_utils import atomic_open, read_json_object, write_json

RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"
FORMAT_VERSION = 1
METRIC_COLUMNS = (("corr", "Corr."), ("map", "MAP"), ("mrr", "MRR"))
_FILE_KINDS = (("select_file", "select_sha256", "sr_queries"), ("sts_file", "sts_sha256", "sts_pairs"))
_METRIC_NOTE = (
    "All numbers are percentages. Corr.: Spearman correlation between the D-STS gold scores and "
    "the cosine similarities of the sentence pairs. MAP, MRR: semantic retrieval (SR), each query's "
    "candidates ranked by cosine similarity."
)


def git_commit() -> str | None:
    """HEAD commit of the git checkout holding this package; None without git or a checkout."""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        completed = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=package_dir, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = completed.stdout.strip()
    return commit if re.fullmatch(r"[0-9a-f]{40,64}", commit) else None


def utc_now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as reader:
        for block in iter(lambda: reader.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def dataset_record(name: str, select_file: str | None, sr_queries: int | None,
                   sts_file: str | None, sts_pairs: int | None) -> dict:
    record = {"name": name}
    if select_file is not None:
        record.update(select_file=os.path.abspath(select_file), select_sha256=file_sha256(select_file),
                      sr_queries=sr_queries)
    if sts_file is not None:
        record.update(sts_file=os.path.abspath(sts_file), sts_sha256=file_sha256(sts_file), sts_pairs=sts_pairs)
    return record


def new_results(config: dict, datasets: list[dict]) -> dict:
    """An empty results document for a run; models are appended as they are evaluated."""
    return {
        "format_version": FORMAT_VERSION,
        "created_utc": utc_now(),
        "git_commit": git_commit(),
        "config": config,
        "datasets": datasets,
        "models": [],
    }


def model_record(display_name: str, checkpoint: str, baseline: str | None, description: str,
                 fit: dict | None, metrics: dict) -> dict:
    return {
        "display_name": display_name,
        "checkpoint": os.path.abspath(checkpoint),
        "baseline": baseline,
        "description": description,
        "fit": fit,
        "metrics": metrics,
    }


def write_results(results: dict, output_dir: str) -> str:
    """Writes `results.json` and its Markdown table `results.md`, each atomically; returns the JSON path."""
    path = os.path.join(output_dir, RESULTS_FILE)
    write_json(path, results)
    with atomic_open(os.path.join(output_dir, TABLE_FILE), "w", encoding="utf-8") as writer:
        writer.write(results_table([(path, results)]).to_markdown())
    return path


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
    for keys in _FILE_KINDS:
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


@dataclasses.dataclass
class TableRow:
    model: str
    metrics: dict  # {dataset name: {"corr"/"map"/"mrr": percent}}
    descriptions: list  # what the vectors are, one entry per distinct description among sources
    checkpoints: list
    sources: list  # the results.json files the row's numbers come from


@dataclasses.dataclass
class ResultsTable:
    """Rows = models, columns = (dataset, metric), both in order of first appearance."""

    datasets: list  # dataset records (see module docstring), merged over sources
    rows: list

    def to_dict(self) -> dict:
        return {"datasets": self.datasets, "rows": [dataclasses.asdict(row) for row in self.rows]}

    def columns(self) -> list[tuple[str, str, str]]:
        """(dataset, metric key, header) for every metric that some row has."""
        return [
            (dataset["name"], key, f"{dataset['name']} {label}")
            for dataset in self.datasets
            for key, label in METRIC_COLUMNS
            if any(key in row.metrics.get(dataset["name"], {}) for row in self.rows)
        ]

    def to_markdown(self) -> str:
        columns = self.columns()
        lines = [
            "| Model | " + " | ".join(header for _, _, header in columns) + " |",
            "|:--|" + "--:|" * len(columns),
        ]
        for row in self.rows:
            cells = [
                "–" if key not in row.metrics.get(name, {}) else f"{row.metrics[name][key]:.2f}"
                for name, key, _ in columns
            ]
            lines.append(f"| {_cell(row.model)} | " + " | ".join(cells) + " |")
        lines += ["", _METRIC_NOTE, "", "Datasets:", ""]
        for dataset in self.datasets:
            parts = []
            if "select_file" in dataset:
                parts.append(f"SR `{dataset['select_file']}` ({dataset['sr_queries']} queries)")
            if "sts_file" in dataset:
                parts.append(f"D-STS `{dataset['sts_file']}` ({dataset['sts_pairs']} pairs)")
            lines.append(f"- {dataset['name']}: " + "; ".join(parts))
        lines += ["", "Models:", ""]
        for row in self.rows:
            checkpoints = ", ".join(f"`{path}`" for path in row.checkpoints)
            lines.append(f"- {row.model}: {' / '.join(row.descriptions)}. Checkpoint: {checkpoints}.")
        return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _merge_dataset(merged: dict, dataset: dict, source: str, sources: dict) -> None:
    for file_key, hash_key, count_key in _FILE_KINDS:
        if hash_key not in dataset:
            continue
        if hash_key in merged and merged[hash_key] != dataset[hash_key]:
            raise ValueError(
                f"dataset {dataset['name']!r} means different {file_key}s: {merged[file_key]} in "
                f"{sources[(dataset['name'], file_key)]} and {dataset[file_key]} in {source}; rename one"
            )
        if hash_key not in merged:
            merged.update({key: dataset[key] for key in (file_key, hash_key, count_key)})
            sources[(dataset["name"], file_key)] = source


def results_table(sources: list[tuple[str, dict]]) -> ResultsTable:
    """Merges (source path, results dict) pairs into one table; rows are merged by model name.

    Raises ValueError when two sources give different numbers for one model, dataset and
    metric, or use one dataset name for different files.
    """
    datasets: dict[str, dict] = {}
    dataset_sources: dict = {}
    rows: dict[str, TableRow] = {}
    metric_sources: dict = {}
    for source, results in sources:
        for dataset in results["datasets"]:
            merged = datasets.setdefault(dataset["name"], {"name": dataset["name"]})
            _merge_dataset(merged, dataset, source, dataset_sources)
        for model in results["models"]:
            name = model["display_name"]
            row = rows.setdefault(name, TableRow(name, {}, [], [], []))
            for dataset_name, values in model["metrics"].items():
                for key, value in values.items():
                    earlier = row.metrics.setdefault(dataset_name, {}).setdefault(key, value)
                    if earlier != value:
                        first_source = metric_sources[(name, dataset_name, key)]
                        raise ValueError(
                            f"{name} on {dataset_name} has {key} {earlier} in {first_source} but {value} in {source}"
                        )
                    metric_sources.setdefault((name, dataset_name, key), source)
            for field, value in (("descriptions", model["description"]), ("checkpoints", model["checkpoint"]),
                                 ("sources", source)):
                if value not in getattr(row, field):
                    getattr(row, field).append(value)
    return ResultsTable(list(datasets.values()), list(rows.values()))


def merge_results(paths: list[str]) -> ResultsTable:
    """Reads several `results.json` files and merges them into one table (see `results_table`)."""
    if not paths:
        raise ValueError("give at least one results.json to merge")
    return results_table([(os.path.abspath(path), read_results(path)) for path in paths])


def write_table(table: ResultsTable, output_dir: str, stem: str = "merged_results") -> tuple[str, str]:
    """Writes `<stem>.md` and `<stem>.json` atomically; returns their paths."""
    markdown_path = os.path.join(output_dir, stem + ".md")
    json_path = os.path.join(output_dir, stem + ".json")
    with atomic_open(markdown_path, "w", encoding="utf-8") as writer:
        writer.write(table.to_markdown())
    write_json(json_path, table.to_dict())
    return markdown_path, json_path
