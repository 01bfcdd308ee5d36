"""The fine-tuning loop on a tiny BERT: it learns separable toy sets with either head, stops at
its patience, repeats exactly under one seed; its schedule, optimizer and inputs against NumPy
or hand-written references; each factory copy starts from the same weights."""

import dataclasses

import keras
import numpy as np
import pytest

from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.evaluation.finetune import (EncoderFactory, Examples, LinearWarmupDecay, fine_tune, pack_texts,
                                                release_optimizer)
from dialoguecse_tf.evaluation.tasks.finetune_base import FineTuneSettings

TOY = FineTuneSettings(learning_rate=3e-3, batch_size=4, max_epochs=15, patience=30, eval_steps=1,
                       dropout=0.0, max_seq_length=16, num_runs=2)
CLASS_WORDS = (("refund", "money", "back"), ("track", "package", "delivery"), ("change", "address", "invoice"))
FILLER = ("the", "my", "i", "want", "please", "is", "a", "to")


@pytest.fixture
def factory(tiny_bert_config, tiny_vocab_file):
    keras.utils.set_random_seed(0)
    return EncoderFactory(build_backbone(tiny_bert_config), Tokenizer(tiny_vocab_file, max_seq_length=16))


def toy_texts(rng, label_sets):
    """A sentence per item: the words of each of its classes and two filler words, shuffled."""
    texts = []
    for labels in label_sets:
        words = [word for label in labels for word in CLASS_WORDS[label]] + [str(word) for word in rng.choice(FILLER, 2)]
        texts.append(" ".join(rng.permutation(words)))
    return texts


def single_label(rng, per_class):
    labels = np.repeat(np.arange(3), per_class)
    return Examples(toy_texts(rng, [(int(label),) for label in labels]), labels)


def multi_label(rng, count):
    label_sets = [tuple(int(i) for i in np.flatnonzero(row)) or (int(rng.integers(3)),)
                  for row in rng.random((count, 3)) < 0.4]
    matrix = np.zeros((count, 3), np.int32)
    for row, labels in enumerate(label_sets):
        matrix[row, list(labels)] = 1
    return Examples(toy_texts(rng, label_sets), matrix)


@pytest.mark.slow
def test_a_single_label_head_learns_a_separable_toy_set(factory):
    rng = np.random.default_rng(0)
    result = fine_tune(factory, single_label(rng, 8), single_label(rng, 8), single_label(rng, 8), 3, False, TOY, 0)
    # Chance is 33; the weights kept are the first to score 100 on validation, not always the last.
    assert result.test["acc"] > 90 and result.best_validation == 100.0
    assert result.steps == 15 * 6 and result.epochs == 15 and not result.stopped_early


@pytest.mark.slow
def test_a_sigmoid_head_learns_a_separable_multi_label_toy_set(factory):
    rng = np.random.default_rng(2)
    settings = dataclasses.replace(TOY, max_epochs=40, batch_size=8)
    result = fine_tune(factory, multi_label(rng, 48), multi_label(rng, 24), multi_label(rng, 30), 3, True, settings, 0)
    # Chance (each act on or off at random) is about 50; an untrained head scores below it.
    assert result.test["micro_f1"] > 95 and result.test["macro_f1"] > 95 and result.best_validation > 95


@pytest.mark.slow
@pytest.mark.parametrize("patience", [0, 2])
def test_training_stops_at_the_end_of_the_epoch_that_exceeds_the_patience(factory, patience):
    rng = np.random.default_rng(2)
    # A rate too small to move any prediction: every validation after the first scores the same.
    frozen = dataclasses.replace(TOY, learning_rate=1e-12, patience=patience, max_epochs=20)
    result = fine_tune(factory, single_label(rng, 4), single_label(rng, 10), single_label(rng, 2), 3, False, frozen, 3)
    # Validated before each epoch's first step (3 steps an epoch); the first sets the best, each
    # later one counts, and the epoch ending with the count above the patience is the last.
    assert result.best_step == 0 and result.best_validation > 0
    assert result.stopped_early and result.epochs == patience + 2 and result.steps == 3 * (patience + 2)
    # Validation every max(eval_steps, steps per epoch): at eval_steps=6, before every other epoch,
    # so the count passes the patience at the start of epoch 2 * (patience + 1), which is the last.
    sparse = fine_tune(factory, single_label(rng, 4), single_label(rng, 10), single_label(rng, 2), 3, False,
                       dataclasses.replace(frozen, eval_steps=6), 3)
    assert sparse.stopped_early and sparse.epochs == 2 * patience + 3


@pytest.mark.slow
def test_a_seeded_run_repeats_exactly(factory):
    rng = np.random.default_rng(4)
    data = single_label(rng, 4), single_label(rng, 2), single_label(rng, 3)
    trained = []

    def keep(make):
        def wrapped():
            encoder = make()
            trained.append(encoder.backbone)
            return encoder
        return wrapped

    settings = dataclasses.replace(TOY, max_epochs=4)
    results = [fine_tune(keep(factory), *data, 3, False, settings, seed) for seed in (5, 5, 6)]
    weights = [backbone.get_weights() for backbone in trained]
    assert results[0] == results[1]
    assert all(np.array_equal(a, b) for a, b in zip(weights[0], weights[1]))
    assert not all(np.array_equal(a, b) for a, b in zip(weights[0], weights[2]))


