"""SR and D-STS evaluation of any `embed_fn(list[str]) -> np.ndarray [N, D]`.

Both evaluators embed each distinct sentence once, in one `embed_fn` call, however many
queries, candidate lists or pairs it appears in (the ECD SR file mentions each row in about
70 candidate lists), and look the vectors up from there. `CachedEmbedder` extends that to
several evaluations of the same model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from dialoguecse_tf.data.sr_builder import SrRow
from dialoguecse_tf.evaluation.metrics import paired_cosine_similarities, rank_candidates, spearman, sr_metrics
from dialoguecse_tf.evaluation.sts import StsPair

EmbedFn = Callable[[list], np.ndarray]


def _checked_vectors(vectors, num_texts: int) -> np.ndarray:
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or vectors.shape[0] != num_texts:
        raise ValueError(f"embed_fn returned shape {vectors.shape} for {num_texts} texts; expected [{num_texts}, D]")
    if not np.isfinite(vectors).all():
        raise ValueError("embed_fn returned NaN or infinite values")
    return vectors


def embed_unique(embed_fn: EmbedFn, texts: Iterable[str]) -> tuple[np.ndarray, dict[str, int]]:
    """Embeds the distinct `texts` in one call; returns (vectors, {text: row of vectors})."""
    unique = list(dict.fromkeys(texts))
    return _checked_vectors(embed_fn(unique), len(unique)), {text: row for row, text in enumerate(unique)}


class CachedEmbedder:
    """Wraps an `embed_fn` so each distinct text is embedded once over all calls.

    Valid because every model here is deterministic at inference: the same text always gets
    the same vector.
    """

    def __init__(self, embed_fn: EmbedFn):
        self._embed_fn = embed_fn
        self._vectors: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            raise ValueError("nothing to embed: the text list is empty")
        missing = [text for text in dict.fromkeys(texts) if text not in self._vectors]
        if missing:
            vectors = _checked_vectors(self._embed_fn(missing), len(missing))
            self._vectors.update(zip(missing, vectors))
        return np.stack([self._vectors[text] for text in texts])


def sr_query_counts(rows: Sequence[SrRow]) -> dict:
    """{"queries": rows scored, "skipped_no_negative": rows with positives but no negative,
    "queries_with_repeated_ids": scored rows that list a candidate id more than once}.

    As the DialogueCSE release's eval_selection.py:206, a row is a query only when it has at
    least one positive AND one negative: a row with positives only would score AP = RR = 1
    whatever the encoder, lifting every model alike and shrinking their differences. Rows
    with no positive are candidates only, in the release and here.
    """
    queries = [row for row in rows if row.positive_ids and row.negative_ids]
    return {"queries": len(queries),
            "skipped_no_negative": sum(1 for row in rows if row.positive_ids and not row.negative_ids),
            "queries_with_repeated_ids": sum(1 for row in queries if _repeats_an_id(row))}


def _repeats_an_id(row: SrRow) -> bool:
    return any(len(set(ids)) != len(ids) for ids in (row.positive_ids, row.negative_ids))


def evaluate_sr(embed_fn: EmbedFn, rows: Sequence[SrRow]) -> dict:
    """MAP and MRR (percent) of ranking each query's candidates by cosine similarity.

    Every row with at least one positive and one negative is a query (see `sr_query_counts`);
    its candidates are its positive and negative ids, ranked in ascending id order before
    sorting so that exact ties are broken by row id and not by label (see `metrics`). An id
    listed twice is two candidates, as in the release's eval_selection.py (its copies tie with
    each other and carry one label, so which comes first does not matter).
    Returns {"map", "mrr"} and `sr_query_counts`.
    """
    by_id = {row.id: row for row in rows}
    if len(by_id) != len(rows):
        raise ValueError("SR rows repeat an id")
    queries = [row for row in rows if row.positive_ids and row.negative_ids]
    if not queries:
        raise ValueError("no SR row has both a positive and a negative candidate, so there is no query to evaluate")
    candidate_lists = []
    for row in queries:
        candidates = sorted(row.positive_ids + row.negative_ids)
        unknown = [candidate for candidate in candidates if candidate not in by_id]
        if unknown:
            raise ValueError(f"SR query {row.id} refers to ids {unknown[:5]} that are not rows of the set")
        candidate_lists.append(candidates)
    texts = [row.sentence for row in queries] + [by_id[c].sentence for cands in candidate_lists for c in cands]
    vectors, index = embed_unique(embed_fn, texts)
    ranked_labels = []
    for row, candidates in zip(queries, candidate_lists):
        candidate_vectors = vectors[[index[by_id[candidate].sentence] for candidate in candidates]]
        order = rank_candidates(vectors[index[row.sentence]], candidate_vectors)
        positives = set(row.positive_ids)
        ranked_labels.append([candidates[position] in positives for position in order])
    return {**sr_metrics(ranked_labels), **sr_query_counts(rows)}


def evaluate_sts(embed_fn: EmbedFn, pairs: Sequence[StsPair]) -> dict:
    """Spearman correlation (percent) of gold scores with pair cosine similarities.

    Returns {"corr", "pairs"}.
    """
    if not pairs:
        raise ValueError("no D-STS pairs to evaluate")
    vectors, index = embed_unique(embed_fn, [text for _, a, b in pairs for text in (a, b)])
    similarities = paired_cosine_similarities(
        vectors[[index[a] for _, a, _ in pairs]], vectors[[index[b] for _, _, b in pairs]]
    )
    return {"corr": spearman([score for score, _, _ in pairs], similarities), "pairs": len(pairs)}
