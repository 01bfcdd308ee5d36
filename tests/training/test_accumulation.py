"""Gradient accumulation (`training.accumulation`): a batch of a loss summed over examples, run
through the model a few examples at a time, gives the whole batch's loss, metrics and gradient,
with parts of unequal sizes and (MLM) examples of unequal weights, some weighing nothing."""

import dataclasses
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.objectives.dial2vec import Dial2vecObjective, Dial2vecOptions
from dialoguecse_tf.objectives.dialoguecse import DialogueCSEObjective, DialogueCSEOptions
from dialoguecse_tf.objectives.mlm import MlmObjective, MlmOptions
from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK)
from dialoguecse_tf.records.dialogues import (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK, DIALOGUE_ROLE_IDS,
                                              DIALOGUE_TURN_IDS)
from dialoguecse_tf.records.mlm import (INPUT_IDS, INPUT_MASK, MASKED_LM_IDS, MASKED_LM_POSITIONS, MASKED_LM_WEIGHTS,
                                        SEGMENT_IDS)
from dialoguecse_tf.training.accumulation import accumulated_gradients
from dial2vec_batches import random_batch

# 5 examples in passes of 2: 2 + 2 + 1.
BATCH, MAX_EXAMPLES, LENGTH = 5, 2, 12


def _ids(rng, vocab_size, mask):
    return tf.constant(rng.integers(5, vocab_size, size=mask.shape) * mask)


def _dial2vec(vocab_size, rng):
    mask, roles, turns = random_batch(rng, BATCH, 3, LENGTH)
    batch = {DIALOGUE_INPUT_IDS: _ids(rng, vocab_size, mask), DIALOGUE_INPUT_MASK: tf.constant(mask),
             DIALOGUE_ROLE_IDS: tf.constant(roles), DIALOGUE_TURN_IDS: tf.constant(turns)}
    return Dial2vecObjective(Dial2vecOptions(num_negatives=2, num_frozen_layers=1)), batch


def _dialoguecse(vocab_size, rng):
    # The released variant (the paper presets'): 2 turns on each side, some of them missing.
    turn_mask = rng.integers(0, 2, size=(BATCH, 4))
    context_mask = (np.arange(LENGTH) < rng.integers(2, LENGTH + 1, size=(BATCH, 4, 1))) * turn_mask[..., None]
    candidate_mask = (np.arange(LENGTH) < rng.integers(2, LENGTH + 1, size=(BATCH, 3, 1))).astype(np.int64)
    batch = {CONTEXT_INPUT_IDS: _ids(rng, vocab_size, context_mask), CONTEXT_INPUT_MASK: tf.constant(context_mask),
             CONTEXT_TURN_MASK: tf.constant(turn_mask), CANDIDATE_INPUT_IDS: _ids(rng, vocab_size, candidate_mask),
             CANDIDATE_INPUT_MASK: tf.constant(candidate_mask)}
    options = DialogueCSEOptions(num_context_turns=2, num_negatives=2, num_frozen_layers=1, attention_hidden_size=8)
    return DialogueCSEObjective(options), batch


def _mlm(vocab_size, rng):
    # Masked positions per sequence 3, 1, 0, 2, 3: the mean is over the batch's 9 masked tokens.
    weights = (np.arange(3) < np.array([3, 1, 0, 2, 3])[:, None]).astype(np.float32)
    mask = np.ones((BATCH, LENGTH), np.int64)
    batch = {INPUT_IDS: _ids(rng, vocab_size, mask), INPUT_MASK: tf.constant(mask),
             SEGMENT_IDS: tf.zeros((BATCH, LENGTH), tf.int64),
             MASKED_LM_POSITIONS: tf.constant(rng.integers(1, LENGTH, size=(BATCH, 3))),
             MASKED_LM_IDS: tf.constant(rng.integers(5, vocab_size, size=(BATCH, 3))),
             MASKED_LM_WEIGHTS: tf.constant(weights)}
    return MlmObjective(MlmOptions(max_predictions_per_seq=3)), batch


def _dense(gradients):
    return [None if g is None else tf.convert_to_tensor(g).numpy() for g in gradients]


def _assert_equal_gradients(actual, expected):
    """Equal to 1e-5 of the largest gradient (weights like the attention key's bias have only
    rounding noise for a gradient), and to 1e-4 of each entry."""
    assert [a is None for a in actual] == [e is None for e in expected]
    scale = max(np.abs(e).max() for e in expected if e is not None)
    assert scale > 0
    for a, e in zip(actual, expected):
        if e is not None:
            np.testing.assert_allclose(a, e, rtol=1e-4, atol=1e-5 * scale)


# MLM's case stays in the fast tier: the other two cost seconds each.
@pytest.mark.parametrize("make", [pytest.param(_dial2vec, marks=pytest.mark.slow),
                                  pytest.param(_dialoguecse, marks=pytest.mark.slow), _mlm],
                         ids=["dial2vec", "dialoguecse", "mlm"])
def test_a_batch_in_passes_gives_the_whole_batchs_loss_metrics_and_gradient(tiny_bert_config, make):
    bert_config = dataclasses.replace(tiny_bert_config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    # Batches already at the shape the options read (prepare_batch's output).
    objective, batch = make(bert_config.vocab_size, np.random.default_rng(0))
    keras.utils.set_random_seed(7)
    # DialogueCSE as released fills padding rounds with "[CLS] [SEP]": the ids of the tiny vocabulary's.
    tokenizer = types.SimpleNamespace(cls_id=2, sep_id=3)
    model = objective.build_model(build_backbone(bert_config), bert_config, tokenizer, 2)
    # The global batch is twice this replica's: the loss is this replica's share of it.
    global_batch_size = 2 * BATCH
    with tf.GradientTape() as tape:
        whole_loss, whole_metrics = objective.compute_loss(model, batch, True, global_batch_size)
    whole = _dense(tape.gradient(whole_loss, model.trainable_variables))

    loss, metrics, gradients = accumulated_gradients(model, keras.optimizers.SGD(), batch, objective,
                                                     global_batch_size, MAX_EXAMPLES)
    assert float(loss) == pytest.approx(float(whole_loss), abs=1e-6)
    assert metrics.keys() == whole_metrics.keys()
    for name, value in whole_metrics.items():
        assert float(metrics[name]) == pytest.approx(float(value), abs=1e-6), name
    _assert_equal_gradients(_dense(gradients), whole)

    if isinstance(objective, MlmObjective):
        # Each pass's own masked-token mean, summed, is another loss: the whole batch's denominator matters.
        own_means = sum(float(objective.compute_loss(model, {k: v[i:i + MAX_EXAMPLES] for k, v in batch.items()},
                                                     True, global_batch_size)[0]) for i in range(0, BATCH, MAX_EXAMPLES))
        assert abs(own_means - float(whole_loss)) > 0.1
