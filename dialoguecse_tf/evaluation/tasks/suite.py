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
    def from_files(cls, name: str, files: dict) -> "EvaluationDataset":
        """`files` maps a task's `file_flag` to its path (None: the dataset lacks the task).

        Evaluators come in table-column order, each file read and checked now.
        """
        evaluators = [task(files[task.file_flag]) for task in task_classes() if files.get(task.file_flag)]
        if not evaluators:
            raise ValueError(f"dataset {name!r} has no evaluation file")
        return cls(name, evaluators)

    def record(self) -> dict:
        record = {"name": self.name}
        for evaluator in self.evaluators:
            record.update(evaluator.record())
        return record

    def __call__(self, encode) -> dict:
        metrics = {}
        for evaluator in self.evaluators:
            metrics.update(evaluator(encode))
        return metrics


class EvaluationSuite:
    """Datasets in order; `suite(encode) -> {dataset: {metric: value}}`."""

    def __init__(self, datasets: list[EvaluationDataset]):
        names = [dataset.name for dataset in datasets]
        if len(set(names)) != len(names):
            raise ValueError(f"dataset names must be distinct, got {names}")
        self.datasets = list(datasets)

    def __call__(self, encode) -> dict:
        return {dataset.name: dataset(encode) for dataset in self.datasets}

    def primary(self) -> tuple[str, str, bool]:
        """(dataset, metric, higher is better) selecting the best checkpoint: the first
        dataset's first task's primary metric."""
        evaluator: Evaluator = self.datasets[0].evaluators[0]
        return self.datasets[0].name, evaluator.primary_metric, evaluator.higher_is_better

    def flat(self, results: dict) -> dict:
        """{"dataset/metric": value}, as training logs and TensorBoard tags."""
        return {f"{name}/{key}": float(value) for name, values in results.items() for key, value in values.items()}
