"""Fine-tuned few-shot intent classification: the sets the release trains, validates and scores on
(real Banking77, CLINC150, HWU64), the presets, and the task end to end on a tiny BERT."""

import json

import keras
import numpy as np
import pytest

from dialoguecse_tf.evaluation.prototypes import sample_support
from dialoguecse_tf.evaluation.tasks.finetune_base import FineTuneSettings, few_shot_split
from dialoguecse_tf.evaluation.tasks.intent_finetune import CPU, RELEASE, IntentFineTuneEvaluator


@pytest.mark.parametrize("name, path, test_items, intents", [
    ("banking77", "banking77", 3080, 77),
    ("clinc150", "clinc150/data_oos_plus.json", 4500, 150),  # in scope only: the release drops oos
    ("hwu64", "hwu64/hwu64_64intents.json", None, 64),
])
def test_each_set_is_read_as_the_release_scores_it(shared_data, name, path, test_items, intents):
    release = IntentFineTuneEvaluator(str(shared_data / "intent" / path))
    cpu = IntentFineTuneEvaluator(str(shared_data / "intent" / path), data=release.data, finetune_preset="cpu")
    assert len(release.label_index) == intents and "oos" not in release.label_index
    assert release.size == len(release.test_items) == (test_items or len(release.data.test))
    assert len(cpu.test_items) == 1000 and set(cpu.test_items) <= set(release.data.test)
    record = cpu.record()
    assert record["intent_ft_preset"] == "cpu" and record["intent_ft_scored_items"] == 1000
    assert record["intent_ft_test_items"] == release.size and record["intent_ft_intents"] == intents
    # Run r trains on the similarity task's support set of run r, and validates on as many more.
    train = release.data.train
    for shots in (1, 5):
        rows, validation = few_shot_split([(label,) for _, label in train], shots, 3)
        assert rows == sample_support(train, release.data.labels, shots, 3, path)
        assert len(rows) == len(validation) == shots * intents and not set(rows) & set(validation)


def test_presets_are_the_releases_and_a_cut_of_it():
    assert (RELEASE.learning_rate, RELEASE.batch_size, RELEASE.max_epochs, RELEASE.patience, RELEASE.eval_steps,
            RELEASE.dropout, RELEASE.max_seq_length, RELEASE.num_runs) == (3e-5, 8, 50, 5, 10, 0.1, 64, 10)
    assert RELEASE.max_validation_items is None and RELEASE.max_test_items is None
    kept = ("learning_rate", "batch_size", "patience", "eval_steps", "warmup_fraction", "dropout", "max_seq_length")
    assert all(getattr(CPU, name) == getattr(RELEASE, name) for name in kept)
    assert CPU.num_runs < RELEASE.num_runs and CPU.max_epochs < RELEASE.max_epochs
    assert IntentFineTuneEvaluator.metrics[0] == ("ft_acc_1shot", "FT 1-shot acc.")
    assert [key for key, _ in IntentFineTuneEvaluator.metrics] == [
        "ft_acc_1shot", "ft_acc_1shot_std", "ft_acc_5shot", "ft_acc_5shot_std"]


def test_bad_input_is_refused_before_any_model(tmp_path):
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "train.json").write_text(json.dumps([["hi", "greet"], ["bye", "leave"]]), encoding="utf-8")
    (tmp_path / "set" / "test.json").write_text(json.dumps([["hello", "greet"], ["thanks", "thank"]]), encoding="utf-8")
    with pytest.raises(ValueError, match="test intents never seen in training: \\['thank'\\]"):
        IntentFineTuneEvaluator(str(tmp_path / "set"))
    with pytest.raises(ValueError, match="unknown fine-tuning preset 'fast'"):
        IntentFineTuneEvaluator(str(tmp_path / "set"), finetune_preset="fast")


INTENT_WORDS = {"refund": "refund money back", "track": "track package delivery", "address": "change address invoice"}


@pytest.mark.slow
def test_the_task_fine_tunes_every_run_from_the_same_weights(tmp_path, monkeypatch, tiny_bert_config,
                                                             tiny_vocab_file):
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.tokenization import Tokenizer
    from dialoguecse_tf.evaluation.finetune import EncoderFactory

    rng = np.random.default_rng(0)
    items = [[f"{words} {' '.join(rng.choice(['my', 'please', 'the'], 2))}", label]
             for label, words in INTENT_WORDS.items() for _ in range(12)]
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "train.json").write_text(json.dumps(items[::2]), encoding="utf-8")
    (tmp_path / "set" / "test.json").write_text(json.dumps(items[1::2]), encoding="utf-8")
    tiny = FineTuneSettings(learning_rate=3e-3, batch_size=4, max_epochs=3, patience=5, eval_steps=1, dropout=0.0,
                            max_seq_length=12, num_runs=2, max_validation_items=4, max_test_items=9)
    monkeypatch.setitem(IntentFineTuneEvaluator.presets, "cpu", tiny)
    evaluator = IntentFineTuneEvaluator(str(tmp_path / "set"), finetune_preset="cpu")
    keras.utils.set_random_seed(0)
    source = build_backbone(tiny_bert_config)
    before = source.get_weights()
    factory = EncoderFactory(source, Tokenizer(tiny_vocab_file))
    runs = []
    original = factory.__class__.__call__

    def counted():
        runs.append(1)
        return original(factory)

    scored = {}
    run_metrics = evaluator.run_metrics
    monkeypatch.setattr(evaluator, "run_metrics", lambda make, shots, run: scored.setdefault(
        (shots, run), run_metrics(make, shots, run)))
    metrics = evaluator(counted)
    assert list(metrics) == [key for key, _ in IntentFineTuneEvaluator.metrics]
    assert len(runs) == 2 * 2 and all(0 <= metrics[key] <= 100 for key in metrics)
    assert all(np.array_equal(a, b) for a, b in zip(before, source.get_weights()))
    assert metrics["ft_acc_1shot"] == pytest.approx(np.mean([scored[1, 0]["acc"], scored[1, 1]["acc"]]))
    # Each run's own draw and seed: the last run again, after the others, gives its numbers.
    assert run_metrics(counted, 5, 1) == scored[5, 1]
