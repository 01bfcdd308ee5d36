"""Few-shot intent classification by nearest class prototype (DSE, section 4.2.2 and Table 2):
accuracy at 1 and 5 shots, mean and standard deviation over 10 sampled support sets."""

import numpy as np

from dialoguecse_tf.data.intent import read_intent_dataset
from dialoguecse_tf.evaluation.prototypes import NUM_RUNS, SHOTS, run_scores
from dialoguecse_tf.evaluation.tasks.base import Evaluator, register_task


def few_shot_accuracies(dataset, encode, shots: int, num_runs: int = NUM_RUNS) -> list:
    """Accuracy (percent) of each run's `shots`-shot prototypes on the test items."""
    gold, runs = run_scores(dataset.train, dataset.test, dataset.labels, encode, shots, dataset.path, num_runs)
    return [100.0 * float(np.mean(scores.argmax(axis=1) == gold)) for scores in runs]


@register_task
class IntentEvaluator(Evaluator):
    task = "intent"
    label = "Intent"
    count_key = "intent_test_items"
    description = ("few-shot intent classification: nearest prototype of k sampled utterances per intent, "
                   "k = 1 and 5, 10 runs")
    file_flag = "intent_file"
    metrics = tuple(column for k in SHOTS for column in ((f"acc_{k}shot", f"{k}-shot acc."),
                                                          (f"acc_{k}shot_std", f"{k}-shot std")))
    primary_metric = f"acc_{SHOTS[0]}shot"
    option_names = ("intent_split",)

    def __init__(self, path: str, intent_split: str = "first"):
        super().__init__(path)
        self.dataset = read_intent_dataset(path, intent_split)

    @property
    def size(self) -> int:
        return len(self.dataset.test)

    def record(self) -> dict:
        return {**super().record(), f"{self.task}_split": self.dataset.split,
                f"{self.task}_blank_texts": self.dataset.blank_texts}

    def __call__(self, encode) -> dict:
        metrics = {}
        for shots in SHOTS:
            accuracies = few_shot_accuracies(self.dataset, encode, shots)
            metrics[f"acc_{shots}shot"] = float(np.mean(accuracies))
            metrics[f"acc_{shots}shot_std"] = float(np.std(accuracies, ddof=1))
        return metrics
