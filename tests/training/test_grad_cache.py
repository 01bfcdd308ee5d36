"""GradCache (`training.grad_cache`): a batch embedded in chunks updates the weights as the whole
batch does, its dropout masks replayed, on one device and on two replicas; every objective splits
its batch one way (this or `training.accumulation`), and one defining neither is refused."""

import dataclasses
import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf import stage
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.objectives.base import Objective
from dialoguecse_tf.objectives.registry import get_objective_class, objective_names
from dialoguecse_tf.records.pairs import PAIR_INPUT_IDS, PAIR_INPUT_MASK
from dialoguecse_tf.training import grad_cache
from dialoguecse_tf.training.accumulation import pass_sizes
from dialoguecse_tf.training.grad_cache import chunked_gradients
from dialoguecse_tf.training.loop import build_train_step
from dialoguecse_tf.training.strategy import create_strategy

NUM_PAIRS, SEQ_LENGTH = 6, 10


def _pair_batch(vocab_size):
    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab_size, size=(NUM_PAIRS, 2, SEQ_LENGTH)).astype("int32")
    lengths = rng.integers(3, SEQ_LENGTH + 1, size=(NUM_PAIRS, 2))
    mask = (np.arange(SEQ_LENGTH) < lengths[..., None]).astype("int32")
    return {PAIR_INPUT_IDS: tf.constant(ids * mask), PAIR_INPUT_MASK: tf.constant(mask)}


def _objective(name):
    return get_objective_class(name)()


def _model(objective, bert_config):
    keras.utils.set_random_seed(7)
    # Two length buckets: each chunk is bucketed on its own, which must not change anything.
    return objective.build_model(build_backbone(bert_config), bert_config, None, 2)


def _chunks(objective, chunk_size):
    return functools.partial(chunked_gradients, objective=objective, global_batch_size=NUM_PAIRS,
                             max_examples=chunk_size)


def test_pass_sizes():
    assert pass_sizes(6, 2) == [2, 2, 2]
    assert pass_sizes(7, 3) == [3, 3, 1]
    assert pass_sizes(2, 5) == [2]
    with pytest.raises(ValueError, match="max_examples_per_pass must be a positive int"):
        pass_sizes(6, 0)


def _gradients(objective, model, batch, chunk_size=0):
    """(loss, gradients) of one eager step: through the objective's loss, or in chunks."""
    if chunk_size:
        loss, _, gradients = _chunks(objective, chunk_size)(model, keras.optimizers.SGD(), batch)
    else:
        with tf.GradientTape() as tape:
            loss, _ = objective.compute_loss(model, batch, True, NUM_PAIRS)
        gradients = tape.gradient(loss, model.trainable_variables)
    return float(loss), [None if g is None else tf.convert_to_tensor(g).numpy() for g in gradients]


def _assert_equal_gradients(actual, expected, atol=1e-5, rtol=1e-4):
    # rtol: float32 sums in another order differ by ~1e-5 relative on gradients near 10 (seen on
    # CI's CPUs), which a bare atol of 1e-5 refused.
    assert [a is None for a in actual] == [e is None for e in expected]
    for a, e in zip(actual, expected):
        if e is not None:
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
    # Not a vacuous match: most weights get gradients far above the tolerance.
    assert np.mean([np.abs(e).max() > 100 * atol for e in expected if e is not None]) > 0.5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dse", "simcse"])
