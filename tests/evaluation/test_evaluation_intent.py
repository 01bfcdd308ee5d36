"""DSE's intent and out-of-scope evaluations: readers on the real intent sets, the release's
sampling and prototype arithmetic against hand computations, and bad input."""

import json
import math
import random
import zlib

import numpy as np
import pytest

from dialoguecse_tf.data.intent import OOS_LABEL, read_intent_dataset
from dialoguecse_tf.evaluation.prototypes import (
    class_scores,
    oos_metrics,
    oos_predictions,
    prototypes,
    sample_support,
)
from dialoguecse_tf.evaluation.tasks.intent import IntentEvaluator, few_shot_accuracies
from dialoguecse_tf.evaluation.tasks.oos import OosEvaluator, support_pool
from dialoguecse_tf.io_utils import DataFormatError


def test_readers_take_each_layout_of_the_real_sets(shared_data):
    banking = read_intent_dataset(str(shared_data / "intent" / "banking77"))
    assert (len(banking.train), len(banking.test), len(banking.labels)) == (10003, 3080, 77)
    clinc = read_intent_dataset(str(shared_data / "intent" / "clinc150" / "data_oos_plus.json"))
    assert (len(clinc.train), len(clinc.test), len(clinc.oos_train), len(clinc.oos_test)) == (15000, 4500, 250, 1000)
    assert len(clinc.labels) == 150 and OOS_LABEL not in clinc.labels
    assert {label for _, label in clinc.oos_test} == {OOS_LABEL}
    assert len(read_intent_dataset(str(shared_data / "intent" / "clinc150" / "data_full.json")).oos_train) == 100
    hwu = read_intent_dataset(str(shared_data / "intent" / "hwu64" / "hwu64_64intents.json"))
    assert (len(hwu.train) + len(hwu.test), len(hwu.labels)) == (11036, 64)
    assert banking.blank_texts == clinc.blank_texts == hwu.blank_texts == 0
    # all.json's blank texts stay, as in the release; 8 of its labels have nothing else.
    everything = read_intent_dataset(str(shared_data / "intent" / "hwu64" / "all.json"))
    assert everything.blank_texts == 4898 and len(everything.train) + len(everything.test) == 25716
    assert len(everything.labels) == 68
    assert sum(all(not text for text, l in everything.train if l == label) for label in everything.labels) == 8


def _release_split(items):
    """DSE's `process_evaluate.py` (l.166-186), transcribed: in file order, an item goes to
    test once its label already has 85 % of its items in train."""
    total, count, train, test = {}, {}, [], []
    for _, label in items:
        total[label] = total.get(label, 0) + 1
    for item in items:
        label = item[1]
        (test if count.get(label, 0) >= total[label] * 0.85 else train).append(item)
        count[label] = count.get(label, 0) + 1
    return tuple(train), tuple(test)


def test_one_list_is_split_as_the_release_splits_it_or_after_a_seeded_shuffle(shared_data):
    path = str(shared_data / "intent" / "hwu64" / "hwu64_64intents.json")
    items = tuple((text.strip(), label.strip()) for text, label in json.load(open(path, encoding="utf-8")))
    first = read_intent_dataset(path, "first")
    assert (first.train, first.test) == _release_split(items)
    assert first.split == "first 85% per label in file order"
    seeded = read_intent_dataset(path)
    assert seeded == read_intent_dataset(path, "seeded") and seeded.train != first.train
    assert "shuffle (seed" in seeded.split
    for label in seeded.labels:
        total = sum(1 for _, l in items if l == label)
        assert sum(1 for _, l in seeded.train if l == label) == math.ceil(0.85 * total)
    # Both halves keep the file's order.
    order = {item: i for i, item in enumerate(items)}
    assert all(order[a] < order[b] for half in (seeded.train, seeded.test) for a, b in zip(half, half[1:]))
    with pytest.raises(ValueError, match="split must be one of"):
        read_intent_dataset(path, "random")


def test_a_bad_item_names_its_file_and_line(tmp_path):
    path = tmp_path / "all.json"
    path.write_text('[\n ["book a table", "restaurant"],\n ["no label"],\n ["hi", "greet"]\n]', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"all\.json:3: expected a \[text, label\] pair"):
        read_intent_dataset(str(path))
    path.write_text(json.dumps({"train": [["book a table", "restaurant"], ["  ", "restaurant"]],
                                "test": [["a table", "restaurant"]]}), encoding="utf-8")
    assert read_intent_dataset(str(path)).blank_texts == 1
    path.write_text(json.dumps({"train": [["a b", "x"]], "test": [["a", ""]]}), encoding="utf-8")
    with pytest.raises(DataFormatError, match="'test' item 0"):
        read_intent_dataset(str(path))
    path.write_text('[["a", "x"],', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"all\.json:1: invalid JSON"):
        read_intent_dataset(str(path))
    (tmp_path / "folder").mkdir()
    with pytest.raises(FileNotFoundError, match="train.json and test.json"):
        read_intent_dataset(str(tmp_path / "folder"))


def _items(counts):
    return tuple((f"{label} {i}", label) for label, n in counts.items() for i in range(n))


