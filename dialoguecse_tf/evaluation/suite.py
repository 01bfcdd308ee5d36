"""Evaluation suites as data: which task runs on which file of which dataset, and the evaluators
built from that, which evaluation runs and the training stage's evaluation share.

A suite is a list of `SuiteEntry(dataset, task, file)`: `task` is a registered evaluator's
name (`tasks.base.task_names()`: dsts, sr, intent, oos, clustering, relatedness,
dialogue_retrieval), `dataset` the column group its metrics go to. It is given as repeated
`DATASET:TASK:PATH` strings (`parse_entry`, the `--eval_task` flags) or as a JSON file
(`load_suite`, `--eval_suite`):

    [{"dataset": "ECD", "task": "dsts", "file": "../shared/data/ecd/dev/sts.txt"},
     {"dataset": "ECD", "task": "sr", "file": "../shared/data/ecd/dev/select.txt"}]

Paths are taken as given, relative to the working directory, as every path flag is. The flags
that named one file per task and dataset (`--select_file`, ... with `--dataset_name`) become
entries with `suite_from_legacy`.

The module does not import TensorFlow: a suite is checked before the slow imports start.
"""

from __future__ import annotations

import dataclasses
import os

from dialoguecse_tf.evaluation.tasks.base import Evaluator
from dialoguecse_tf.evaluation.tasks.registry import get_task, task_names
from dialoguecse_tf.io_utils import read_json, write_json

DEFAULT_DATASET_NAME = "dev"
# The file flags evaluation had before suites, in table order, and the tasks each one's file
# feeds. Closed: a task added since is named in suites only.
LEGACY_FILE_FLAGS = {"sts_file": ("dsts",), "select_file": ("sr",), "intent_file": ("intent",), "oos_file": ("oos",),
                     "dialogue_file": ("clustering", "relatedness", "dialogue_retrieval")}
_ENTRY_KEYS = ("dataset", "task", "file")


@dataclasses.dataclass(frozen=True)
class SuiteEntry:
    """One task of one dataset, on one file; an unknown task or an empty field is a ValueError."""

    dataset: str
    task: str
    file: str

    def __post_init__(self):
        for key in _ENTRY_KEYS:
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise ValueError(f"an evaluation suite entry's {key} must be a non-empty string, got "
                                 f"{getattr(self, key)!r}")
        get_task(self.task)

    def __str__(self) -> str:
        return f"{self.dataset}:{self.task}:{self.file}"

    @property
    def file_exists(self) -> bool:
        """Whether the file is there (a folder, for the tasks that read one)."""
        return os.path.isfile(self.file) or (get_task(self.task).accepts_folder and os.path.isdir(self.file))


def parse_entry(text: str) -> SuiteEntry:
    """`SuiteEntry` of "DATASET:TASK:PATH" (split at the first two colons: PATH may hold more)."""
    parts = text.split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise ValueError(f"evaluation task {text!r}: expected DATASET:TASK:PATH, e.g. ECD:sr:select.txt "
                         f"(tasks: {', '.join(task_names())})")
    try:
        return SuiteEntry(*parts)
    except ValueError as error:
        raise ValueError(f"evaluation task {text!r}: {error}") from None


def load_suite(path: str) -> list[SuiteEntry]:
    """The entries of a suite file, a JSON list of {"dataset", "task", "file"} objects; a bad
    entry (an unknown or missing key, an unknown task, a file that is not there) is a ValueError
    naming the suite file and the entry's index."""
    value = read_json(path)
    if not isinstance(value, list) or not value:
        raise ValueError(f"{path}: an evaluation suite must be a non-empty JSON list of "
                         f"{{\"dataset\", \"task\", \"file\"}} objects")
    entries = []
    for index, item in enumerate(value):
        where = f"{path}: entry {index}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: expected an object with dataset, task and file, got {type(item).__name__}")
        unknown, missing = sorted(set(item) - set(_ENTRY_KEYS)), [key for key in _ENTRY_KEYS if key not in item]
        if unknown or missing:
            raise ValueError(f"{where}: " + "; ".join(
                ([f"unknown keys {unknown}"] if unknown else []) + ([f"missing keys {missing}"] if missing else []))
                + " (an entry has dataset, task and file)")
        try:
            entry = SuiteEntry(item["dataset"], item["task"], item["file"])
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if not entry.file_exists:
            raise ValueError(f"{where}: {entry.task} file of dataset {entry.dataset!r} not found: {entry.file}")
        entries.append(entry)
    check_entries(entries, source=path)
    return entries


def write_suite(path: str, entries) -> None:
    """Writes `entries` as a suite file `load_suite` reads."""
    write_json(path, [dataclasses.asdict(entry) for entry in entries])


def suite_entries(suite_file: str | None, tasks=()) -> list[SuiteEntry]:
    """The entries of a suite file, then those of "DATASET:TASK:PATH" strings, checked together."""
    entries = (load_suite(suite_file) if suite_file else []) + [parse_entry(text) for text in tasks]
    check_entries(entries)
    return entries


def check_entries(entries, source: str = "the evaluation suite") -> None:
    """Raises ValueError when one dataset lists a task twice (its metrics would collide)."""
    seen = set()
    for entry in entries:
        if (entry.dataset, entry.task) in seen:
            raise ValueError(f"{source} lists task {entry.task!r} of dataset {entry.dataset!r} twice")
        seen.add((entry.dataset, entry.task))


