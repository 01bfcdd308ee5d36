"""The interface every evaluation task implements, and the registry tables read their columns from.

An evaluator is built from one input file of its task (`file_flag` names the evaluation
config field and flag holding it; `option_names` further config fields it takes), reads and
checks it at once, and is then called with an encoder: `evaluator(encode) -> {metric: value}`.
For `input_kind` "sentences", `encode` is any `list[str] -> [N, D]` callable
(`SentenceEncoder.encode`, or a baseline's embed function); for "dialogues" a
`list[Dialogue] -> [N, D]` callable (`DialogueEncoder.encode_dialogues`). Metric keys are
distinct across tasks (a dataset's results are one dict). Metrics are percentages. Adding a
task is one module with a registered subclass, plus its file field in `EvaluationConfig`.
"""

from __future__ import annotations

from typing import ClassVar

from dialoguecse_tf.evaluation.provenance import dataset_file_record

_TASKS: dict[str, type] = {}


class Evaluator:
    task: ClassVar[str]  # short name, the prefix of its results.json keys, e.g. "select"
    label: ClassVar[str]  # how tables name the task, e.g. "SR"
    count_key: ClassVar[str]  # results.json key of the file's item count, e.g. "sr_queries"
    description: ClassVar[str]
    file_flag: ClassVar[str]  # the EvaluationConfig field / flag naming this task's file
    metrics: ClassVar[tuple]  # ((key, table header), ...) in table order
    primary_metric: ClassVar[str]
    higher_is_better: ClassVar[bool] = True
    input_kind: ClassVar[str] = "sentences"  # or "dialogues": called with a dialogue encoder
    option_names: ClassVar[tuple] = ()  # EvaluationConfig fields passed to the constructor

    def __init__(self, path: str):
        self.path = path

    @property
    def size(self) -> int:
        """How many items (queries, pairs, ...) the file holds, for the results' dataset record."""
        raise NotImplementedError

    def __call__(self, encode) -> dict:
        raise NotImplementedError

    def record(self) -> dict:
        """This task's part of a results.json dataset entry (file, checksum, size)."""
        return dataset_file_record(self.task, self.count_key, self.path, self.size)


def register_task(evaluator_class: type) -> type:
    if evaluator_class.task in _TASKS:
        raise ValueError(f"evaluation task {evaluator_class.task!r} is registered twice")
    _TASKS[evaluator_class.task] = evaluator_class
    return evaluator_class


def task_classes() -> tuple:
    """The registered evaluator classes, in table-column order."""
    from dialoguecse_tf.evaluation import tasks  # noqa: F401 (registers the built-in tasks)

    return tuple(_TASKS.values())


def metric_columns() -> tuple:
    """((metric key, header), ...) of every registered task, in table order."""
    return tuple(column for task in task_classes() for column in task.metrics)
