"""Dialogue retrieval (dial2vec, section 4.2; its `metrics.py` l.190-216): every dialogue
queries all others by cosine similarity, relevant = same label; MAP (and MRR). Every query
has a relevant dialogue: labels held by one dialogue are dropped when the set is read."""

import numpy as np

from dialoguecse_tf.evaluation.dialogue_sets import off_diagonal, similarity_and_relevance
from dialoguecse_tf.evaluation.metrics import sr_metrics
from dialoguecse_tf.evaluation.tasks.base import register_task
from dialoguecse_tf.evaluation.tasks.dialogue_base import DialogueEvaluator


def retrieval_scores(vectors, labels) -> dict:
    similarity, relevant = similarity_and_relevance(vectors, labels)
    rows_similarity, rows_relevant = off_diagonal(similarity), off_diagonal(relevant)
    ranked = [same[np.argsort(-sims, kind="stable")] for sims, same in zip(rows_similarity, rows_relevant)]
    metrics = sr_metrics(ranked)
    return {"dialogue_map": metrics["map"], "dialogue_mrr": metrics["mrr"]}


@register_task
class DialogueRetrievalEvaluator(DialogueEvaluator):
    name = "dialogue_retrieval"
    task = "dialogue_retrieval"
    label = "Retrieval"
    description = "each dialogue ranks all others by cosine similarity, relevant = same label"
    metrics = (("dialogue_map", "dialogue MAP"), ("dialogue_mrr", "dialogue MRR"))
    primary_metric = "dialogue_map"

    def __call__(self, encode_dialogues) -> dict:
        return retrieval_scores(self.vectors(encode_dialogues), self.data.labels)
