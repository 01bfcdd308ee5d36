"""Utterance-level response selection (DSE, section 4.2.2 and Table 4: AmazonQA), as the
release's `run_similarity.py --TASK rs_amazon` computes it (l.112-148): each query against its
true response and the responses of the other 99 rows of its block of 100; recall@1, 3, 5, 10.

The paper draws 99 random responses per query; the release takes the block's other rows, so a
file's row order decides each query's competitors, and this task follows the release
(`evaluation.response_selection` gives the computation, `data.response_sets` the file and its
stand-in built from SGD dev). The paper reports Top-1, 3 and 10; the release adds 5.
"""

from dialoguecse_tf.data.response_sets import read_utterance_rs_file
from dialoguecse_tf.evaluation.evaluate import embed_unique
from dialoguecse_tf.evaluation.response_selection import RECALL_AT, release_unit_rows, utterance_recalls
from dialoguecse_tf.evaluation.tasks.base import Evaluator, register_task


@register_task
class UtteranceRsEvaluator(Evaluator):
    name = "rs_utterance"
    task = "rs_utterance"
    label = "u-RS"
    count_key = "rs_utterance_queries"
    description = ("utterance-level response selection (DSE's AmazonQA protocol): each query against its true "
                   "response and the other 99 responses of its block of 100 rows, recall@k")
    metrics = tuple((f"urs_r{k}", f"u-RS R@{k}") for k in RECALL_AT)
    primary_metric = "urs_r1"

    read = staticmethod(read_utterance_rs_file)

    @property
    def size(self) -> int:
        return len(self.data.queries)

    def record(self) -> dict:
        return {**super().record(), "rs_utterance_scored": self.data.scored_rows,
                "rs_utterance_unscored": self.size - self.data.scored_rows,
                "rs_utterance_blank_texts": self.data.blank_texts}

    def __call__(self, encode) -> dict:
        vectors, index = embed_unique(encode, self.data.queries + self.data.responses)
        vectors = release_unit_rows(vectors)
        queries = vectors[[index[text] for text in self.data.queries]]
        responses = vectors[[index[text] for text in self.data.responses]]
        return {f"urs_r{k}": value for k, value in utterance_recalls(queries, responses).items()}
