import math

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.losses import (
    gather_across_replicas,
    global_mean,
    global_weighted_mean,
    masked_lm_per_token_loss,
    nt_xent_loss,
    nt_xent_per_example_loss,
    pair_similarities,
    ranking_per_example_loss,
)


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


def _log_softmax(logits):
    logits = logits - logits.max(axis=-1, keepdims=True)
    return logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))


def test_ranking_loss_is_cross_entropy_with_the_positive_first():
    scores = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32) * 3.0
    np.testing.assert_allclose(ranking_per_example_loss(scores), -_log_softmax(scores)[:, 0], rtol=1e-5)
    # Huge scores stay finite: a confident right ranking costs ~0, a confident wrong one its margin.
    huge = ranking_per_example_loss(tf.constant([[1e4, -1e4], [-1e4, 1e4]]))
    np.testing.assert_allclose(huge, [0.0, 2e4], rtol=1e-6, atol=1e-6)


def test_masked_lm_loss_is_per_position_cross_entropy_in_float32():
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(2, 3, 11)).astype(np.float32)
    labels = rng.integers(0, 11, size=(2, 3)).astype(np.int32)
    expected = -np.take_along_axis(_log_softmax(logits), labels[..., None], axis=-1)[..., 0]
    per_token = masked_lm_per_token_loss(labels, logits)
    assert per_token.shape == (2, 3)
    np.testing.assert_allclose(per_token, expected, rtol=1e-5)
    # float16 logits (mixed precision) are cross-entropied in float32.
    half = masked_lm_per_token_loss(labels, tf.constant(logits, tf.float16))
    assert half.dtype == tf.float32
    np.testing.assert_allclose(half, expected, atol=5e-3)


def _two_replicas():
    devices = [d.name for d in tf.config.list_logical_devices("CPU")][:2]
    assert len(devices) == 2, "conftest splits the CPU into two logical devices"
    # Without collectives: a second collective-based strategy in the test process breaks others' all-reduces.
    return tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())


def _per_replica(strategy, halves):
    return strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant(halves[context.replica_id_in_sync_group]))


def test_global_means_on_one_device_are_plain_means():
    values = tf.constant([1.0, 2.0, 6.0, 3.0])
    weights = tf.constant([1.0, 0.0, 1.0, 2.0])
    assert float(global_mean(values, 4)) == pytest.approx(3.0)
    # Divided by the global batch size, not by the examples at hand.
    assert float(global_mean(values[:2], 4)) == pytest.approx(0.75)
    assert float(global_weighted_mean(values, weights)) == pytest.approx((1.0 + 6.0 + 6.0) / 4.0)
    assert float(global_weighted_mean(values, tf.zeros(4))) == 0.0


def test_replica_shares_of_the_global_means_add_up_to_one_devices_mean():
    strategy = _two_replicas()
    values = np.array([1.0, 2.0, 6.0, 3.0, 5.0], np.float32)
    weights = np.array([1.0, 0.0, 1.0, 2.0, 3.0], np.float32)
    # Uneven shares of the weights: a per-replica mean averaged over replicas would differ.
    value_halves, weight_halves = (values[:2], values[2:4]), (weights[:2], weights[2:4])

    def shares(local_values, local_weights):
        return global_mean(local_values, 4), global_weighted_mean(local_values, local_weights)

    mean_shares, weighted_shares = strategy.run(
        shares, args=(_per_replica(strategy, value_halves), _per_replica(strategy, weight_halves)))
    assert strategy.num_replicas_in_sync == 2
    assert float(strategy.reduce("SUM", mean_shares, axis=None)) == pytest.approx(values[:4].mean())
    expected = float((values[:4] * weights[:4]).sum() / weights[:4].sum())
    assert float(strategy.reduce("SUM", weighted_shares, axis=None)) == pytest.approx(expected)
    local = [float(share) for share in strategy.experimental_local_results(weighted_shares)]
    assert local == pytest.approx([1.0 / 4.0, (6.0 + 6.0) / 4.0])


def test_gather_across_replicas_puts_every_replica_in_order_and_keeps_local_gradients():
    tensor = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    assert gather_across_replicas(tensor)[0] is tensor and gather_across_replicas(tensor)[1] == 0

    strategy = _two_replicas()
    halves = (np.array([[1.0], [2.0]], np.float32), np.array([[3.0], [4.0]], np.float32))

    @tf.function
    def gather(local):
        def replica_fn(local):
            with tf.GradientTape() as tape:
                tape.watch(local)
                gathered, offset = gather_across_replicas(local)
                # Every row weighted differently: the gradient shows which rows reach `local`.
                loss = tf.reduce_sum(gathered[:, 0] * tf.constant([1.0, 10.0, 100.0, 1000.0]))
            return gathered, offset, tape.gradient(loss, local)

        return strategy.run(replica_fn, args=(local,))

    gathered, offsets, gradients = gather(_per_replica(strategy, halves))
    for replica in range(2):
        np.testing.assert_array_equal(strategy.experimental_local_results(gathered)[replica],
                                      [[1.0], [2.0], [3.0], [4.0]])
    assert [int(offset) for offset in strategy.experimental_local_results(offsets)] == [0, 2]
    np.testing.assert_array_equal(strategy.experimental_local_results(gradients)[0], [[1.0], [10.0]])
    np.testing.assert_array_equal(strategy.experimental_local_results(gradients)[1], [[100.0], [1000.0]])
