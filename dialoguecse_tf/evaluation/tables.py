"""Tables of evaluation results laid out like Table 2: rows merged by model from `results.json`
files, training seeds folded into mean ± std, columns chosen and ranked, written as Markdown and
JSON.

Columns come from the registered evaluation tasks (`evaluation/tasks/`), in task order; a
dataset name always means the same files (their checksums, `results_io`), so merging refuses to
put numbers from different files under one column.
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics

from dialoguecse_tf.evaluation.provenance import portable_path
from dialoguecse_tf.evaluation.results_io import RESULTS_FILE, file_kinds, read_results
from dialoguecse_tf.evaluation.tasks.registry import metric_columns, task_classes
from dialoguecse_tf.io_utils import atomic_open, write_json

TABLE_FILE = "results.md"
# A row named "<model> [seed <n>]" is one training seed of <model>; `aggregate_seeds` folds them.
SEED_SUFFIX = re.compile(r"^(?P<model>.+) \[seed (?P<seed>-?\d+)\]$")
_SEED_NOTE = (
    "Rows marked (n seeds) are the mean over n training seeds, ± the sample standard deviation "
    "(n - 1 in the denominator) where n > 1; the seeds and each seed's numbers are in the JSON table."
)


@dataclasses.dataclass
class TableRow:
    model: str
    metrics: dict  # {dataset name: {"corr"/"map"/"mrr": percent}}
    descriptions: list  # what the vectors are, one entry per distinct description among sources
    checkpoints: list
    sources: list  # the results.json files the row's numbers come from
    spread: dict = dataclasses.field(default_factory=dict)  # {dataset: {metric: sample std over seeds}}
    seeds: list = dataclasses.field(default_factory=list)  # training seeds averaged into this row
    per_seed: list = dataclasses.field(default_factory=list)  # each seed's metrics, in `seeds` order
    dialogue_protocols: list = dataclasses.field(default_factory=list)  # how its dialogue columns were embedded
    # {dataset: {metric: [seeds]}} for a metric only some of `seeds` report (an evaluation that
    # scores a row's first seed only); every other metric is every seed's.
    metric_seeds: dict = dataclasses.field(default_factory=dict)

    def seeds_of(self, dataset: str, key: str) -> list:
        """The training seeds behind the row's number on one column."""
        return self.metric_seeds.get(dataset, {}).get(key, self.seeds)

    def to_dict(self) -> dict:
        """The row as JSON; `metric_seeds` only where some metric has fewer seeds than the row."""
        row = dataclasses.asdict(self)
        if not row["metric_seeds"]:
            del row["metric_seeds"]
        return row

    def label(self) -> str:
        """The row's name as tables and charts show it: with its number of seeds where folded."""
        if not self.seeds:
            return self.model
        return f"{self.model} ({len(self.seeds)} seed{'s' if len(self.seeds) > 1 else ''})"