@pytest.mark.slow
def test_a_bfloat16_encoder_fine_tunes_in_bfloat16_with_a_float32_head(tiny_bert_config, tiny_vocab_file):
    """A checkpoint loaded in bfloat16 (`--precision=bfloat16`) gives bfloat16 copies, whose
    pooled vectors, head and loss stay float32, and they learn the toy set as float32's do."""
    keras.utils.set_random_seed(0)
    made = EncoderFactory(build_backbone(tiny_bert_config, precision="bfloat16"),
                          Tokenizer(tiny_vocab_file, max_seq_length=16))
    copy = made()
    assert copy.backbone.compute_dtype == "bfloat16" and {v.dtype for v in copy.backbone.weights} == {"float32"}
    rng = np.random.default_rng(0)
    result = fine_tune(made, single_label(rng, 8), single_label(rng, 8), single_label(rng, 8), 3, False, TOY, 0)
    assert result.test["acc"] > 90 and result.best_validation == 100.0


def test_each_copy_starts_from_the_factorys_weights(factory, tiny_bert_config, tiny_vocab_file):
    source = build_backbone(tiny_bert_config)
    made = EncoderFactory(source, Tokenizer(tiny_vocab_file))
    first = made()
    first.backbone.get_layer("token_embedding").embeddings.assign_add(np.ones_like(first.backbone.get_weights()[0]))
    second = made()
    for original, copy in zip(source.get_weights(), second.backbone.get_weights()):
        np.testing.assert_array_equal(original, copy)
    assert second.backbone is not source and second.backbone is not first.backbone
    assert not second.backbone.pooled_dense.trainable and second.backbone.transformer_layers[0].trainable


def test_the_schedule_is_transformers_linear_warmup():
    def reference(step, warmup, total):  # get_linear_schedule_with_warmup's lr_lambda
        if step < warmup:
            return float(step) / float(max(1, warmup))
        return max(0.0, float(total - step) / float(max(1, total - warmup)))

    for warmup, total in ((24, 481), (0, 50), (3, 3)):
        schedule = LinearWarmupDecay(3e-5, warmup, total)
        for step in range(total + 5):
            assert float(schedule(step)) == pytest.approx(3e-5 * reference(step, warmup, total), rel=1e-6, abs=1e-12)


def adamw_step(value, first, second, gradient, step, rate):
    """transformers' AdamW update (optimization.py) with weight_decay 0, correct_bias True, eps 1e-6."""
    first = 0.9 * first + 0.1 * gradient
    second = 0.999 * second + 0.001 * gradient ** 2
    step_size = rate * np.sqrt(1 - 0.999 ** step) / (1 - 0.9 ** step)
    return value - step_size * first / (np.sqrt(second) + 1e-6), first, second


def test_the_optimizer_is_transformers_adamw_without_weight_decay():
    import tensorflow as tf

    rng = np.random.default_rng(7)
    start, table = rng.normal(size=(3, 2)), rng.normal(size=(5, 2))
    variable, embeddings = tf.Variable(start.astype(np.float32)), tf.Variable(table.astype(np.float32))
    settings = dataclasses.replace(TOY, learning_rate=1e-2, warmup_fraction=0.25)
    optimizer = release_optimizer([variable, embeddings], settings, num_train_steps=8)
    dense_state, table_state = (start, 0.0, 0.0), (table, 0.0, 0.0)
    for step, gradient in enumerate(rng.normal(size=(6, 3, 2)).astype(np.float32), start=1):
        # An embedding table's gradient is sparse (rows 1 and 3, twice); the release's is dense.
        sparse = tf.IndexedSlices(tf.constant(gradient), tf.constant([1, 3, 3]), tf.constant([5, 2]))
        optimizer.apply([tf.constant(gradient), sparse])
        table_gradient = np.zeros((5, 2))
        np.add.at(table_gradient, [1, 3, 3], gradient)
        # Warmup over int(8 * 0.25) = 2 updates from rate 0, then linear decay to 0 at update 8.
        rate = 1e-2 * (step - 1) / 2 if step - 1 < 2 else 1e-2 * (8 - (step - 1)) / 6
        dense_state = adamw_step(*dense_state, gradient.astype(np.float64), step, rate)
        table_state = adamw_step(*table_state, table_gradient, step, rate)
        np.testing.assert_allclose(variable.numpy(), dense_state[0], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(embeddings.numpy(), table_state[0], rtol=1e-5, atol=1e-7)
    assert not np.allclose(variable.numpy(), start) and int(optimizer.iterations.numpy()) == 6


def test_texts_are_packed_as_the_releases_tokenizer_packs_them(tiny_vocab_file):
    tokenizer = Tokenizer(tiny_vocab_file)
    ids = dict(zip(["[CLS]", "[SEP]", "where", "is", "my", "order", "refund", "[PAD]"],
                   tokenizer.tokens_to_ids(["[CLS]", "[SEP]", "where", "is", "my", "order", "refund", "[PAD]"])))
    token_ids, mask = pack_texts(tokenizer, ["where is my order", "[SEP] [SEP] refund [SEP] my order", ""], 7)
    expected = [["[CLS]", "where", "is", "my", "order", "[SEP]", "[PAD]"],
                ["[CLS]", "[SEP]", "[SEP]", "refund", "[SEP]", "my", "[SEP]"],  # cut at the end, [SEP] kept last
                ["[CLS]", "[SEP]", "[PAD]", "[PAD]", "[PAD]", "[PAD]", "[PAD]"]]
    np.testing.assert_array_equal(token_ids, [[ids[token] for token in row] for row in expected])
    np.testing.assert_array_equal(mask, [[token != "[PAD]" for token in row] for row in expected])
