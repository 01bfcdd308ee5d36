"""Ranking and correlation metrics of Table 2, reported in percent.

Ties: `rank_candidates` sorts by cosine similarity, best first, and keeps candidates with
exactly equal similarity in their input order (a stable sort). The evaluator therefore feeds
candidates in ascending row id, an order that says nothing about their labels; feeding
positives first would let ties (e.g. identical sentences, or a collapsed model that maps
everything to one vector) count as perfect retrieval.
"""

from collections.abc import Sequence

import numpy as np
import scipy.stats


def _checked_labels(ranked_labels) -> np.ndarray:
    labels = np.asarray(ranked_labels)
    if labels.ndim != 1:
        raise ValueError(f"ranked labels must be one list, got shape {labels.shape}")
    if labels.size and not np.isin(labels, (0, 1)).all():
        raise ValueError("ranked labels must be 0/1 or booleans")
    labels = labels.astype(bool)
    if not labels.any():
        raise ValueError("average precision and reciprocal rank need at least one positive candidate")
    return labels


def average_precision(ranked_labels) -> float:
    """Mean of precision@k over the ranks k of the positives (labels best-ranked first); 0..1."""
    labels = _checked_labels(ranked_labels)
    ranks = np.flatnonzero(labels) + 1
    hits = np.arange(1, ranks.size + 1)
    return float(np.mean(hits / ranks))


def reciprocal_rank(ranked_labels) -> float:
    """1 / (1-based rank of the first positive); 0..1."""
    labels = _checked_labels(ranked_labels)
    return 1.0 / float(np.argmax(labels) + 1)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    # float64 so that equal vectors give bit-identical similarities and tie as they should;
    # a zero vector (e.g. a sentence with no word piece) gets similarity 0 with everything.
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def cosine_similarities(query_vec, candidate_vecs) -> np.ndarray:
    """Cosine similarity of one [D] vector with each row of a [N, D] matrix."""
    candidate_vecs = np.asarray(candidate_vecs)
    if candidate_vecs.ndim != 2 or np.shape(query_vec) != candidate_vecs.shape[1:]:
        raise ValueError(
            f"need a [D] query and [N, D] candidates, got {np.shape(query_vec)} and {candidate_vecs.shape}"
        )
    return unit_rows(candidate_vecs) @ unit_rows(query_vec)


def paired_cosine_similarities(vectors_a, vectors_b) -> np.ndarray:
    """Row-wise cosine similarity of two [N, D] matrices."""
    if np.shape(vectors_a) != np.shape(vectors_b) or np.ndim(vectors_a) != 2:
        raise ValueError(f"need two [N, D] matrices of one shape, got {np.shape(vectors_a)} and {np.shape(vectors_b)}")
    return np.sum(unit_rows(vectors_a) * unit_rows(vectors_b), axis=-1)


def rank_candidates(query_vec, candidate_vecs) -> np.ndarray:
    """Candidate indices by descending cosine similarity to the query; ties keep input order."""
    return np.argsort(-cosine_similarities(query_vec, candidate_vecs), kind="stable")


def sr_metrics(ranked_labels_per_query: Sequence) -> dict:
    """{"map", "mrr"} in percent over queries, each a 0/1 label list in ranked order."""
    if not ranked_labels_per_query:
        raise ValueError("SR metrics need at least one query")
    return {
        "map": 100.0 * float(np.mean([average_precision(labels) for labels in ranked_labels_per_query])),
        "mrr": 100.0 * float(np.mean([reciprocal_rank(labels) for labels in ranked_labels_per_query])),
    }


def spearman(gold, predicted) -> float:
    """Spearman's rank correlation in percent (scipy; tied values get their average rank)."""
    gold = np.asarray(gold, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64)
    if gold.shape != predicted.shape or gold.ndim != 1:
        raise ValueError(f"need two 1-D sequences of one length, got shapes {gold.shape} and {predicted.shape}")
    if gold.size < 2:
        raise ValueError(f"Spearman correlation needs at least 2 pairs, got {gold.size}")
    # A constant side has no ranking; scipy would return NaN with only a warning.
    for name, values in (("gold scores", gold), ("predicted similarities", predicted)):
        if not np.isfinite(values).all():
            raise ValueError(f"{name} contain NaN or infinity")
        if np.all(values == values[0]):
            raise ValueError(f"Spearman correlation is undefined: all {name} are equal")
    return 100.0 * float(scipy.stats.spearmanr(gold, predicted).statistic)