def test_support_sets_follow_the_release_sampling():
    train = _items({"a": 12, "b": 7, "c": 1})
    # a: 2k = 10 drawn, first 5 kept; b: all 7 drawn, ceil(7 / 2) = 4 kept; c has fewer than k.
    with pytest.raises(ValueError, match="intent 'c' has 1 training examples, fewer than k=5"):
        sample_support(train, ["a", "b", "c"], 5, run=3, source="x")
    support = sample_support(train, ["a", "b"], 5, run=3, source="x")
    labels = [train[i][1] for i in support]
    assert labels.count("a") == 5 and labels.count("b") == 4 and len(set(support)) == 9
    # Run r is Python's random seeded with r, as the release's `random.seed(run)`.
    rng = random.Random(3)
    assert support[:5] == rng.sample(range(12), 10)[:5]
    assert sample_support(train, ["a", "b"], 5, run=3, source="x") == support
    assert sample_support(train, ["a", "b"], 5, run=4, source="x") != support
    assert len(sample_support(train, ["a", "b", "c"], 1, run=0, source="x")) == 3


def _release_support_texts(items, shots, run):
    """The release's `_sample_few_shot_from_original_data` (evaluate/utils/data.py:395-437)
    on rows in HuggingFace's order, transcribed: the support texts of one run."""
    random.seed(run)
    by_label = {}
    for i, (_, label) in enumerate(items):
        by_label[label] = by_label.get(label, []) + [i]
    support = []
    for label in by_label:
        drawn = random.sample(by_label[label], min(shots * 2, len(by_label[label])))
        support.extend(items[i][0] for i in drawn[:len(drawn) - int(len(drawn) / 2)])
    return support


def test_oos_support_sets_are_the_releases_on_its_clinc150_file(shared_data):
    dataset = read_intent_dataset(str(shared_data / "intent" / "clinc150" / "data_oos_plus.json"))
    train, labels = support_pool(dataset)
    assert labels[-1] == OOS_LABEL and len(labels) == 151
    # HuggingFace's clinc_oos "plus" train split: the in-scope items, then oos_train.
    hf_rows = [list(item) for item in json.load(open(dataset.path, encoding="utf-8"))["train"]] + [
        list(item) for item in json.load(open(dataset.path, encoding="utf-8"))["oos_train"]]
    for shots, run in ((1, 0), (5, 7)):
        ours = [train[i][0] for i in sample_support(train, labels, shots, run, "x")]
        assert ours == _release_support_texts(hf_rows, shots, run)


def test_prototypes_are_means_of_unit_vectors_and_scores_are_not_renormalised():
    vectors = np.array([[2.0, 0.0], [0.0, 3.0], [0.0, -1.0]])
    protos = prototypes(vectors, np.array([0, 0, 1]), 2)
    np.testing.assert_allclose(protos, [[0.5, 0.5], [0.0, -1.0]])
    np.testing.assert_allclose(class_scores(np.array([[4.0, 0.0]]), protos), [[0.5, 0.0]])


def test_oos_rule_and_metrics_by_hand():
    """The release's rule (run_similarity.py:283-299): rows L2-normalised, threshold = mean -
    population std of the rows' best scores, a row is out of scope unless its best is above it."""
    # Three in-scope classes and oos (index 3). Normalised best scores, by hand: 0.9 / sqrt(0.99)
    # = 0.90453, 0.8, 0.99 / sqrt(1.0001) = 0.98995, 0.5; mean 0.79862, std 0.18507, threshold
    # 0.61355: the last row (0.5) falls below it and becomes oos, the others keep their argmax.
    scores = np.array([[0.9, 0.3, 0.3, 0.0], [0.6, 0.8, 0.0, 0.0], [0.1, 0.1, 0.99, 0.0], [0.5, 0.5, 0.5, 0.5]])
    predicted, threshold = oos_predictions(scores, 3)
    assert threshold == pytest.approx(0.61355, abs=1e-5)
    np.testing.assert_array_equal(predicted, [0, 1, 2, 3])
    metrics = oos_metrics(np.array([0, 3, 2, 3, 1]), np.array([0, 1, 2, 3, 3]), 3)
    assert metrics == pytest.approx({"acc": 60.0, "in_acc": 200 / 3, "oos_acc": 60.0, "oos_recall": 50.0})


def _label_encoder(dimension=64):
    """Embeds a text by hashing its words: items sharing words look alike."""
    def encode(texts):
        vectors = np.zeros((len(texts), dimension))
        for row, text in enumerate(texts):
            for word in text.split():
                vectors[row, zlib.crc32(word.encode()) % dimension] += 1.0
        return vectors + 1e-3
    return encode