@dataclasses.dataclass
class ResultsTable:
    """Rows = models, columns = (dataset, metric), both in order of first appearance."""

    datasets: list  # dataset records (see module docstring), merged over sources
    rows: list
    selected: list | None = None  # [(dataset, metric key)] to show, in this order; None: every column
    mark_best: bool = False  # bold each ranked column's best row and the rows level with it

    def to_dict(self) -> dict:
        return {"datasets": self.datasets, "rows": [row.to_dict() for row in self.rows],
                "columns": [[name, key, header] for name, key, header in self.columns()],
                "best": self.best_rows()}

    def all_columns(self) -> list[tuple[str, str, str]]:
        """(dataset, metric key, header) for every metric that some row has."""
        return [
            (name, key, f"{name} {label}")
            for name, key, label in table_columns([dataset["name"] for dataset in self.datasets],
                                                  [row.metrics for row in self.rows])
        ]

    def columns(self) -> list[tuple[str, str, str]]:
        """The columns shown: `selected` in its order, else every column."""
        every = self.all_columns()
        if self.selected is None:
            return every
        by_key = {(name, key): (name, key, header) for name, key, header in every}
        return [by_key[pair] for pair in self.selected]

    def best_by_column(self) -> dict:
        """{(dataset, metric key): [model, ...]} for each ranked column that two rows or more
        fill: the row with the best mean and every row the rule finds level with it (`level`), in
        row order: a row of one seed beside a best row of one seed or none (`spread_unmeasured`) is
        bold only when equal, as the rule finds no spread to call them level by. Keyed by the
        column, not its header, so two columns never share a mark."""
        if not self.mark_best:
            return {}
        directions = metric_directions()
        best = {}
        for name, key, _ in self.columns():
            if directions.get(key) is None:
                continue
            ranked = [(row.model, row.metrics[name][key], row.spread.get(name, {}).get(key, 0.0))
                      for row in self.rows if key in row.metrics.get(name, {})]
            # One row scored leads nothing: a column only some parts fill is not ranked until others do.
            if len(ranked) > 1:
                target = (max if directions[key] else min)(value for _, value, _ in ranked)
                leaders = [(value, std) for _, value, std in ranked if value == target]
                best[(name, key)] = [model for model, value, std in ranked
                                     if any(level(value, std, *leader) for leader in leaders)]
        return best

    def best_rows(self) -> dict:
        """{header: [model, ...]}: `best_by_column` as the table's readers name the columns."""
        best = self.best_by_column()
        return {header: best[(name, key)] for name, key, header in self.columns() if (name, key) in best}

    def to_markdown(self) -> str:
        columns = self.columns()
        lines = [
            "| Model | " + " | ".join(header for _, _, header in columns) + " |",
            "|:--|" + "--:|" * len(columns),
        ]
        best = self.best_by_column()
        for row in self.rows:
            cells = [_metric_cell(row, name, key) for name, key, _ in columns]
            cells = [f"**{cell}**" if row.model in best.get((name, key), ()) else cell
                     for cell, (name, key, _) in zip(cells, columns)]
            lines.append(f"| {_cell(row.label())} | " + " | ".join(cells) + " |")
        lines += ["", "All numbers are percentages."]
        if any(row.dialogue_protocols for row in self.rows):
            used = {protocol for row in self.rows for protocol in row.dialogue_protocols}
            lines += ["", "Dialogue columns, each row's embedding protocol ("
                      + "; ".join(f"{name}: {text}" for name, text in _PROTOCOL_NOTES.items() if name in used) + "): "
                      + "; ".join(f"{row.label()}: {', '.join(row.dialogue_protocols)}"
                                  for row in self.rows if row.dialogue_protocols) + "."]
        if best:
            single = any(len(row.seeds_of(name, key)) == 1 for row in self.rows for name, key, _ in columns
                         if key in row.metrics.get(name, {}))
            lines += ["", _BEST_NOTE + (" " + _SINGLE_SEED_NOTE if single else "")]
        lines += [f"- {task.label} ({', '.join(header for _, header in task.metrics)}): {task.description}."
                  for task in task_classes() if any(f"{task.task}_file" in dataset for dataset in self.datasets)]
        if any(row.seeds for row in self.rows):
            lines += ["", _SEED_NOTE]
        if any(row.metric_seeds for row in self.rows):
            lines += ["", _FEWER_SEEDS_NOTE]
        lines += ["", "Datasets:", ""]
        for dataset in self.datasets:
            parts = [f"{task_label} `{dataset[file_key]}` ({dataset[count_key]} {count_key.split('_')[-1]})"
                     for (file_key, _, count_key), task_label in zip(file_kinds(), _task_labels())
                     if file_key in dataset]
            lines.append(f"- {dataset['name']}: " + "; ".join(parts))
        lines += ["", "Models:", ""]
        for row in self.rows:
            checkpoints = ", ".join(f"`{path}`" for path in row.checkpoints)
            lines.append(f"- {row.model}: {' / '.join(row.descriptions)}. Checkpoint: {checkpoints}.")
        return "\n".join(lines) + "\n"


# How the note under a table names each dialogue protocol its rows use (registry.DIALOGUE_PROTOCOLS).
_PROTOCOL_NOTES = {
    "interlocutor": "dial2vec's interlocutor pooling",
    "utterance_mean": "the mean of the sentence vectors of its utterances",
    "utterance_token_mean": "the mean over its utterances of each one's token mean, [CLS] u without [SEP]",
    "plain_mean": "the mean of all token outputs of the dialogue without [SEP]",
}

