"""Dialogue STS (paper, section 5.1.2): Spearman correlation of gold scores and pair cosines."""

from dialoguecse_tf.evaluation.evaluate import evaluate_sts
from dialoguecse_tf.evaluation.sts import read_sts_file
from dialoguecse_tf.evaluation.tasks.base import Evaluator, register_task


@register_task
class DStsEvaluator(Evaluator):
    name = "dsts"
    task = "sts"
    label = "D-STS"
    count_key = "sts_pairs"
    description = "Spearman correlation between the gold 1..5 scores of sentence pairs and their cosine similarities"
    metrics = (("corr", "Corr."),)
    primary_metric = "corr"

    read = staticmethod(read_sts_file)

    @property
    def size(self) -> int:
        return len(self.data)

    def __call__(self, encode) -> dict:
        return {"corr": evaluate_sts(encode, self.data)["corr"]}
