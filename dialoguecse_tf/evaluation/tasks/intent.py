"""Few-shot intent classification by nearest class prototype (DSE, section 4.2.2 and Table 2):
accuracy at 1 and 5 shots, mean and standard deviation over 10 sampled support sets."""

import numpy as np
from absl import logging

from dialoguecse_tf.data.intent import read_intent_dataset
from dialoguecse_tf.evaluation.prototypes import NUM_RUNS, SHOTS, labels_with_shots, run_scores
from dialoguecse_tf.evaluation.tasks.base import Evaluator, register_task


def scored_labels(train, labels, test, shots: int) -> tuple[list, list]:
    """(labels scored at `shots` shots, test items of the others removed); see `labels_with_shots`."""
    kept, skipped = labels_with_shots(train, labels, shots)
    return kept, [item for item in test if item[1] not in skipped]


def few_shot_accuracies(dataset, encode, shots: int, num_runs: int = NUM_RUNS) -> list:
    """Accuracy (percent) of each run's `shots`-shot prototypes on the test items of the labels
    with at least `shots` training items."""
    labels, test = scored_labels(dataset.train, dataset.labels, dataset.test, shots)
    gold, runs = run_scores(dataset.train, test, labels, encode, shots, dataset.path, num_runs)
    return [100.0 * float(np.mean(scores.argmax(axis=1) == gold)) for scores in runs]


def shot_columns(key: str, header: str, shots=SHOTS) -> tuple:
    """(metric key, table header) of each k's accuracy and its std over runs, in table order:
    `{key}_{k}shot` headed "{header}{k}-shot acc.", then its `_std`."""
    return tuple(column for k in shots for column in ((f"{key}_{k}shot", f"{header}{k}-shot acc."),
                                                       (f"{key}_{k}shot_std", f"{header}{k}-shot std")))


@register_task
class IntentEvaluator(Evaluator):
    name = "intent"
    task = "intent"
    label = "Intent"
    count_key = "intent_test_items"
    description = ("few-shot intent classification: nearest prototype of k sampled utterances per intent, "
                   "k = 1 and 5, 10 runs")
    metrics = shot_columns("acc", "")
    primary_metric = f"acc_{SHOTS[0]}shot"
    accepts_folder = True  # train.json and test.json
    option_names = ("intent_split",)

    @staticmethod
    def read(path: str, intent_split: str = "first"):
        return read_intent_dataset(path, intent_split)

    def __init__(self, path: str, data=None, **options):
        super().__init__(path, data, **options)
        train, labels = self.support_pool()
        self.skipped_labels = {}
        for shots in SHOTS:
            kept, self.skipped_labels[shots] = labels_with_shots(train, labels, shots)
            if len(kept) < 2:
                raise ValueError(f"{path}: fewer than 2 intents have at least {shots} training items, so "
                                 f"{shots}-shot classification has nothing to tell apart (labels: {kept})")
            if self.skipped_labels[shots]:
                logging.warning("%s: %d intents have fewer than %d training items and are not scored at %d shots: "
                                "%s", path, len(self.skipped_labels[shots]), shots, shots,
                                self.skipped_labels[shots][:10])

    def support_pool(self) -> tuple[tuple, list]:
        """(training items, labels) the support sets are drawn from."""
        return self.data.train, self.data.labels

    @property
    def size(self) -> int:
        return len(self.data.test)

    def record(self) -> dict:
        return {**super().record(), f"{self.task}_split": self.data.split,
                f"{self.task}_blank_texts": self.data.blank_texts,
                f"{self.task}_labels_skipped": {f"{shots}shot": labels for shots, labels in self.skipped_labels.items()}}

    def __call__(self, encode) -> dict:
        metrics = {}
        for shots in SHOTS:
            accuracies = few_shot_accuracies(self.data, encode, shots)
            metrics[f"acc_{shots}shot"] = float(np.mean(accuracies))
            metrics[f"acc_{shots}shot_std"] = float(np.std(accuracies, ddof=1))
        return metrics