def test_few_shot_accuracy_separates_an_informative_encoder_from_chance(tmp_path):
    rng = np.random.default_rng(0)
    words = {label: [f"{label}{i}" for i in range(3)] for label in "abcdef"}
    items = [[f"{' '.join(rng.choice(words[l], 2))} filler{rng.integers(50)}", l] for l in "abcdef" for _ in range(20)]
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"train": items[::2], "test": items[1::2]}), encoding="utf-8")
    evaluator = IntentEvaluator(str(path))
    metrics = evaluator(_label_encoder())
    assert set(metrics) == {key for key, _ in IntentEvaluator.metrics}
    assert metrics["acc_5shot"] > 75.0 and metrics["acc_1shot"] > 40.0
    assert metrics["acc_5shot"] > metrics["acc_1shot"]
    constant = evaluator(lambda texts: np.ones((len(texts), 4)))
    assert constant["acc_5shot"] == pytest.approx(100.0 / 6)  # every score ties: argmax picks the first intent
    noisy = few_shot_accuracies(evaluator.data, lambda texts: rng.normal(size=(len(texts), 16)), 1)
    assert len(noisy) == 10 and np.mean(noisy) < 40.0


def test_a_label_with_fewer_items_than_shots_is_skipped_at_that_k_and_counted(tmp_path):
    # Review finding 13: one 5-shot label with a single example stopped the whole evaluation.
    items = {label: [[f"{label}{i} {label}", label] for i in range(12)] for label in "abc"}
    train = items["a"][:6] + items["b"][:6] + [["gift wrap", "single"]]
    test = items["a"][6:] + items["b"][6:] + [["gift wrapping", "single"]]
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"train": train, "test": test}), encoding="utf-8")
    evaluator = IntentEvaluator(str(path))
    assert evaluator.record()["intent_labels_skipped"] == {"1shot": [], "5shot": ["single"]}
    metrics = evaluator(_label_encoder())
    # 5-shot scores a and b alone, exactly as a set without the label would.
    without = tmp_path / "without.json"
    without.write_text(json.dumps({"train": train[:-1], "test": test[:-1]}), encoding="utf-8")
    assert metrics["acc_5shot"] == IntentEvaluator(str(without))(_label_encoder())["acc_5shot"]
    one_label = tmp_path / "one_label.json"
    one_label.write_text(json.dumps({"train": train[:6] + train[-1:], "test": test[:6]}), encoding="utf-8")
    with pytest.raises(ValueError, match="fewer than 2 intents have at least 5 training items"):
        IntentEvaluator(str(one_label))


def test_unseen_test_labels_and_sets_without_oos_are_refused(tmp_path):
    path = tmp_path / "set.json"
    train = [[f"x {i}", label] for label in "ac" for i in range(5)]
    path.write_text(json.dumps({"train": train, "test": [["q", "b"]]}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"test labels never seen in training: \['b'\]"):
        IntentEvaluator(str(path))(_label_encoder())
    with pytest.raises(ValueError, match="needs 'oos_train' and 'oos_test'"):
        OosEvaluator(str(path))


def test_oos_on_real_clinc150_with_a_bag_of_words_encoder(shared_data):
    evaluator = OosEvaluator(str(shared_data / "intent" / "clinc150" / "data_oos_plus.json"))
    assert evaluator.size == 5500
    metrics = evaluator(_label_encoder(512))
    assert set(metrics) == {key for key, _ in OosEvaluator.metrics}
    for shots in (1, 5):
        assert 0.0 < metrics[f"oos_{shots}shot_in_acc"] < 100.0
        # Chance in-scope accuracy is 1/150; hashed words already do far better.
        assert metrics[f"oos_{shots}shot_in_acc"] > 5.0
    assert metrics["oos_5shot_in_acc"] > metrics["oos_1shot_in_acc"]


def test_oos_recall_on_real_clinc150_separates_an_oracle_from_noise(shared_data):
    """OOS recall, the number the tables report, on the real file: an encoder that embeds each
    text as its label's one-hot vector plus a little noise sends every oos query to the oos
    prototype (recall 100, whatever the threshold), while the mean - std threshold still flags
    the in-scope queries of lowest best score (so in-scope accuracy stays below 100; an exact
    one-hot oracle would tie every best score at the threshold and flag everything). Random
    vectors flag about the share of queries below mean - std of a bell-shaped score
    distribution, some 16 %, in and out of scope alike."""
    path = shared_data / "intent" / "clinc150" / "data_oos_plus.json"
    data = json.load(open(path, encoding="utf-8"))
    label_of = {text: label for key in ("train", "test", "oos_train", "oos_test") for text, label in data[key]}
    labels = sorted(set(label_of.values()))
    evaluator = OosEvaluator(str(path))
    rng = np.random.default_rng(0)
    oracle = evaluator(lambda texts: np.eye(len(labels))[[labels.index(label_of[t]) for t in texts]]
                       + rng.uniform(0, 0.05, size=(len(texts), len(labels))))
    for shots in (1, 5):
        assert oracle[f"oos_{shots}shot_oos_recall"] == pytest.approx(100.0)
        assert 70.0 < oracle[f"oos_{shots}shot_in_acc"] < 100.0
    noise = evaluator(lambda texts: rng.normal(size=(len(texts), 256)))
    for shots in (1, 5):
        assert 5.0 < noise[f"oos_{shots}shot_oos_recall"] < 30.0
        assert noise[f"oos_{shots}shot_in_acc"] < 5.0
