"""Dialogue action prediction: the SGD substitution's record and inputs, the presets, and the
task end to end on a tiny BERT over a TOD-BERT-layout folder."""

import json

import keras
import numpy as np
import pytest

from dialoguecse_tf.evaluation.provenance import file_sha256
from dialoguecse_tf.evaluation.tasks.dialogue_act import CPU, RELEASE, DialogueActEvaluator
from dialoguecse_tf.evaluation.tasks.finetune_base import FineTuneSettings


@pytest.fixture(scope="module")
def sgd_task(shared_data):
    return DialogueActEvaluator(str(shared_data / "sgd"), finetune_preset="cpu")


def test_sgd_is_scored_on_dev_and_drawn_from_train(sgd_task):
    record = sgd_task.record()
    assert record["dialogue_act_layout"] == "sgd" and record["dialogue_act_scored_split"].endswith("sgd/dev")
    assert record["dialogue_act_train_examples"] == 99704 and record["dialogue_act_test_examples"] == 17286
    assert record["dialogue_act_scored_examples"] == 2000 and len(record["dialogue_act_acts"]) == 9
    # The digest covers the dialogue files read, not the folder's own files (its LICENSE.txt).
    assert record["dialogue_act_sha256"] != file_sha256(str(sgd_task.path))
    assert set(sgd_task.test_examples) <= set(sgd_task.data.test)


def test_inputs_are_the_releases(sgd_task):
    examples = sgd_task._examples(sgd_task.data.train[:3])
    assert examples.labels.shape == (3, 9) and examples.labels.dtype == np.int32
    for example, text, row in zip(sgd_task.data.train, examples.texts, examples.labels):
        assert list(np.flatnonzero(row)) == list(example.acts)
        assert len(text.split()) <= 28 and "[SYS]" not in text and "[USR]" not in text
        assert text.split()[-1] == example.text.split()[-1]


def test_presets_are_the_releases_and_a_cut_of_it():
    assert (RELEASE.learning_rate, RELEASE.batch_size, RELEASE.max_epochs, RELEASE.patience, RELEASE.eval_steps,
            RELEASE.dropout, RELEASE.max_seq_length, RELEASE.num_runs) == (5e-5, 16, 100, 3, 30, 0.2, 32, 5)
    kept = ("learning_rate", "batch_size", "patience", "eval_steps", "warmup_fraction", "dropout", "max_seq_length")
    assert all(getattr(CPU, name) == getattr(RELEASE, name) for name in kept)
    assert CPU.num_runs < RELEASE.num_runs and CPU.max_epochs < RELEASE.max_epochs
    assert [key for key, _ in DialogueActEvaluator.metrics][:4] == [
        "da_micro_f1_10shot", "da_micro_f1_10shot_std", "da_macro_f1_10shot", "da_macro_f1_10shot_std"]
    assert DialogueActEvaluator.primary_metric == "da_micro_f1_10shot"


def _turn(speaker, text, label=()):
    return {"speaker": speaker, "raw_text": text, "label": list(label)}


ACT_WORDS = {"request_food": "what food would you like", "request_area": "which area of town",
             "offer": "how about the place"}


def _dialogue(rng):
    acts = [str(act) for act in rng.choice(list(ACT_WORDS), 2, replace=False)]
    turns = [_turn("[SYS]", "hello welcome", ["offer"])]
    for act in acts:
        turns += [_turn("[USR]", "i want food please"), _turn("[SYS]", ACT_WORDS[act], [act])]
    return turns + [_turn("[USR]", "thanks")]


@pytest.mark.slow
def test_the_task_on_tod_berts_layout(tmp_path, monkeypatch, tiny_bert_config, tiny_vocab_file):
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.tokenization import Tokenizer
    from dialoguecse_tf.evaluation.finetune import EncoderFactory

    rng = np.random.default_rng(0)
    folder = tmp_path / "dstc2"
    folder.mkdir()
    for name, count in (("train.json", 30), ("test.json", 6)):
        (folder / name).write_text(json.dumps([_dialogue(rng) for _ in range(count)]), encoding="utf-8")
    (folder / "labels.txt").write_text("".join(f"{act}\n" for act in ACT_WORDS), encoding="utf-8")
    tiny = FineTuneSettings(learning_rate=3e-3, batch_size=8, max_epochs=3, patience=3, eval_steps=2, dropout=0.2,
                            max_seq_length=16, num_runs=2)
    monkeypatch.setitem(DialogueActEvaluator.presets, "cpu", tiny)
    evaluator = DialogueActEvaluator(str(folder), finetune_preset="cpu")
    assert evaluator.record()["dialogue_act_layout"] == "tod_bert" and evaluator.size == 6 * 3
    keras.utils.set_random_seed(0)
    factory = EncoderFactory(build_backbone(tiny_bert_config), Tokenizer(tiny_vocab_file))
    metrics = evaluator(factory)
    assert list(metrics) == [key for key, _ in DialogueActEvaluator.metrics]
    assert all(0 <= value <= 100 for value in metrics.values())
    digest = evaluator.record()["dialogue_act_sha256"]
    (folder / "test.json").write_text(json.dumps([_dialogue(rng)]), encoding="utf-8")
    assert DialogueActEvaluator(str(folder)).record()["dialogue_act_sha256"] != digest