# The project's one rule for orderings: a row leads another on a column only when their means
# differ by more than twice the larger of the two rows' seed standard deviations (none is measured
# between rows of one seed or none: `spread_unmeasured`).
_BEST_NOTE = (
    "Bold: the row with the best mean in each column (the mean over seeds where they are folded) and every "
    "row level with it; a row leads another only when their means differ by more than twice the larger "
    "of the two rows' seed standard deviations (a row without seeds counts 0), otherwise they are level. "
    "Spread columns, and columns only one row has, are not ranked."
)
_FEWER_SEEDS_NOTE = ("A cell marked (1 of m seeds) is its row's first seed's number only (an evaluation that "
                     "scores each row's first seed, e.g. the fine-tuned tasks); the rule reads it as one seed's.")
_SINGLE_SEED_NOTE = ("A row of one seed has no measured spread: beside a row of one seed or none, bold or not "
                     "says nothing of a lead, only which mean is higher (the findings give such a gap only).")


def level(value: float, std: float, other: float, other_std: float) -> bool:
    """True if two rows' means are level on a column: they differ by at most twice the larger
    of their seed standard deviations (0 for a row without seeds)."""
    return abs(value - other) <= 2 * max(std, other_std)


def spread_unmeasured(seeds: int, other_seeds: int) -> bool:
    """True if neither of two rows measures a seed spread and one is a single seed's (a row
    without seeds is exact): the rule cannot tell them apart, only their gap is known."""
    return max(seeds, other_seeds) == 1


def metric_directions() -> dict:
    """{metric key: True if higher is better}; spread columns (`*_std`) map to None (not ranked)."""
    return {key: (None if key.endswith("_std") else task.higher_is_better)
            for task in task_classes() for key, _ in task.metrics}


def select_columns(table: "ResultsTable", specs, mark_best: bool = False,
                   skip_missing: bool = False) -> "ResultsTable":
    """`table` showing only the columns `specs` names ("Dataset:metric_key", in order). A column
    the table lacks is an error, or with `skip_missing` left out (a benchmark whose parts have not
    all run yet)."""
    available = {(name, key) for name, key, _ in table.all_columns()}
    selected = []
    for spec in specs:
        name, _, key = spec.rpartition(":")
        if (name, key) not in available:
            if skip_missing:
                continue
            raise ValueError(f"column {spec!r} is not in the table; it has "
                             + ", ".join(f"{n}:{k}" for n, k, _ in table.all_columns()))
        selected.append((name, key))
    return dataclasses.replace(table, selected=selected or None, mark_best=mark_best)


def order_rows(table: "ResultsTable", models) -> "ResultsTable":
    """`table` with the rows named in `models` first, in that order, then the others as they
    were: a table merged from files that each hold some of the rows keeps one row order."""
    rank = {name: index for index, name in enumerate(models)}
    return dataclasses.replace(table, rows=sorted(table.rows, key=lambda row: rank.get(row.model, len(rank))))


def _task_labels() -> tuple:
    return tuple(task.label for task in task_classes())


def table_columns(dataset_names: list, row_metrics: list) -> list[tuple[str, str, str]]:
    """(dataset, metric key, label) for every metric some row has: registered metrics in task
    order, then any other metric a results file holds, under its own key."""
    known = metric_columns()
    known_keys = {key for key, _ in known}
    columns = []
    for name in dataset_names:
        present = {key for metrics in row_metrics for key in metrics.get(name, {})}
        columns += [(name, key, label) for key, label in known if key in present]
        columns += [(name, key, key) for key in sorted(present - known_keys)]
    return columns


def metric_text(value: float, spread: float | None = None) -> str:
    """A metric as tables print it: two decimals, with ± its spread over seeds where there is one."""
    return f"{value:.2f}" if spread is None else f"{value:.2f} ± {spread:.2f}"


def _metric_cell(row: TableRow, dataset: str, key: str) -> str:
    if key not in row.metrics.get(dataset, {}):
        return "–"
    text = metric_text(row.metrics[dataset][key], row.spread.get(dataset, {}).get(key))
    seeds = row.seeds_of(dataset, key)
    return text if len(seeds) == len(row.seeds) else f"{text} ({len(seeds)} of {len(row.seeds)} seeds)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _merge_dataset(merged: dict, dataset: dict, source: str, sources: dict) -> None:
    for file_key, hash_key, count_key in file_kinds():
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
            protocol = model.get("dialogue_protocol")
            if protocol is not None and protocol not in row.dialogue_protocols:
                row.dialogue_protocols.append(protocol)
    return ResultsTable(list(datasets.values()), list(rows.values()))


