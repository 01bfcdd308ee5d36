"""The interface every evaluation task implements, and the registry suites and tables read.

A task is named in evaluation suites by its `name` (`evaluation.suite`: entries of dataset,
task name and file). Its evaluator is built from one input file, which `read` parses and
checks at once (evaluators whose `read` is the same function share one reading of a dataset's
file), and is then called with an encoder: `evaluator(encode) -> {metric: value}`.
For `input_kind` "sentences", `encode` is any `list[str] -> [N, D]` callable
(`SentenceEncoder.encode`, or a baseline's embed function); for "dialogues" a
`list[Dialogue] -> [N, D]` callable (`DialogueEncoder.encode_dialogues`); for "finetune" (a task
that trains the encoder, `finetune_base`) a function of no argument returning a fresh trainable
copy of the row's encoder (`finetune.EncoderFactory`), which only checkpoint rows have: a
baseline row gets no number for such a task and says it does not apply. Metric keys are
distinct across tasks (a dataset's results are one dict). Metrics are percentages.

Adding a task is one module with a `register_task`-decorated subclass, plus its import in
`tasks/registry.py`, whose order is the tables' column order; suites, flags, tables and the
training stage's evaluation then take it from the registry.
"""

from __future__ import annotations

from typing import ClassVar

from dialoguecse_tf.evaluation.provenance import dataset_file_record

# Filled by `register_task` as the task modules load; `tasks.registry` reads it.
TASKS: dict[str, type] = {}


class Evaluator:
    name: ClassVar[str]  # how suites name the task, e.g. "sr"
    task: ClassVar[str]  # the prefix of its results.json keys, e.g. "select"
    label: ClassVar[str]  # how tables name the task, e.g. "SR"
    count_key: ClassVar[str]  # results.json key of the file's item count, e.g. "sr_queries"
    description: ClassVar[str]
    metrics: ClassVar[tuple]  # ((key, table header), ...) in table order
    primary_metric: ClassVar[str]
    higher_is_better: ClassVar[bool] = True
    input_kind: ClassVar[str] = "sentences"  # "dialogues": a dialogue encoder; "finetune": an encoder factory
    accepts_folder: ClassVar[bool] = False  # whether its input may be a folder (an intent set, SGD dialogues)
    option_names: ClassVar[tuple] = ()  # suite-wide options `read` takes (EvaluationConfig fields)

    @staticmethod
    def read(path: str, **options):
        """The task's input parsed and checked from `path` (raises on bad input)."""
        raise NotImplementedError

    def __init__(self, path: str, data=None, **options):
        """Built from `path`, or from `data`, what `read(path, **options)` returned."""
        self.path = path
        self.data = self.read(path, **options) if data is None else data

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
    for attribute in ("name", "task"):
        value = getattr(evaluator_class, attribute)
        if any(getattr(known, attribute) == value for known in TASKS.values()):
            raise ValueError(f"evaluation task {attribute} {value!r} is registered twice")
    TASKS[evaluator_class.name] = evaluator_class
    return evaluator_class
