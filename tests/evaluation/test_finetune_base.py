"""What DSE's fine-tuned evaluations share: the release's few-shot draw against a transcription of
its code, F1 against sklearn, the settings' checks and the averaging over runs."""

import dataclasses
import math
import random

import numpy as np
import pytest
from sklearn.metrics import f1_score

from dialoguecse_tf.evaluation.prototypes import sample_support
from dialoguecse_tf.evaluation.tasks.finetune_base import (FineTuneEvaluator, FineTuneSettings, accuracy,
                                                           few_shot_split, multilabel_f1, seeded_subset)


def release_sample(labels_per_item, shots, seed):
    """evaluate/utils/data.py:395-451 (`_sample_few_shot_from_original_data`) for "da" (multi-hot
    rows) written out as the release runs it, with the global `random` it seeds."""
    random.seed(seed)
    label_to_ids = {}
    for i, row in enumerate(labels_per_item):
        for act in np.where(np.array(row) == 1)[0]:
            label_to_ids[act] = label_to_ids.get(act, []) + [i]
    all_sampled = {}
    for label in label_to_ids:
        for cur_id in random.sample(label_to_ids[label], min(shots * 2, len(label_to_ids[label]))):
            all_sampled[label] = all_sampled.get(label, []) + [cur_id]
    unique, train, validation = set(), [], []
    for label in all_sampled:
        samples = [s for s in all_sampled[label] if s not in unique]
        unique = unique.union(set(samples))
        num_train = len(samples) - int(len(samples) / 2)
        train += samples[:num_train]
        validation += samples[num_train:]
    return train, validation


def test_the_few_shot_draw_is_the_releases():
    rng = np.random.default_rng(3)
    multi_hot = (rng.random((300, 7)) < 0.25).astype(int)
    multi_hot[:, 6] = 0
    multi_hot[[5, 40, 41], 6] = 1  # a rare act: fewer items than 2k
    label_sets = [tuple(np.flatnonzero(row)) for row in multi_hot]
    for shots in (1, 5, 10):
        for seed in (0, 1, 7):
            assert few_shot_split(label_sets, shots, seed) == release_sample(multi_hot, shots, seed)


def test_single_label_draws_train_on_the_similarity_protocols_support_and_validate_on_the_rest():
    rng = np.random.default_rng(0)
    items = [(f"text {i}", f"intent {int(label)}") for i, label in enumerate(rng.integers(0, 6, 120))]
    labels = list(dict.fromkeys(label for _, label in items))
    for shots in (1, 5):
        for run in range(3):
            train, validation = few_shot_split([(label,) for _, label in items], shots, run)
            assert train == sample_support(items, labels, shots, run, "toy")
            assert not set(train) & set(validation)
            for label in labels:
                assert sum(items[i][1] == label for i in train) == shots
                assert sum(items[i][1] == label for i in validation) == shots
    assert few_shot_split([(label,) for _, label in items], 5, 0) != few_shot_split([(l,) for _, l in items], 5, 1)


def test_a_label_with_fewer_than_2k_items_trains_on_the_larger_half():
    train, validation = few_shot_split([("a",), ("a",), ("a",), ("b",)], 5, 0)
    assert len([i for i in train if i < 3]) == 2 and len([i for i in validation if i < 3]) == 1
    assert 3 in train and 3 not in validation
    with pytest.raises(ValueError, match="shots"):
        few_shot_split([("a",)], 0, 0)
    with pytest.raises(ValueError, match="no item has a label"):
        few_shot_split([(), ()], 1, 0)


@pytest.mark.parametrize("seed", range(5))
def test_f1_is_sklearns(seed):
    rng = np.random.default_rng(seed)
    gold = (rng.random((40, 6)) < 0.3).astype(int)
    predicted = (rng.random((40, 6)) < 0.3).astype(int)
    gold[:, 5] = predicted[:, 5] = 0  # an act neither has: counts 0 in the macro mean, as sklearn's
    predicted[:, 4] = 0  # an act never predicted
    micro, macro = multilabel_f1(gold, predicted)
    assert micro == pytest.approx(100 * f1_score(gold, predicted, average="micro", zero_division=0), abs=1e-9)
    assert macro == pytest.approx(100 * f1_score(gold, predicted, average="macro", zero_division=0), abs=1e-9)
    assert multilabel_f1(gold, gold)[0] == 100.0
    assert multilabel_f1(np.zeros((3, 2)), np.zeros((3, 2))) == (0.0, 0.0)
    with pytest.raises(ValueError, match="one shape"):
        multilabel_f1(gold, predicted[:, :3])


def test_accuracy_and_seeded_subsets():
    assert accuracy([0, 1, 2, 2], [0, 1, 1, 2]) == 75.0
    assert seeded_subset(5, None, 0) == seeded_subset(5, 9, 0) == [0, 1, 2, 3, 4]
    subset = seeded_subset(1000, 100, 3)
    assert len(subset) == 100 and subset == sorted(set(subset)) and subset == seeded_subset(1000, 100, 3)
    assert subset != seeded_subset(1000, 100, 4)


@pytest.mark.parametrize("overrides, message", [
    ({"learning_rate": 0.0}, "learning_rate must be greater than 0"),
    ({"num_runs": 1}, "num_runs must be at least 2"),
    ({"max_seq_length": 2}, "max_seq_length must be at least 3"),
    ({"dropout": 1.0}, "dropout must be at most 0.9"),
    ({"max_test_items": 0}, "max_test_items must be at least 1"),
    ({"batch_size": 2.5}, "batch_size must be an integer"),
])
def test_settings_refuse_bad_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(FineTuneSettings(), **overrides)


class _Toy(FineTuneEvaluator):
    """Each run's numbers a function of shots and run, to check the averaging."""

    name = task = "toy_ft"
    label = "Toy"
    count_key = "toy_items"
    description = "toy"
    metrics = ()
    primary_metric = "toy_1shot"
    shots = (1, 3)
    presets = {"release": FineTuneSettings(num_runs=4), "cpu": FineTuneSettings(num_runs=2)}
    run_metric_names = ("a", "b")

    @staticmethod
    def read_data(path):
        return path

    @classmethod
    def metric_key(cls, shots, name):
        return f"toy_{name}_{shots}shot"

    @property
    def size(self):
        return 1

    def run_metrics(self, make_encoder, shots, run):
        return {"a": shots * 10.0 + run, "b": make_encoder() * run}


def test_runs_are_averaged_with_their_sample_std(tmp_path):
    path = tmp_path / "toy.txt"
    path.write_text("x", encoding="utf-8")
    metrics = _Toy(str(path), finetune_preset="release")(lambda: 2.0)
    assert metrics["toy_a_1shot"] == 11.5 and metrics["toy_a_3shot"] == 31.5
    assert metrics["toy_a_1shot_std"] == pytest.approx(np.std([10, 11, 12, 13], ddof=1))
    assert metrics["toy_b_3shot"] == 3.0 and metrics["toy_b_3shot_std"] == pytest.approx(math.sqrt(20 / 3))
    cpu = _Toy(str(path), finetune_preset="cpu")
    assert cpu.record()["toy_ft_preset"] == "cpu" and cpu.record()["toy_ft_settings"]["num_runs"] == 2
    assert cpu(lambda: 1.0)["toy_a_1shot"] == 10.5
    with pytest.raises(ValueError, match="unknown fine-tuning preset 'gpu'"):
        _Toy.read(str(path), finetune_preset="gpu")