def seed_row_name(model: str, seed: int) -> str:
    """The display name of one training seed's row, which `aggregate_seeds` folds into `model`."""
    return f"{model} [seed {seed}]"


def aggregate_seeds(table: ResultsTable) -> ResultsTable:
    """Folds the rows of one model's training seeds ("<model> [seed <n>]") into one row of
    means, with the sample standard deviation in `spread` (n > 1) and every seed's numbers in
    `per_seed`; the folded row takes the place of the model's first seed row. A metric only the
    first seed reports (an evaluation of `model_seeds: first`) is that seed's number, its seed in
    `metric_seeds`; "first" is the order the seeds appear in the merged files (the benchmark's
    parts glob sorted, its parts of every seed, `en-*`, before the first-seed ones, `en_ft-*`).
    Raises ValueError when a metric is reported by some seeds but neither all nor only the first
    (a seed's evaluation is missing), or a seed appears twice."""
    groups: dict[str, list] = {}
    order: list = []
    for row in table.rows:
        match = SEED_SUFFIX.match(row.model)
        key = match.group("model") if match else None
        if key is None or key not in groups:
            order.append((key, row))
        if key is not None:
            groups.setdefault(key, []).append((int(match.group("seed")), row))
    clashes = sorted({row.model for key, row in order if key is None} & set(groups))
    if clashes:
        raise ValueError(f"{clashes}: a row without a seed and seed rows share this name; rename one")
    rows = []
    for key, row in order:
        rows.append(row if key is None else _fold_seeds(key, groups[key]))
    return dataclasses.replace(table, rows=rows)


def _fold_seeds(model: str, seed_rows: list) -> TableRow:
    seeds = [seed for seed, _ in seed_rows]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{model}: seed listed twice among {seeds}")
    folded = TableRow(model, {}, [], [], [], seeds=seeds, per_seed=[row.metrics for _, row in seed_rows])
    columns = {(dataset, key): None for _, row in seed_rows for dataset, values in row.metrics.items()
               for key in values}
    for dataset, key in columns:
        reporting = [seed for seed, row in seed_rows if key in row.metrics.get(dataset, {})]
        if reporting not in (seeds, seeds[:1]):
            raise ValueError(f"{model}: {dataset} {key} is reported by seeds {reporting} of {seeds}, neither all "
                             "nor only the first: a seed's evaluation is missing")
        numbers = [row.metrics[dataset][key] for _, row in seed_rows[:len(reporting)]]
        folded.metrics.setdefault(dataset, {})[key] = statistics.fmean(numbers)
        if len(numbers) > 1:
            folded.spread.setdefault(dataset, {})[key] = statistics.stdev(numbers)
        if len(reporting) < len(seeds):
            folded.metric_seeds.setdefault(dataset, {})[key] = reporting
    for _, row in seed_rows:
        for field in ("descriptions", "checkpoints", "sources", "dialogue_protocols"):
            for value in getattr(row, field):
                if value not in getattr(folded, field):
                    getattr(folded, field).append(value)
    return folded


def merge_results(paths: list[str]) -> ResultsTable:
    """Reads several `results.json` files and merges them into one table (see `results_table`)."""
    if not paths:
        raise ValueError("give at least one results.json to merge")
    return results_table([(portable_path(path), read_results(path)) for path in paths])


def write_table(table: ResultsTable, output_dir: str, stem: str = "merged_results") -> tuple[str, str]:
    """Writes `<stem>.md` and `<stem>.json` atomically; returns their paths."""
    markdown_path = os.path.join(output_dir, stem + ".md")
    json_path = os.path.join(output_dir, stem + ".json")
    with atomic_open(markdown_path, "w", encoding="utf-8") as writer:
        writer.write(table.to_markdown())
    write_json(json_path, table.to_dict())
    return markdown_path, json_path


def write_results(results: dict, output_dir: str) -> str:
    """Writes `results.json` and its Markdown table `results.md`, each atomically; returns the JSON path.

    Here, not in `results_io`, because `results.md` is a table and the tables read `results_io`.
    """
    path = os.path.join(output_dir, RESULTS_FILE)
    write_json(path, results)
    with atomic_open(os.path.join(output_dir, TABLE_FILE), "w", encoding="utf-8") as writer:
        writer.write(results_table([(path, results)]).to_markdown())
    return path
