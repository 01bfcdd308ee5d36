"""Dialogue STS (paper, section 5.1.2): Spearman correlation of gold scores and pair cosines."""

from dialoguecse_tf.evaluation.evaluate import evaluate_sts
from dialoguecse_tf.evaluation.sts import read_sts_file
from dialoguecse_tf.evaluation.tasks.base import Evaluator, register_task


@register_task
class DStsEvaluator(Evaluator):
    task = "sts"
    label = "D-STS"
    count_key = "sts_pairs"
    description = "Spearman correlation between the gold 1..5 scores of sentence pairs and their cosine similarities"
    file_flag = "sts_file"
    metrics = (("corr", "Corr."),)
    primary_metric = "corr"

    def __init__(self, path: str):
        super().__init__(path)
        self.pairs = read_sts_file(path)

    @property
    def size(self) -> int:
        return len(self.pairs)

    def __call__(self, encode) -> dict:
        return {"corr": evaluate_sts(encode, self.pairs)["corr"]}
