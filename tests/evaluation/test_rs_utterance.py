"""dialoguecse_tf/evaluation/tasks/rs_utterance.py: DSE's AmazonQA protocol through the task,
against a NumPy transcription of the release's run_similarity.py (rs_amazon)."""

import subprocess
import sys
import zlib

import numpy as np
import pytest
from sklearn.preprocessing import normalize

from conftest import REPO_ROOT
from dialoguecse_tf.data.response_sets import write_utterance_rs_file
from dialoguecse_tf.evaluation.suite import EvaluationSuite, SuiteEntry
from dialoguecse_tf.evaluation.tasks.rs_utterance import UtteranceRsEvaluator
from dialoguecse_tf.io_utils import DataFormatError


def _bag_of_words(texts):
    """A deterministic encoder: hashed word counts, so a query and its answer sharing words are close."""
    vectors = np.zeros((len(texts), 48), np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            vectors[row, zlib.crc32(word.encode()) % 48] += 1.0
    return vectors + 0.01


def _release_rs_amazon(queries, responses, encode):
    """run_similarity.py:115-143: every text embedded (float16 kept, as calculate_embedding
    keeps it), normalised, scored in blocks of 100 by argsort."""
    def embed(texts):
        vectors = encode(["." if not text.strip() else text for text in texts]).astype(np.float16).astype(np.float32)
        return normalize(vectors)
    q, r = embed(queries), embed(responses)
    num_batches = int(q.shape[0] / 100)
    recall = {1: 0, 3: 0, 5: 0, 10: 0}
    for i in range(num_batches):
        predictions = np.argsort(q[i * 100:(i + 1) * 100] @ r[i * 100:(i + 1) * 100].T, axis=1)
        for j, pred in enumerate(predictions):
            for k in recall:
                recall[k] += int(j in pred[-k:])
    return {f"urs_r{k}": count / num_batches for k, count in recall.items()}


@pytest.fixture
def rs_file(tmp_path):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(60)]
    rows = []
    for i in range(230):
        shared = list(rng.choice(words, 3))
        query = " ".join(shared + list(rng.choice(words, 4)))
        answer = " ".join(shared[:int(rng.integers(0, 4))] + list(rng.choice(words, 5)))
        rows.append((query, "   " if i == 5 else answer))
    path = tmp_path / "rs_utterance.txt"
    write_utterance_rs_file(rows, path)
    return path, rows


def test_recalls_equal_the_release_on_the_same_encoder(rs_file):
    path, rows = rs_file
    evaluator = UtteranceRsEvaluator(str(path))
    metrics = evaluator(_bag_of_words)
    assert metrics == _release_rs_amazon([q for q, _ in rows], [a for _, a in rows], _bag_of_words)
    assert list(metrics) == ["urs_r1", "urs_r3", "urs_r5", "urs_r10"]
    assert 1 < metrics["urs_r1"] < metrics["urs_r10"] < 100
    record = evaluator.record()
    assert (record["rs_utterance_queries"], record["rs_utterance_scored"], record["rs_utterance_unscored"],
            record["rs_utterance_blank_texts"]) == (230, 200, 30, 1)


def test_a_perfect_encoder_scores_100_and_a_constant_one_as_numpy_orders_ties(rs_file):
    path, rows = rs_file
    evaluator = UtteranceRsEvaluator(str(path))
    # Each row's query and answer share a vector of their own.
    row_of = {text: i for i, pair in enumerate(rows) for text in pair}
    row_of["."] = 5
    perfect = evaluator(lambda texts: np.eye(230, dtype=np.float32)[[row_of[t] for t in texts]])
    assert perfect == {"urs_r1": 100.0, "urs_r3": 100.0, "urs_r5": 100.0, "urs_r10": 100.0}
    # All scores tie: the hits are whatever np.argsort's order of equal values gives, as in the release.
    constant = evaluator(lambda texts: np.ones((len(texts), 4), np.float32))
    expected = _release_rs_amazon([q for q, _ in rows], [a for _, a in rows],
                                  lambda texts: np.ones((len(texts), 4), np.float32))
    assert constant == expected


def test_the_task_is_registered_read_in_suites_and_loads_without_tensorflow(rs_file):
    path, _ = rs_file
    suite = EvaluationSuite.from_entries([SuiteEntry("SGD-dev", "rs_utterance", str(path))])
    assert suite.primary() == ("SGD-dev", "urs_r1", True)
    done = subprocess.run([sys.executable, "-c", "import sys; import dialoguecse_tf.evaluation.tasks.rs_utterance; "
                           "assert 'tensorflow' not in sys.modules"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_malformed_line_fails_before_any_model_naming_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("".join(f"q{i}\ta{i}\n" for i in range(150)).replace("q42\ta42", "q42 a42"), encoding="utf-8")
    with pytest.raises(DataFormatError) as error:
        EvaluationSuite.from_entries([SuiteEntry("X", "rs_utterance", str(path))])
    assert str(error.value) == f"{path}:43: expected 2 tab-separated fields (query, response), found 1"
