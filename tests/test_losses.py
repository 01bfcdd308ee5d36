import math

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.models.losses import nt_xent_loss, nt_xent_per_example_loss, pair_similarities


def _numpy_loss(context_free, context_aware, temperature):
    def unit(x):
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    sim = np.sum(unit(context_free) * unit(context_aware), axis=-1)
    logits = sim / temperature
    log_softmax = logits - np.log(np.sum(np.exp(logits), axis=-1, keepdims=True))
    return sim, -log_softmax[:, 0]


def test_two_candidate_case_by_hand():
    # Pair 0 is parallel (cosine 1), pair 1 orthogonal (cosine 0), whatever the norms.
    context_free = np.array([[[1.0, 0.0], [1.0, 0.0]]], np.float32)
    context_aware = np.array([[[2.0, 0.0], [0.0, 3.0]]], np.float32)
    np.testing.assert_allclose(pair_similarities(context_free, context_aware), [[1.0, 0.0]], atol=1e-6)
    # -log(e^2 / (e^2 + e^0)) with tau = 0.5
    expected = math.log(1.0 + math.exp(-2.0))
    assert float(nt_xent_loss(context_free, context_aware, 0.5)) == pytest.approx(expected, rel=1e-6)


def test_matches_numpy_reference():
    rng = np.random.default_rng(0)
    context_free = rng.normal(size=(4, 5, 16)).astype(np.float32)
    context_aware = rng.normal(size=(4, 5, 16)).astype(np.float32) * 7.0
    sim, per_example = _numpy_loss(context_free, context_aware, 0.1)

    similarities = pair_similarities(context_free, context_aware)
    np.testing.assert_allclose(similarities, sim, atol=1e-6)
    np.testing.assert_allclose(nt_xent_per_example_loss(similarities, 0.1), per_example, rtol=1e-5)
    assert float(nt_xent_loss(context_free, context_aware, 0.1)) == pytest.approx(per_example.mean(), rel=1e-5)


def test_temperature_sharpens_the_softmax():
    similarities = tf.constant([[0.9, 0.1, -0.3]])
    losses = [float(nt_xent_per_example_loss(similarities, tau)[0]) for tau in (1.0, 0.5, 0.2)]
    # With the positive the most similar, a lower temperature makes it more certain.
    assert losses[0] > losses[1] > losses[2] > 0.0
    assert losses[0] == pytest.approx(-np.log(np.exp(0.9) / np.exp([0.9, 0.1, -0.3]).sum()), rel=1e-5)
    flipped = tf.constant([[-0.3, 0.1, 0.9]])
    assert float(nt_xent_per_example_loss(flipped, 0.01)[0]) > 100.0


def test_extreme_logits_and_zero_vectors_stay_finite():
    context_free = tf.constant(np.random.default_rng(1).normal(size=(2, 3, 4)), tf.float32)
    context_aware = tf.Variable(np.zeros((2, 3, 4), np.float32))
    with tf.GradientTape() as tape:
        loss = nt_xent_loss(context_free, context_aware, 1e-4)
    gradient = tape.gradient(loss, context_aware)
    assert float(loss) == pytest.approx(math.log(3.0), rel=1e-6)
    assert np.isfinite(gradient.numpy()).all()
    huge = nt_xent_per_example_loss(tf.constant([[1.0, -1.0], [-1.0, 1.0]]), 1e-6)
    np.testing.assert_allclose(huge, [0.0, 2e6], rtol=1e-6)


def test_rejects_non_positive_temperature():
    with pytest.raises(ValueError):
        nt_xent_per_example_loss(tf.zeros((1, 2)), 0.0)
