"""Out-of-scope detection on CLINC150 (DSE, section 4.2.2, Tables 3 and 8): prototypes of the
150 intents and of the oos class, the mean - std threshold on the best normalised score;
accuracy, in-scope accuracy, oos-vs-rest accuracy and oos recall, at 1 and 5 shots, each the
mean over 10 sampled support sets (`prototypes` says what the release does)."""

import numpy as np

from dialoguecse_tf.data.intent import OOS_LABEL, read_intent_dataset
from dialoguecse_tf.evaluation.evaluate import embed_unique
from dialoguecse_tf.evaluation.prototypes import (
    NUM_RUNS,
    SHOTS,
    class_scores,
    oos_metrics,
    oos_predictions,
    prototypes,
    sample_support,
)
from dialoguecse_tf.evaluation.tasks.base import Evaluator, register_task

OOS_METRICS = (("acc", "acc."), ("in_acc", "in-scope acc."), ("oos_acc", "OOS acc."), ("oos_recall", "OOS recall"))


def oos_runs(dataset, encode, shots: int, num_runs: int = NUM_RUNS) -> list:
    """Each run's `oos_metrics` at `shots` shots."""
    train = dataset.train + dataset.oos_train
    test = dataset.test + dataset.oos_test
    labels = [label for label in dataset.labels if label != OOS_LABEL] + [OOS_LABEL]
    label_index = {label: i for i, label in enumerate(labels)}
    unseen = sorted({label for _, label in test} - set(labels))
    if unseen:
        raise ValueError(f"{dataset.path}: test labels never seen in training: {unseen[:5]}")
    supports = [sample_support(train, labels, shots, run, dataset.path) for run in range(num_runs)]
    texts = [text for text, _ in test] + [train[i][0] for support in supports for i in support]
    vectors, row = embed_unique(encode, texts)
    query_vectors = vectors[[row[text] for text, _ in test]]
    gold = np.array([label_index[label] for _, label in test])
    runs = []
    for support in supports:
        support_vectors = vectors[[row[train[i][0]] for i in support]]
        support_labels = np.array([label_index[train[i][1]] for i in support])
        scores = class_scores(query_vectors, prototypes(support_vectors, support_labels, len(labels)))
        predicted, _ = oos_predictions(scores, label_index[OOS_LABEL])
        runs.append(oos_metrics(predicted, gold, label_index[OOS_LABEL]))
    return runs


@register_task
class OosEvaluator(Evaluator):
    task = "oos"
    label = "OOS"
    count_key = "oos_test_items"
    description = "out-of-scope detection: prototypes with an oos class, mean - std threshold, k = 1 and 5, 10 runs"
    file_flag = "oos_file"
    metrics = tuple((f"oos_{k}shot_{key}", f"OOS {k}-shot {header}") for k in SHOTS for key, header in OOS_METRICS)
    primary_metric = f"oos_{SHOTS[0]}shot_acc"

    def __init__(self, path: str):
        super().__init__(path)
        self.dataset = read_intent_dataset(path)
        if not self.dataset.oos_train or not self.dataset.oos_test:
            raise ValueError(f"{path}: out-of-scope detection needs 'oos_train' and 'oos_test' items (CLINC150's "
                             "data_full.json)")

    @property
    def size(self) -> int:
        return len(self.dataset.test) + len(self.dataset.oos_test)

    def record(self) -> dict:
        return {**super().record(), f"{self.task}_split": self.dataset.split,
                f"{self.task}_skipped_blank": self.dataset.skipped_blank}

    def __call__(self, encode) -> dict:
        metrics = {}
        for shots in SHOTS:
            runs = oos_runs(self.dataset, encode, shots)
            for key, _ in OOS_METRICS:
                metrics[f"oos_{shots}shot_{key}"] = float(np.mean([run[key] for run in runs]))
        return metrics
