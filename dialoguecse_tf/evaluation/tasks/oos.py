"""Out-of-scope detection on CLINC150 (DSE, section 4.2.2, Tables 3 and 8): prototypes of the
150 intents and of the oos class, the mean - std threshold on the best normalised score;
accuracy, in-scope accuracy, oos-vs-rest accuracy and oos recall, at 1 and 5 shots, each the
mean over 10 sampled support sets (`prototypes` says what the release does).

The release's CLINC150 training file is HuggingFace's `clinc_oos` "plus" train split, which
lists the in-scope `train` items and then `oos_train` (the dataset script's
`_generate_examples` yields `j[split] + j["oos_" + split]`): its items come in the order of
`train + oos_train` here, and its labels, taken in order of first appearance, end with oos.
So on the same file the support sets drawn here are the release's.
"""

import numpy as np

from dialoguecse_tf.data.intent import OOS_LABEL
from dialoguecse_tf.evaluation.prototypes import NUM_RUNS, SHOTS, oos_metrics, oos_predictions, run_scores
from dialoguecse_tf.evaluation.tasks.base import register_task
from dialoguecse_tf.evaluation.tasks.intent import IntentEvaluator, scored_labels

OOS_METRICS = (("acc", "acc."), ("in_acc", "in-scope acc."), ("oos_acc", "OOS acc."), ("oos_recall", "OOS recall"))


def support_pool(dataset) -> tuple[tuple, list]:
    """(training items, labels in order of first appearance) the support sets are drawn from:
    in-scope and out-of-scope items in the release's order (see the module docstring)."""
    train = dataset.train + dataset.oos_train
    return train, list(dict.fromkeys(label for _, label in train))


def oos_runs(dataset, encode, shots: int, num_runs: int = NUM_RUNS) -> list:
    """Each run's `oos_metrics` at `shots` shots."""
    train, labels = support_pool(dataset)
    labels, test = scored_labels(train, labels, dataset.test + dataset.oos_test, shots)
    gold, runs = run_scores(train, test, labels, encode, shots, dataset.path, num_runs)
    oos = labels.index(OOS_LABEL)
    return [oos_metrics(oos_predictions(scores, oos)[0], gold, oos) for scores in runs]


@register_task
class OosEvaluator(IntentEvaluator):
    """Reads its set as `IntentEvaluator` does, and needs its out-of-scope items."""

    name = "oos"
    task = "oos"
    label = "OOS"
    count_key = "oos_test_items"
    description = "out-of-scope detection: prototypes with an oos class, mean - std threshold, k = 1 and 5, 10 runs"
    accepts_folder = False  # a folder holds no out-of-scope items
    metrics = tuple((f"oos_{k}shot_{key}", f"OOS {k}-shot {header}") for k in SHOTS for key, header in OOS_METRICS)
    primary_metric = f"oos_{SHOTS[0]}shot_acc"

    def __init__(self, path: str, data=None, **options):
        super().__init__(path, data, **options)
        if not self.data.oos_train or not self.data.oos_test:
            raise ValueError(f"{path}: out-of-scope detection needs 'oos_train' and 'oos_test' items (CLINC150's "
                             "data_oos_plus.json)")
        if any(OOS_LABEL in labels for labels in self.skipped_labels.values()):
            raise ValueError(f"{path}: out-of-scope detection needs at least {max(SHOTS)} 'oos_train' items, got "
                             f"{len(self.data.oos_train)}")

    def support_pool(self) -> tuple[tuple, list]:
        return support_pool(self.data)

    @property
    def size(self) -> int:
        return len(self.data.test) + len(self.data.oos_test)

    def __call__(self, encode) -> dict:
        metrics = {}
        for shots in SHOTS:
            runs = oos_runs(self.data, encode, shots)
            for key, _ in OOS_METRICS:
                metrics[f"oos_{shots}shot_{key}"] = float(np.mean([run[key] for run in runs]))
        return metrics
