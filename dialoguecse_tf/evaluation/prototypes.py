"""DSE's similarity-based few-shot protocol (Zhou et al., NAACL 2022, section 4.2), as the
authors' released `evaluate/run_similarity.py` and `evaluate/utils/data.py` compute it:

* support sets: run r (r = 0..9) seeds Python's `random` with r; for each label, in order of
  first appearance, it draws min(2k, n) of the label's n training items and keeps the first
  ceil(m / 2) of the m drawn as support (the rest were the unused validation half;
  data.py:396-437). With n >= 2k that is k items;
* prototypes: the mean of the L2-normalised support embeddings, NOT renormalised
  (run_similarity.py:49-56); a query is scored by its normalised embedding's dot product
  with each prototype (exactly the cosine at k = 1, cosine times the prototype's norm at
  k > 1) and takes the label of the best one;
* out-of-scope detection (l.249-319): the oos items form a 151st class with its own
  prototype; each query's class scores are L2-normalised across the classes; the threshold
  is mean - std (population std) of the queries' best scores, taken over all test queries
  (in-scope and out-of-scope alike, so it is set per run on the test set itself, as in the
  release); a query whose best score is not above it is predicted oos.
"""

from __future__ import annotations

import math
import random

import numpy as np

from dialoguecse_tf.evaluation.evaluate import embed_unique
from dialoguecse_tf.evaluation.metrics import unit_rows

SHOTS = (1, 5)
NUM_RUNS = 10


def labels_with_shots(train, labels, shots: int) -> tuple[list, list]:
    """(the `labels` with at least `shots` training items, the others), each in `labels` order.

    The evaluators score k shots on the first only: a label with fewer than k items has no
    k-shot support set, so at that k it gets no prototype and its test items are not scored;
    it is skipped and counted rather than stopping the whole evaluation.
    """
    counts: dict[str, int] = {}
    for _, label in train:
        counts[label] = counts.get(label, 0) + 1
    return ([label for label in labels if counts.get(label, 0) >= shots],
            [label for label in labels if counts.get(label, 0) < shots])


def sample_support(train, labels, shots: int, run: int, source: str) -> list:
    """Indices into `train` ((text, label) items) of run `run`'s `shots`-shot support set of
    `labels` (items of other labels are not sampled)."""
    by_label: dict[str, list] = {label: [] for label in labels}
    for index, (_, label) in enumerate(train):
        if label in by_label:
            by_label[label].append(index)
    rng = random.Random(run)
    support = []
    for label in labels:
        indices = by_label[label]
        if len(indices) < shots:
            raise ValueError(f"{source}: intent {label!r} has {len(indices)} training examples, fewer than "
                             f"k={shots}")
        drawn = rng.sample(indices, min(2 * shots, len(indices)))
        support.extend(drawn[:math.ceil(len(drawn) / 2)])
    return support


def prototypes(support_vectors: np.ndarray, support_labels: np.ndarray, num_labels: int) -> np.ndarray:
    """[num_labels, D]: the mean of each label's normalised support vectors (not renormalised)."""
    unit = unit_rows(support_vectors)
    sums = np.zeros((num_labels, unit.shape[1]), unit.dtype)
    np.add.at(sums, support_labels, unit)
    counts = np.bincount(support_labels, minlength=num_labels)[:, None]
    return sums / counts


def class_scores(query_vectors: np.ndarray, prototype_vectors: np.ndarray) -> np.ndarray:
    """[Q, C]: each normalised query's dot product with each prototype."""
    return unit_rows(query_vectors) @ prototype_vectors.T


def oos_predictions(scores: np.ndarray, oos_index: int) -> tuple[np.ndarray, float]:
    """(predicted class per query, threshold) of the release's out-of-scope rule on [Q, C] scores."""
    normalised = unit_rows(scores)
    best = normalised.max(axis=1)
    threshold = float(best.mean() - best.std())
    predicted = np.where(best > threshold, normalised.argmax(axis=1), oos_index)
    return predicted, threshold


def oos_metrics(predicted: np.ndarray, gold: np.ndarray, oos_index: int) -> dict:
    """Percentages: accuracy over all queries, in-scope accuracy, out-of-scope-vs-rest
    accuracy and out-of-scope recall (the release's `test_oos`, there as fractions)."""
    in_scope = gold != oos_index
    predicted_oos, gold_oos = predicted == oos_index, gold == oos_index
    return {
        "acc": 100.0 * float(np.mean(predicted == gold)),
        "in_acc": 100.0 * float(np.mean(predicted[in_scope] == gold[in_scope])),
        "oos_acc": 100.0 * float(np.mean(predicted_oos == gold_oos)),
        "oos_recall": 100.0 * float(np.sum(predicted_oos & gold_oos) / max(int(np.sum(gold_oos)), 1)),
    }


def run_scores(train, test, labels, encode, shots: int, source: str, num_runs: int = NUM_RUNS):
    """(gold label index per test item, [Q, C] `class_scores` of each run's `shots`-shot
    prototypes of `labels`); every distinct text is embedded once, in one `encode` call."""
    label_index = {label: i for i, label in enumerate(labels)}
    unseen = sorted({label for _, label in test} - set(labels))
    if unseen:
        raise ValueError(f"{source}: test labels never seen in training: {unseen[:5]}")
    supports = [sample_support(train, labels, shots, run, source) for run in range(num_runs)]
    texts = [text for text, _ in test] + [train[i][0] for support in supports for i in support]
    vectors, row = embed_unique(encode, texts)
    query_vectors = vectors[[row[text] for text, _ in test]]
    gold = np.array([label_index[label] for _, label in test])
    runs = []
    for support in supports:
        support_vectors = vectors[[row[train[i][0]] for i in support]]
        support_labels = np.array([label_index[train[i][1]] for i in support])
        runs.append(class_scores(query_vectors, prototypes(support_vectors, support_labels, len(labels))))
    return gold, runs
