"""Several tasks on several named datasets, run on one encoder: what evaluation runs and the
training stage's evaluation hook share."""

from __future__ import annotations

import dataclasses

from dialoguecse_tf.evaluation.tasks.base import Evaluator, task_classes


@dataclasses.dataclass
class EvaluationDataset:
    """One column group of a results table: a name and its tasks' evaluators."""

    name: str
    evaluators: list

    @classmethod
    def from_files(cls, name: str, files: dict, options: dict | None = None) -> "EvaluationDataset":
        """`files` maps a task's `file_flag` to its path (None: the dataset lacks the task);
        `options` holds the values of the tasks' `option_names`.

        Evaluators come in table-column order, each file read and checked now.
        """
        options = options or {}
        evaluators = [task(files[task.file_flag], **{key: options[key] for key in task.option_names if key in options})
                      for task in task_classes() if files.get(task.file_flag)]
        if not evaluators:
            raise ValueError(f"dataset {name!r} has no evaluation file")
        return cls(name, evaluators)

    def record(self) -> dict:
        record = {"name": self.name}
        for evaluator in self.evaluators:
            record.update(evaluator.record())
        return record

    @property
    def input_kinds(self) -> set:
        return {evaluator.input_kind for evaluator in self.evaluators}

    def __call__(self, encode, encode_dialogues=None) -> dict:
        """`encode` embeds sentences, `encode_dialogues` dialogues (needed by dialogue tasks)."""
        metrics = {}
        for evaluator in self.evaluators:
            if evaluator.input_kind == "dialogues":
                if encode_dialogues is None:
                    raise ValueError(f"dataset {self.name!r}: {evaluator.label} needs a dialogue encoder")
                metrics.update(evaluator(encode_dialogues))
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

    @property
    def input_kinds(self) -> set:
        return set().union(*(dataset.input_kinds for dataset in self.datasets))

    def __call__(self, encode, encode_dialogues=None) -> dict:
        return {dataset.name: dataset(encode, encode_dialogues) for dataset in self.datasets}

    def primary(self) -> tuple[str, str, bool]:
        """(dataset, metric, higher is better) selecting the best checkpoint: the first
        dataset's first task's primary metric."""
        evaluator: Evaluator = self.datasets[0].evaluators[0]
        return self.datasets[0].name, evaluator.primary_metric, evaluator.higher_is_better

    def flat(self, results: dict) -> dict:
        """{"dataset/metric": value}, as training logs and TensorBoard tags."""
        return {f"{name}/{key}": float(value) for name, values in results.items() for key, value in values.items()}
