import numpy as np
import pytest
import scipy.stats
from sklearn.metrics import average_precision_score

from dialoguecse_tf.evaluation.metrics import (
    average_precision,
    rank_candidates,
    reciprocal_rank,
    spearman,
    sr_metrics,
)


@pytest.mark.parametrize(
    "labels, ap, rr",
    [
        ([1, 0, 1, 0, 0], (1 / 1 + 2 / 3) / 2, 1.0),
        ([0, 0, 1], 1 / 3, 1 / 3),
        ([1, 1, 0], 1.0, 1.0),
        ([0, 1, 0, 1], (1 / 2 + 2 / 4) / 2, 1 / 2),
        ([False, True, True], (1 / 2 + 2 / 3) / 2, 1 / 2),
    ],
)
def test_hand_computed_ap_and_rr(labels, ap, rr):
    assert average_precision(labels) == pytest.approx(ap)
    assert reciprocal_rank(labels) == pytest.approx(rr)


def test_no_positive_or_bad_labels_raise():
    for function in (average_precision, reciprocal_rank):
        with pytest.raises(ValueError, match="at least one positive"):
            function([0, 0, 0])
        with pytest.raises(ValueError, match="0/1"):
            function([0, 2])


def test_average_precision_agrees_with_sklearn_without_ties():
    rng = np.random.default_rng(0)
    for _ in range(50):
        size = int(rng.integers(2, 80))
        labels = rng.integers(0, 2, size)
        labels[rng.integers(size)] = 1
        scores = rng.permutation(size).astype(float)  # distinct: no ties
        ranked = labels[np.argsort(-scores)]
        assert average_precision(ranked) == pytest.approx(average_precision_score(labels, scores))


def test_rank_candidates_by_cosine_with_stable_ties():
    query = np.array([1.0, 0.0])
    candidates = np.array([[0.0, 1.0], [10.0, 1.0], [1.0, 1.0], [0.0, 0.0], [2.0, 2.0], [-1.0, 0.0]])
    # Scale does not matter; equal cosines (rows 2 and 4) keep their input order; the zero
    # vector has similarity 0 and ties with the orthogonal row 0, which comes first.
    assert rank_candidates(query, candidates).tolist() == [1, 2, 4, 0, 3, 5]
    with pytest.raises(ValueError, match=r"\[D\] query"):
        rank_candidates(np.ones(3), candidates)


def test_sr_metrics_in_percent():
    result = sr_metrics([[1, 0], [0, 1], [0, 0, 1, 1]])
    assert result["map"] == pytest.approx(100 * (1 + 0.5 + (1 / 3 + 2 / 4) / 2) / 3)
    assert result["mrr"] == pytest.approx(100 * (1 + 0.5 + 1 / 3) / 3)
    with pytest.raises(ValueError, match="at least one query"):
        sr_metrics([])


def test_spearman_matches_scipy_in_percent():
    rng = np.random.default_rng(1)
    gold = rng.integers(1, 6, 40)  # ties in the gold scores, as in sts.txt
    predicted = gold + rng.normal(scale=2.0, size=40)
    assert spearman(gold, predicted) == pytest.approx(100 * scipy.stats.spearmanr(gold, predicted).statistic)
    assert spearman([1, 2, 3], [0.1, 0.5, 0.2]) == pytest.approx(50.0)


def test_spearman_rejects_undefined_cases():
    with pytest.raises(ValueError, match="predicted similarities are equal"):
        spearman([1, 2, 3], [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="at least 2"):
        spearman([1], [0.3])
    with pytest.raises(ValueError, match="one length"):
        spearman([1, 2], [0.3])
    with pytest.raises(ValueError, match="NaN"):
        spearman([1, 2], [0.3, np.nan])
