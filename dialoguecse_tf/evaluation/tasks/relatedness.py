"""Semantic relatedness (dial2vec, section 4.2): Spearman correlation between dialogue cosine
similarity and the same-label 0/1 indicator. `spearman`: as the released code computes it
(`semantic_relatedness_precise`, metrics.py:145-173): per dialogue against all N - 1 others,
NaN (a constant side) counted as 0, averaged over the dialogues. The paper (L138) describes
pairs of dialogues instead; `spearman_pairs` is that reading over every pair (the limit of
sampling pairs at random)."""

import numpy as np
import scipy.stats

from dialoguecse_tf.evaluation.dialogue_sets import off_diagonal, similarity_and_relevance
from dialoguecse_tf.evaluation.tasks.base import register_task
from dialoguecse_tf.evaluation.tasks.dialogue_base import DialogueEvaluator


def relatedness_scores(vectors, labels) -> dict:
    similarity, relevant = similarity_and_relevance(vectors, labels)
    rows_similarity, rows_relevant = off_diagonal(similarity), off_diagonal(relevant).astype(np.float64)
    per_dialogue = []
    for sims, same in zip(rows_similarity, rows_relevant):
        if np.all(same == same[0]) or np.all(sims == sims[0]):
            per_dialogue.append(0.0)
        else:
            per_dialogue.append(float(scipy.stats.spearmanr(same, sims).statistic))
    upper = np.triu_indices(len(labels), k=1)
    pairs = float(scipy.stats.spearmanr(relevant[upper].astype(np.float64), similarity[upper]).statistic)
    return {"spearman": 100.0 * float(np.mean(per_dialogue)), "spearman_pairs": 100.0 * pairs}


@register_task
class RelatednessEvaluator(DialogueEvaluator):
    name = "relatedness"
    task = "relatedness"
    label = "Relatedness"
    description = ("Spearman correlation of dialogue cosine similarity with the same-label indicator, per dialogue "
                   "against all others and averaged (the release), and over all pairs (the paper's description)")
    metrics = (("spearman", "Spearman"), ("spearman_pairs", "Spearman (pairs)"))
    primary_metric = "spearman"

    def __call__(self, encode_dialogues) -> dict:
        return relatedness_scores(self.vectors(encode_dialogues), self.data.labels)
