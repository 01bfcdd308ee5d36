"""Recall@k of 0-shot response selection, computed as DSE's release computes it
(amazon-research/dse, `evaluate/run_similarity.py` and `evaluate/utils/test_util.py`).

The paper (section 4.2.2) ranks each query's ground-truth response among 99 randomly sampled
responses (AmazonQA) or among "one ground-truth response and 100 candidate responses"
(DSTC7-Ubuntu) and reports Top-1, 3 and 10 accuracy. The release computes, and this module
follows it:

* vectors: `calculate_embedding` collects every embedding in a float16 tensor and returns it as
  float32 (utils/get_embeddings.py:88, 112, 140), then sklearn's `normalize` scales each row to
  unit length (`release_unit_rows`);
* scores and order: a dot product of unit rows, sorted by `np.argsort` with NumPy's default
  (unstable) kind, the best last; recall@k counts a hit when the true response's index is in
  the last k places (test_util.py:31-46, run_similarity.py:179-192), for k = 1, 3, 5, 10;
* utterance level (`utterance_recalls`, run_similarity.py:112-148): rows in consecutive blocks
  of 100; in each block query i against the block's 100 responses, `q @ r.T`, true index i;
  rows after the last whole block are not scored; each block's hits (a count out of 100, so a
  percentage) are summed and divided by the number of blocks;
* dialogue level (`dialogue_recalls`, run_similarity.py:151-202): per row the true response
  (index 0) and the file's 100 candidates, 101 scores computed as `(q * options).sum(axis=2)`;
  hits divided by rows / 100.

**Ties.** Equal scores are left in whatever order NumPy's unstable sort gives them, which
depends on the NumPy build and the CPU, as in the release. On DSTC7 this decides many rows: its
candidates hold the true response once more (`data.response_sets`), whose copy scores exactly as
text 0 does, so the true response is counted within the top k only when it ranks k-th or better
among the other candidates and wins the tie with its copy, or ranks above k-th. Its recall@1 is
therefore at most the share of rows ranked first, and which of those count is NumPy's choice.
`options_recalls` gives the set's recall@k with the copy left out, the true response among its
100 options (DSTC7's own reading, the paper's ranking of a ground truth among the others).
"""

from __future__ import annotations

import numpy as np
from sklearn.preprocessing import normalize

from dialoguecse_tf.data.response_sets import BLOCK_SIZE

RECALL_AT = (1, 3, 5, 10)
# Rows of [rows, 101, D] products summed at once: each row's sum is the same whichever rows
# share its chunk, and 256 rows of 384-wide vectors keep it at about 40 MB.
_ROWS_PER_CHUNK = 256


def release_unit_rows(vectors) -> np.ndarray:
    """Embeddings as the release scores them: rounded to float16 and back, then sklearn's
    `normalize` (each row divided by its L2 norm; a zero row stays zero).

    Args:
      vectors: array-like [N, D].

    Returns:
      float32 [N, D].
    """
    return normalize(np.asarray(vectors, dtype=np.float32).astype(np.float16).astype(np.float32))


def _hits(order: np.ndarray, true_index) -> dict:
    """{k: how many rows have `true_index` (a scalar or one per row) among the last k entries
    of their row of `order` (an argsort, best last)}."""
    ranks_from_best = order.shape[1] - 1 - np.argmax(order == np.reshape(true_index, (-1, 1)), axis=1)
    return {k: int(np.sum(ranks_from_best < k)) for k in RECALL_AT}


def utterance_recalls(query_vectors, response_vectors) -> dict:
    """Recall@k (percent) of each query's true response among its block's responses.

    Args:
      query_vectors: [N, D] unit rows (`release_unit_rows`), row i's true response
        `response_vectors[i]`; N >= 100.
      response_vectors: [N, D] unit rows.

    Returns:
      {k: recall@k} for k in `RECALL_AT`, over the N // 100 whole blocks.

    Raises:
      ValueError: fewer than 100 rows, or the two arrays differ in shape.
    """
    if np.shape(query_vectors) != np.shape(response_vectors) or len(query_vectors) < BLOCK_SIZE:
        raise ValueError(f"need two [N, D] arrays of the same shape with N >= {BLOCK_SIZE}, got "
                         f"{np.shape(query_vectors)} and {np.shape(response_vectors)}")
    num_blocks = len(query_vectors) // BLOCK_SIZE
    hits = dict.fromkeys(RECALL_AT, 0)
    for block in range(num_blocks):
        rows = slice(block * BLOCK_SIZE, (block + 1) * BLOCK_SIZE)
        order = np.argsort(query_vectors[rows] @ response_vectors[rows].T, axis=1)
        for k, count in _hits(order, np.arange(BLOCK_SIZE)).items():
            hits[k] += count
    return {k: hits[k] / num_blocks for k in RECALL_AT}


def dialogue_scores(context_vectors, vectors, option_rows) -> np.ndarray:
    """Each context's dot product with its options, as the release sums it.

    Args:
      context_vectors: [N, D] unit rows.
      vectors: [U, D] unit rows, every option's vector.
      option_rows: [N, M] ints, row i's options as rows of `vectors` (the release: M = 101, the
        true response first).

    Returns:
      float32 [N, M], `(context[:, None, :] * options).sum(axis=2)` with options
      `vectors[option_rows]`, gathered a chunk of rows at a time.
    """
    context_vectors, option_rows = np.asarray(context_vectors), np.asarray(option_rows)
    if option_rows.ndim != 2 or context_vectors.ndim != 2 or len(context_vectors) != len(option_rows):
        raise ValueError(f"need [N, D] contexts and [N, M] option rows, got {context_vectors.shape} and "
                         f"{option_rows.shape}")
    return np.concatenate([
        (context_vectors[start:start + _ROWS_PER_CHUNK, np.newaxis, :]
         * vectors[option_rows[start:start + _ROWS_PER_CHUNK]]).sum(axis=2)
        for start in range(0, len(context_vectors), _ROWS_PER_CHUNK)])


def dialogue_recalls(scores) -> dict:
    """Recall@k (percent) of option 0, the true response, as the release counts it.

    Args:
      scores: [N, M] (`dialogue_scores`), option 0 the true response.

    Returns:
      {k: hits / (N / 100)} for k in `RECALL_AT`.
    """
    scores = np.asarray(scores)
    hits = _hits(np.argsort(scores, axis=1), 0)
    return {k: hits[k] / (len(scores) / 100.0) for k in RECALL_AT}


def options_recalls(scores, copy_columns) -> dict:
    """Recall@k (percent) of option 0 with one column of each row left out: its copy.

    Args:
      scores: [N, M] (`dialogue_scores`), option 0 the true response.
      copy_columns: N ints, the column of each row's copy of option 0 (>= 1), or -1 for a row
        without one (all its columns stay).

    Returns:
      {k: hits / (N / 100)} for k in `RECALL_AT`, each row sorted as the release sorts.
    """
    scores = np.asarray(scores)
    hits = dict.fromkeys(RECALL_AT, 0)
    for row, column in zip(scores, copy_columns):
        kept = np.delete(row, column) if column >= 1 else row
        for k, count in _hits(np.argsort(kept[np.newaxis, :], axis=1), 0).items():
            hits[k] += count
    return {k: hits[k] / (len(scores) / 100.0) for k in RECALL_AT}
