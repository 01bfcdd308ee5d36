"""dialoguecse_tf/evaluation/response_selection.py: recall@k against a NumPy transcription of
DSE's release (evaluate/run_similarity.py, utils/test_util.py) and hand-checked cases."""

import numpy as np
import pytest

from dialoguecse_tf.evaluation.response_selection import (dialogue_recalls, dialogue_scores, options_recalls,
                                                          release_unit_rows, utterance_recalls)


def _release_normalize(vectors):
    # get_embeddings.py keeps embeddings in float16; sklearn's normalize divides by the norm.
    vectors = np.asarray(vectors, np.float32).astype(np.float16).astype(np.float32)
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    norms[norms == 0] = 1.0
    return vectors / norms[:, None]


def _release_amazon(q, r):
    """run_similarity.py:131-143 with test_util.py:31-46, loop for loop."""
    num_batches = int(q.shape[0] / 100)
    totals = [0, 0, 0, 0]
    for i in range(num_batches):
        logits = q[i * 100:(i + 1) * 100] @ r[i * 100:(i + 1) * 100].T
        predictions = np.argsort(logits, axis=1)
        for j, pred in enumerate(predictions):
            for slot, k in enumerate((1, 3, 5, 10)):
                totals[slot] += int(j in pred[-k:])
    return dict(zip((1, 3, 5, 10), [total / num_batches for total in totals]))


def _release_ubuntu(q, options):
    """run_similarity.py:177-197: options [n, 101, D], the true response first."""
    n = len(q)
    similarity = (q.reshape([n, 1, -1]) * options).sum(axis=2)
    predictions = np.argsort(similarity, axis=1)
    totals = [0, 0, 0, 0]
    for pred in predictions:
        for slot, k in enumerate((1, 3, 5, 10)):
            totals[slot] += int(0 in pred[-k:])
    return dict(zip((1, 3, 5, 10), [total / (n / 100.) for total in totals]))


def test_unit_rows_are_float16_rounded_then_scaled_to_unit_length():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 16)).astype(np.float32)
    vectors[2] = 0.0
    # Two vectors that differ only below float16's precision become one.
    vectors[3] = vectors[3].astype(np.float16)
    vectors[4] = vectors[3] * np.float32(1 + 1e-5)
    assert not np.array_equal(vectors[3], vectors[4])
    unit = release_unit_rows(vectors)
    assert unit.dtype == np.float32
    np.testing.assert_allclose(unit, _release_normalize(vectors), rtol=0, atol=2e-7)
    assert np.all(unit[2] == 0) and np.array_equal(unit[3], unit[4])
    assert np.allclose(np.linalg.norm(unit[[0, 1, 3, 5]], axis=1), 1.0, atol=1e-6)


def test_utterance_recalls_equal_the_release_loop():
    rng = np.random.default_rng(1)
    # 2 whole blocks and 57 rows the release leaves unscored; responses near their queries.
    q = release_unit_rows(rng.normal(size=(257, 32)))
    r = release_unit_rows(q + rng.normal(scale=1.2, size=q.shape))
    expected = _release_amazon(q, r)
    assert utterance_recalls(q, r) == expected
    assert 0 < expected[1] < expected[3] < expected[5] < expected[10] < 100
    # The rows after the last whole block do not count.
    assert utterance_recalls(q[:200], r[:200]) == expected


def test_utterance_recalls_hand_checked():
    # One-hot responses: query i's score with response j is its weight on axis j. Queries 0-9
    # rank their own response 1st, 10-19 2nd, 20-29 4th, 30-39 7th and the others 50th.
    weights = np.tile(np.linspace(1.0, 0.01, 100), (100, 1))
    rank_of = np.repeat([1, 2, 4, 7] + [50] * 6, 10)
    for i, rank in enumerate(rank_of):
        others = [j for j in range(100) if j != i]
        order = others[:rank - 1] + [i] + others[rank - 1:]
        weights[i, order] = np.linspace(1.0, 0.01, 100)
    recalls = utterance_recalls(release_unit_rows(weights), np.eye(100, dtype=np.float32))
    assert recalls == {1: 10.0, 3: 20.0, 5: 30.0, 10: 40.0}


def test_utterance_recalls_refuse_less_than_a_block():
    with pytest.raises(ValueError, match="N >= 100"):
        utterance_recalls(np.ones((99, 4)), np.ones((99, 4)))


def test_dialogue_scores_and_recalls_equal_the_release():
    rng = np.random.default_rng(2)
    n, d = 300, 24  # more rows than one chunk
    vectors = release_unit_rows(rng.normal(size=(4000, d)))
    contexts = release_unit_rows(rng.normal(size=(n, d)))
    option_rows = rng.integers(0, len(vectors), size=(n, 101))
    # The true response (option 0) near its context.
    vectors[option_rows[:, 0]] = release_unit_rows(contexts + rng.normal(scale=1.5, size=contexts.shape))
    options = vectors[option_rows]
    scores = dialogue_scores(contexts, vectors, option_rows)
    assert np.array_equal(scores, (contexts.reshape([n, 1, -1]) * options).sum(axis=2))
    expected = _release_ubuntu(contexts, options)
    assert dialogue_recalls(scores) == expected and 0 < expected[1] < expected[10] < 100
    # Without a copy of the true response, the options reading is the release's.
    assert options_recalls(scores, np.full(n, -1)) == expected


def test_a_copy_of_the_true_response_is_a_tie_numpy_decides_and_the_options_reading_leaves_out():
    # Row 0: the true response scores best; its copy (column 7) ties with it exactly.
    # Row 1: two candidates score above the true response and its copy (column 50).
    # Row 2: no copy; the true response is 3rd.
    scores = np.tile(np.linspace(0.5, 0.0, 101, dtype=np.float32), (3, 1))
    scores[0, 0] = scores[0, 7] = 0.9
    scores[1, 3], scores[1, 4] = 0.95, 0.94
    scores[1, 0] = scores[1, 50] = 0.9
    scores[2, 1], scores[2, 2], scores[2, 0] = 0.99, 0.98, 0.97
    # Hand-checked, per 100 rows: row 0 is a hit at every k; rows 1 and 2 rank 3rd, hits from k = 3.
    assert options_recalls(scores, np.array([7, 50, -1])) == {1: 100 / 3, 3: 100.0, 5: 100.0, 10: 100.0}
    # The release counts the copy as a candidate: row 0 ranks 1st or 2nd, row 1 3rd or 4th, as
    # NumPy orders the tie.
    order = np.argsort(scores, axis=1)
    won = [list(row).index(0) > list(row).index(copy) for row, copy in zip(order[:2], (7, 50))]
    release = dialogue_recalls(scores)
    assert release[1] == pytest.approx(100 / 3 * won[0])
    assert release[3] == pytest.approx(100 / 3 * (2 + won[1]))
    assert release[5] == release[10] == pytest.approx(100.0)
