"""dialoguecse_tf/evaluation/tasks/rs_dialogue.py: DSE's DSTC7-Ubuntu protocol through the
task, against a NumPy transcription of the release's run_similarity.py (rs_ubuntu)."""

import subprocess
import sys
import zlib

import numpy as np
import pytest
from sklearn.preprocessing import normalize

from conftest import REPO_ROOT
from dialoguecse_tf.data.response_sets import write_dialogue_rs_file
from dialoguecse_tf.evaluation.suite import EvaluationSuite, SuiteEntry
from dialoguecse_tf.evaluation.tasks.rs_dialogue import DialogueRsEvaluator
from dialoguecse_tf.io_utils import DataFormatError


def _bag_of_words(texts):
    vectors = np.zeros((len(texts), 48), np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            vectors[row, zlib.crc32(word.encode()) % 48] += 1.0
    return vectors + 0.01


def _embed(texts, encode):
    vectors = encode(["." if not text.strip() else text for text in texts]).astype(np.float16).astype(np.float32)
    return normalize(vectors)


def _release_rs_ubuntu(rows, encode):
    """run_similarity.py:154-197: the response followed by the candidates, 101 texts a row."""
    query = [context for context, _, _ in rows]
    target_plus_candidate = []
    for _, target, candidates in rows:
        target_plus_candidate.append(target)
        target_plus_candidate.extend(candidates)
    n = len(rows)
    q = _embed(query, encode)
    all_embeddings = _embed(target_plus_candidate, encode).reshape([n, 101, -1])
    predictions = np.argsort((q.reshape([n, 1, -1]) * all_embeddings).sum(axis=2), axis=1)
    recall = {1: 0, 3: 0, 5: 0, 10: 0}
    for pred in predictions:
        for k in recall:
            recall[k] += int(0 in pred[-k:])
    return {f"drs_r{k}": count / (n / 100.) for k, count in recall.items()}


def _rows(with_copy: bool, num_rows: int = 60):
    """Contexts sharing words with their response; 100 candidates, the response among them or not."""
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(80)]
    rows = []
    for i in range(num_rows):
        shared = list(rng.choice(words, 3))
        context = "participant 1: " + " ".join(shared + list(rng.choice(words, 6))) + " "
        response = " ".join(shared[:int(rng.integers(0, 4))] + list(rng.choice(words, 4))) + f" r{i}"
        drawn = [" ".join(rng.choice(words, 5)) + f" c{i}.{j}" for j in range(100)]
        if with_copy:
            drawn[int(rng.integers(0, 100))] = response
        rows.append((context, response, tuple(drawn)))
    return rows


@pytest.mark.parametrize("with_copy", [True, False])
def test_recalls_equal_the_release_on_the_same_encoder(tmp_path, with_copy):
    rows = _rows(with_copy)
    write_dialogue_rs_file(rows, tmp_path / "d.txt")
    evaluator = DialogueRsEvaluator(str(tmp_path / "d.txt"))
    metrics = evaluator(_bag_of_words)
    release = _release_rs_ubuntu(rows, _bag_of_words)
    assert {key: metrics[key] for key in release} == release
    assert list(metrics) == [key for key, _ in DialogueRsEvaluator.metrics]
    assert 1 < metrics["drs_options_r1"] < metrics["drs_options_r10"] < 100
    if with_copy:
        # The copy only ever pushes the true response down: one place at most.
        assert release["drs_r1"] <= metrics["drs_options_r1"] and release["drs_r10"] >= metrics["drs_options_r5"]
    else:
        assert all(metrics[f"drs_options_r{k}"] == metrics[f"drs_r{k}"] for k in (1, 3, 5, 10))
    assert evaluator.record()["rs_dialogue_responses_among_candidates"] == (60 if with_copy else 0)
    assert evaluator.record()["rs_dialogue_contexts"] == 60


def test_a_perfect_encoder_hits_every_row_among_its_100_options(tmp_path):
    rows = _rows(with_copy=True, num_rows=20)
    write_dialogue_rs_file(rows, tmp_path / "d.txt")
    evaluator = DialogueRsEvaluator(str(tmp_path / "d.txt"))
    row_of = {}
    for i, (context, response, _) in enumerate(rows):
        row_of[context] = row_of[response] = i

    def perfect(texts):
        return np.stack([np.eye(21, dtype=np.float32)[row_of.get(text, 20)] for text in texts])

    metrics = evaluator(perfect)
    assert all(metrics[f"drs_options_r{k}"] == 100.0 for k in (1, 3, 5, 10))
    # The copy ties with the true response: 1st or 2nd, as NumPy orders them.
    assert all(metrics[f"drs_r{k}"] == 100.0 for k in (3, 5, 10)) and 0 <= metrics["drs_r1"] <= 100.0
    assert metrics["drs_r1"] == _release_rs_ubuntu(rows, perfect)["drs_r1"]


def test_the_task_is_registered_read_in_suites_and_loads_without_tensorflow(tmp_path):
    write_dialogue_rs_file(_rows(True, 3), tmp_path / "d.txt")
    suite = EvaluationSuite.from_entries([SuiteEntry("SGD-dev", "rs_dialogue", str(tmp_path / "d.txt"))])
    assert suite.primary() == ("SGD-dev", "drs_r1", True)
    done = subprocess.run([sys.executable, "-c", "import sys; import dialoguecse_tf.evaluation.tasks.rs_dialogue; "
                           "assert 'tensorflow' not in sys.modules"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_malformed_line_fails_before_any_model_naming_file_and_line(tmp_path):
    good = "|".join(f"c{j}" for j in range(100))
    path = tmp_path / "bad.txt"
    path.write_text(f"ctx\tr\t{good}\nctx\tr\t{good}|c100\n", encoding="utf-8")
    with pytest.raises(DataFormatError) as error:
        EvaluationSuite.from_entries([SuiteEntry("X", "rs_dialogue", str(path))])
    assert str(error.value) == f"{path}:2: expected 100 candidates separated by '|', found 101"