def suite_from_legacy(dataset_names, files_by_flag: dict) -> list[SuiteEntry]:
    """Entries of the parallel per-dataset flags: entry i of `dataset_names` and of each list of
    `files_by_flag` ({flag of `LEGACY_FILE_FLAGS`: paths}) describes dataset i, '' where it has
    no such file; with one dataset the name may be omitted (it is then "dev")."""
    unknown = sorted(set(files_by_flag) - set(LEGACY_FILE_FLAGS))
    if unknown:
        raise ValueError(f"no evaluation file flag {unknown}; known: {', '.join(LEGACY_FILE_FLAGS)}")
    per_flag = {flag: tuple(files_by_flag.get(flag) or ()) for flag in LEGACY_FILE_FLAGS}
    flags = ", ".join(per_flag)
    count = max([len(dataset_names)] + [len(values) for values in per_flag.values()])
    if count == 0:
        raise ValueError(f"give at least one of {flags}")
    if not dataset_names and count > 1:
        raise ValueError(f"{count} datasets: name each with dataset_name, in the order of their files")
    names = tuple(dataset_names) or (DEFAULT_DATASET_NAME,)
    for flag, values in (("dataset_name", names), *per_flag.items()):
        if values and len(values) != count:
            raise ValueError(f"{count} datasets but {len(values)} {flag} values: with several datasets give "
                             f"dataset_name and each of {flags} once per dataset, in the same order ('' for a "
                             f"missing file)")
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(f"dataset names must be non-empty and distinct, got {list(names)}")
    entries = []
    for i, name in enumerate(names):
        files = {flag: values[i] for flag, values in per_flag.items() if values and values[i]}
        if not files:
            raise ValueError(f"dataset {name!r} has no evaluation file (none of {flags})")
        entries += [SuiteEntry(name, task, path) for flag, path in files.items() for task in LEGACY_FILE_FLAGS[flag]]
    return entries


@dataclasses.dataclass
class EvaluationDataset:
    """One column group of a results table: a name and its tasks' evaluators."""

    name: str
    evaluators: list

    def record(self) -> dict:
        record = {"name": self.name}
        for evaluator in self.evaluators:
            record.update(evaluator.record())
        return record

    @property
    def input_kinds(self) -> set:
        return {evaluator.input_kind for evaluator in self.evaluators}

    def __call__(self, encode, encode_dialogues=None, make_encoder=None) -> dict:
        """`encode` embeds sentences, `encode_dialogues` dialogues (needed by dialogue tasks);
        `make_encoder` makes fresh trainable copies of the encoder for the fine-tuned tasks, which
        are left out without it (a row with no encoder of its own to fine-tune: `fine_tuned`)."""
        metrics = {}
        for evaluator in self.evaluators:
            if evaluator.input_kind == "dialogues":
                if encode_dialogues is None:
                    raise ValueError(f"dataset {self.name!r}: {evaluator.label} needs a dialogue encoder")
                metrics.update(evaluator(encode_dialogues))
            elif evaluator.input_kind == "finetune":
                if make_encoder is not None:
                    metrics.update(evaluator(make_encoder))
            else:
                metrics.update(evaluator(encode))
        return metrics


class EvaluationSuite:
    """Datasets in order; `suite(encode) -> {dataset: {metric: value}}`."""

    def __init__(self, datasets: list[EvaluationDataset]):
        names = [dataset.name for dataset in datasets]
        if len(set(names)) != len(names):
            raise ValueError(f"dataset names must be distinct, got {names}")
        self.datasets = list(datasets)

    @classmethod
    def from_entries(cls, entries, options: dict | None = None) -> "EvaluationSuite":
        """The evaluators of `entries`, every file read and checked now. Datasets come in order of
        first appearance and each dataset's tasks in table-column order, whatever the entries'
        order; `options` holds the values of the tasks' `option_names`. A dataset's tasks that
        read one file the same way (dial2vec's three, intent and oos) share one reading of it."""
        check_entries(entries)
        options = options or {}
        order = {name: position for position, name in enumerate(task_names())}
        by_dataset: dict[str, list] = {}
        for entry in entries:
            by_dataset.setdefault(entry.dataset, []).append(entry)
        datasets = []
        for name, dataset_entries in by_dataset.items():
            read: dict = {}
            evaluators = []
            for entry in sorted(dataset_entries, key=lambda entry: order[entry.task]):
                task = get_task(entry.task)
                task_options = {key: options[key] for key in task.option_names if key in options}
                key = (entry.file, task.read, tuple(sorted(task_options.items())))
                if key not in read:
                    read[key] = task.read(entry.file, **task_options)
                evaluators.append(task(entry.file, read[key], **task_options))
            datasets.append(EvaluationDataset(name, evaluators))
        return cls(datasets)

    @property
    def input_kinds(self) -> set:
        return set().union(*(dataset.input_kinds for dataset in self.datasets))

    def __call__(self, encode, encode_dialogues=None, make_encoder=None) -> dict:
        return {dataset.name: dataset(encode, encode_dialogues, make_encoder) for dataset in self.datasets}

    def fine_tuned(self) -> dict:
        """{dataset: [label of each fine-tuned task]}, the datasets that have one."""
        tasks = {dataset.name: [evaluator.label for evaluator in dataset.evaluators
                                if evaluator.input_kind == "finetune"] for dataset in self.datasets}
        return {name: labels for name, labels in tasks.items() if labels}

    def primary(self) -> tuple[str, str, bool]:
        """(dataset, metric, higher is better) selecting the best checkpoint: the first
        dataset's first task's primary metric."""
        evaluator: Evaluator = self.datasets[0].evaluators[0]
        return self.datasets[0].name, evaluator.primary_metric, evaluator.higher_is_better

    def flat(self, results: dict) -> dict:
        """{"dataset/metric": value}, as training logs and TensorBoard tags."""
        return {f"{name}/{key}": float(value) for name, values in results.items() for key, value in values.items()}