def test_gradients_in_chunks_are_the_whole_batchs(tiny_bert_config, name):
    bert_config = dataclasses.replace(tiny_bert_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    objective = _objective(name)
    model = _model(objective, bert_config)
    batch = _pair_batch(bert_config.vocab_size)
    whole_loss, whole = _gradients(objective, model, batch)
    # 4 + 2 pairs: a last chunk smaller than the others.
    chunked_loss, chunked = _gradients(objective, model, batch, chunk_size=4)
    assert chunked_loss == pytest.approx(whole_loss, abs=1e-6)
    _assert_equal_gradients(chunked, whole)


@pytest.mark.slow
def test_dropout_masks_are_replayed(tiny_bert_config, monkeypatch):
    """SimCSE's positives are its dropout noise: the re-encoded chunks must draw step 1's masks."""
    assert tiny_bert_config.hidden_dropout_prob > 0
    objective = _objective("simcse")
    model = _model(objective, tiny_bert_config)
    batch = _pair_batch(tiny_bert_config.vocab_size)
    state = grad_cache.random_state_variables(model)
    assert state
    start = [v.numpy() for v in state]

    def from_start():
        for variable, value in zip(state, start):
            variable.assign(value)

    # One chunk of the whole batch draws the plain step's masks.
    plain_loss, plain = _gradients(objective, model, batch)
    after_plain = [v.numpy() for v in state]
    from_start()
    one_chunk_loss, one_chunk = _gradients(objective, model, batch, chunk_size=NUM_PAIRS)
    assert one_chunk_loss == pytest.approx(plain_loss, abs=1e-6)
    _assert_equal_gradients(one_chunk, plain)
    # The states end where one pass leaves them: the next step draws fresh masks.
    for value, expected in zip([v.numpy() for v in state], after_plain):
        np.testing.assert_array_equal(value, expected)

    # Three chunks: the exact gradient of the loss of their masks, one tape over all three passes.
    from_start()
    with tf.GradientTape() as tape:
        views = tf.concat([objective.embed(model, {k: v[i:i + 2] for k, v in batch.items()}, True)
                           for i in range(0, NUM_PAIRS, 2)], axis=0)
        reference_loss, _ = objective.loss_of_embeddings(views, NUM_PAIRS)
    reference = [None if g is None else tf.convert_to_tensor(g).numpy()
                 for g in tape.gradient(reference_loss, model.trainable_variables)]
    from_start()
    chunked_loss, chunked = _gradients(objective, model, batch, chunk_size=2)
    assert chunked_loss == pytest.approx(float(reference_loss), abs=1e-6)
    _assert_equal_gradients(chunked, reference)

    # Without the replay the second pass draws other masks, and the gradient is wrong.
    from_start()
    monkeypatch.setattr(grad_cache, "random_state_variables", lambda model_: [])
    _, unreplayed = _gradients(objective, model, batch, chunk_size=2)
    assert max(np.abs(u - r).max() for u, r in zip(unreplayed, reference) if r is not None) > 1e-3


def _one_step(strategy, objective, bert_config, batch, chunk_size):
    """(loss, weights before, weights after) one plain SGD step of `batch` (rate 1: the update is
    the gradient)."""
    with strategy.scope():
        model = _model(objective, bert_config)
        optimizer = keras.optimizers.SGD(learning_rate=1.0)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64)
    before = [v.numpy() for v in model.trainable_variables]

    def step_fn(model_, batch_, training):
        return objective.compute_loss(model_, batch_, training, NUM_PAIRS)

    chunks = _chunks(objective, chunk_size) if chunk_size else None
    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch).repeat()))
    loss, _ = build_train_step(strategy, model, optimizer, step_fn, step, replica_gradients=chunks)(iterator)
    return float(loss), before, [v.numpy() for v in model.trainable_variables]


@pytest.mark.slow
def test_a_train_step_in_chunks_on_two_replicas_updates_as_the_whole_batch(tiny_bert_config):
    bert_config = dataclasses.replace(tiny_bert_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    objective = _objective("simcse")
    batch = _pair_batch(bert_config.vocab_size)
    strategy = create_strategy("mirrored")
    assert strategy.num_replicas_in_sync == 2
    whole_loss, start, whole = _one_step(strategy, objective, bert_config, batch, 0)
    # 3 pairs per replica: chunks of 2 + 1, each replica's loss over all 6 pairs.
    chunked_loss, chunked_start, chunked = _one_step(strategy, objective, bert_config, batch, 2)
    assert chunked_loss == pytest.approx(whole_loss, abs=1e-6)
    for s, t in zip(chunked_start, start):
        np.testing.assert_array_equal(s, t)
    _assert_equal_gradients([a - s for a, s in zip(chunked, start)], [b - t for b, t in zip(whole, start)])


def test_every_objective_splits_its_batch_one_way_and_others_are_refused(tmp_path):
    embedded = {name for name in objective_names() if _objective(name).supports_embedding_chunks()}
    accumulated = {name for name in objective_names() if _objective(name).supports_accumulation()}
    assert embedded == {"dse", "simcse"}
    assert accumulated == set(objective_names()) - embedded
    for name in embedded:
        assert _objective(name).in_batch_negatives

    class WholeBatchOnly(Objective):
        name = "whole_batch_only"

        def compute_loss(self, model, batch, training, global_batch_size):
            raise AssertionError("refused before any step")

    config = stage.TrainConfig(output_dir=str(tmp_path / "run"), max_examples_per_pass=4, num_train_steps=1,
                               train_batch_size=8, learning_rate=1e-5)
    with pytest.raises(ValueError, match="max_examples_per_pass=4: whole_batch_only defines its loss neither"):
        stage.run_stage(WholeBatchOnly(), config)
