"""Semantic retrieval (paper, section 5.1.2): each query ranks its candidates; MAP and MRR."""

from dialoguecse_tf.data.sr_builder import read_select_file
from absl import logging

from dialoguecse_tf.evaluation.evaluate import evaluate_sr, sr_query_counts
from dialoguecse_tf.evaluation.tasks.base import Evaluator, register_task


@register_task
class SrEvaluator(Evaluator):
    name = "sr"
    task = "select"
    label = "SR"
    count_key = "sr_queries"
    description = "semantic retrieval, each query's candidates ranked by cosine similarity to it"
    metrics = (("map", "MAP"), ("mrr", "MRR"))
    primary_metric = "map"

    read = staticmethod(read_select_file)

    def __init__(self, path: str, data=None):
        super().__init__(path, data)
        self.query_counts = sr_query_counts(self.data)
        # Refused before any model loads: scoring rows without negatives would give MAP 100.
        if not self.query_counts["queries"]:
            raise ValueError(f"{path}: no row has both a positive and a negative candidate "
                             f"({self.query_counts['skipped_no_negative']} rows have no negative), so there is no "
                             f"SR query to score")
        if self.query_counts["skipped_no_negative"]:
            logging.warning("%s: %d rows have positives but no negative candidate; they are not scored as "
                            "queries (as the DialogueCSE release's eval_selection.py)", path,
                            self.query_counts["skipped_no_negative"])
        if self.query_counts["queries_with_repeated_ids"]:
            logging.warning("%s: %d queries list a candidate id more than once; each listing is ranked and "
                            "counted, as the DialogueCSE release's eval_selection.py does", path,
                            self.query_counts["queries_with_repeated_ids"])

    @property
    def size(self) -> int:
        return len(self.data)

    def record(self) -> dict:
        return {**super().record(), "sr_scored_queries": self.query_counts["queries"],
                "sr_skipped_no_negative": self.query_counts["skipped_no_negative"],
                "sr_queries_with_repeated_ids": self.query_counts["queries_with_repeated_ids"]}

    def __call__(self, encode) -> dict:
        results = evaluate_sr(encode, self.data)
        return {"map": results["map"], "mrr": results["mrr"]}
