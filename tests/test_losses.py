import math

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.losses import (
    dse_per_anchor_loss,
    example_means,
    gather_across_replicas,
    masked_lm_per_token_loss,
    mean_denominators,
    nt_xent_loss,
    nt_xent_per_example_loss,
    pair_similarities,
    ranking_per_example_loss,
    replica_share_of_global_loss,
    simcse_per_anchor_loss,
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


def _means(terms, weights, global_batch_size):
    loss, metrics = example_means(terms, {"metric": 2 * terms},
                                  mean_denominators(weights, tf.shape(terms)[0], global_batch_size))
    return float(loss), float(metrics["metric"])


def test_example_means_on_one_device_are_plain_means():
    terms = tf.constant([1.0, 2.0, 6.0, 3.0])
    assert _means(terms, None, 4) == pytest.approx((3.0, 6.0))
    # The loss is divided by the global batch size, not by the examples at hand; the metrics by these.
    assert _means(terms[:2], None, 4) == pytest.approx((0.75, 3.0))
    # Weighted: terms are weight x value, divided by the weights' sum (4).
    weights = tf.constant([1.0, 0.0, 1.0, 2.0])
    assert _means(terms * weights, weights, 4) == pytest.approx(((1.0 + 6.0 + 6.0) / 4.0, (2.0 + 12.0 + 12.0) / 4.0))
    assert _means(tf.zeros(4), tf.zeros(4), 4) == (0.0, 0.0)


def test_replica_shares_of_the_global_means_add_up_to_one_devices_mean():
    strategy = _two_replicas()
    values = np.array([1.0, 2.0, 6.0, 3.0, 5.0], np.float32)
    weights = np.array([1.0, 0.0, 1.0, 2.0, 3.0], np.float32)
    # Uneven shares of the weights: a per-replica mean averaged over replicas would differ.
    value_halves, weight_halves = (values[:2], values[2:4]), (weights[:2], weights[2:4])

    def shares(local_values, local_weights):
        mean = example_means(local_values, {}, mean_denominators(None, 2, 4))[0]
        weighted, metrics = example_means(local_values * local_weights, {"metric": local_values * local_weights},
                                          mean_denominators(local_weights, 2, 4))
        return mean, weighted, metrics["metric"]

    mean_shares, weighted_shares, metric_shares = strategy.run(
        shares, args=(_per_replica(strategy, value_halves), _per_replica(strategy, weight_halves)))
    assert strategy.num_replicas_in_sync == 2
    assert float(strategy.reduce("SUM", mean_shares, axis=None)) == pytest.approx(values[:4].mean())
    expected = float((values[:4] * weights[:4]).sum() / weights[:4].sum())
    assert float(strategy.reduce("SUM", weighted_shares, axis=None)) == pytest.approx(expected)
    local = [float(share) for share in strategy.experimental_local_results(weighted_shares)]
    assert local == pytest.approx([1.0 / 4.0, (6.0 + 6.0) / 4.0])
    # Metrics are replica-local means: each replica's own weights.
    local = [float(share) for share in strategy.experimental_local_results(metric_shares)]
    assert local == pytest.approx([1.0, (6.0 + 6.0) / 3.0])


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


def _numpy_dse_loss(first, second, temperature, contrast_type):
    """The release's HardConLoss (contrastive_utils.py), line by line, in float64."""
    batch = first.shape[0]
    features = np.concatenate([first, second], axis=0)
    mask = ~np.tile(np.eye(batch, dtype=bool), (2, 2))
    pos = np.exp(np.sum(first * second, axis=-1) / temperature)
    pos = np.concatenate([pos, pos])
    neg = np.exp(features @ features.T / temperature)[mask].reshape(2 * batch, -1)
    if contrast_type == "Orig":
        negative_mass = neg.sum(axis=-1)
    else:
        imp = neg  # neg.log().exp()
        negative_mass = (imp * neg).sum(axis=-1) / imp.mean(axis=-1)
    return -np.log(pos / (negative_mass + pos))


def _unit_rows(rng, n, d):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("contrast_type", ["HardNeg", "Orig"])
def test_dse_loss_matches_the_released_arithmetic_in_value_and_gradient(contrast_type):
    rng = np.random.default_rng(3)
    first, second = _unit_rows(rng, 5, 8), _unit_rows(rng, 5, 8)
    temperature = 0.3
    expected = _numpy_dse_loss(first, second, temperature, contrast_type)
    a, b = tf.constant(first), tf.constant(second)
    with tf.GradientTape() as tape:
        tape.watch([a, b])
        per_anchor = dse_per_anchor_loss(a, b, temperature, contrast_type)
        loss = tf.reduce_mean(per_anchor)
    np.testing.assert_allclose(per_anchor.numpy(), expected, rtol=1e-10)
    # Central differences of the NumPy loss: alpha is differentiated through, as in the release.
    grad_first, _ = tape.gradient(loss, [a, b])
    numeric = np.zeros_like(first)
    for index in np.ndindex(first.shape):
        step = np.zeros_like(first)
        step[index] = 1e-6
        numeric[index] = (_numpy_dse_loss(first + step, second, temperature, contrast_type).mean()
                          - _numpy_dse_loss(first - step, second, temperature, contrast_type).mean()) / 2e-6
    np.testing.assert_allclose(grad_first.numpy(), numeric, rtol=1e-5, atol=1e-8)


def test_hard_negative_loss_bounds_the_plain_one_and_stays_finite_at_dse_temperature():
    rng = np.random.default_rng(4)
    # Near-identical texts at tau 0.05: exp(2 * 20) is where the release's plain exp is closest to overflow.
    first = _unit_rows(rng, 6, 4) * 0.01 + np.array([1.0, 0, 0, 0])
    first /= np.linalg.norm(first, axis=-1, keepdims=True)
    second = first[::-1].copy()
    hard = dse_per_anchor_loss(tf.constant(first, tf.float32), tf.constant(second, tf.float32), 0.05, "HardNeg")
    plain = dse_per_anchor_loss(tf.constant(first, tf.float32), tf.constant(second, tf.float32), 0.05, "Orig")
    assert np.isfinite(hard.numpy()).all()
    # Cauchy-Schwarz: sum(n^2) / mean(n) >= sum(n).
    assert (hard.numpy() >= plain.numpy() - 1e-5).all()
    np.testing.assert_allclose(hard.numpy(), _numpy_dse_loss(first, second, 0.05, "HardNeg"), rtol=1e-4)


def test_dse_loss_rejects_bad_settings():
    pair = tf.constant([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="contrast_type"):
        dse_per_anchor_loss(pair, pair, 0.05, "hardneg")
    with pytest.raises(ValueError, match="temperature"):
        dse_per_anchor_loss(pair, pair, 0.0)


def test_replica_shares_of_a_gathered_in_batch_loss_give_one_device_value_and_gradients():
    rng = np.random.default_rng(5)
    first, second = _unit_rows(rng, 4, 6).astype(np.float32), _unit_rows(rng, 4, 6).astype(np.float32)
    a, b = tf.constant(first), tf.constant(second)
    with tf.GradientTape() as tape:
        tape.watch([a, b])
        loss = tf.reduce_mean(dse_per_anchor_loss(a, b, 0.1))
    expected_gradients = tape.gradient(loss, [a, b])
    assert replica_share_of_global_loss(loss) is loss

    strategy = _two_replicas()

    @tf.function
    def shares(local_first, local_second):
        def replica_fn(local_first, local_second):
            with tf.GradientTape() as tape:
                tape.watch([local_first, local_second])
                gathered_first, _ = gather_across_replicas(local_first)
                gathered_second, _ = gather_across_replicas(local_second)
                share = replica_share_of_global_loss(
                    tf.reduce_mean(dse_per_anchor_loss(gathered_first, gathered_second, 0.1)))
            return share, tape.gradient(share, [local_first, local_second])

        return strategy.run(replica_fn, args=(local_first, local_second))

    share, gradients = shares(_per_replica(strategy, (first[:2], first[2:])),
                              _per_replica(strategy, (second[:2], second[2:])))
    assert float(strategy.reduce("SUM", share, axis=None)) == pytest.approx(float(loss), rel=1e-6)
    for side in range(2):
        local = [g.numpy() for g in strategy.experimental_local_results(gradients[side])]
        np.testing.assert_allclose(np.concatenate(local), expected_gradients[side].numpy(), rtol=1e-5, atol=1e-7)


def test_bfloat16_inputs_are_compared_in_float32():
    """Similarities, logits over a temperature and losses in float32, whatever the model computes
    in: given bfloat16 embeddings (the values rounded to bfloat16 already), every loss equals the
    float32 loss of the same rounded values."""
    rng = np.random.default_rng(7)
    vectors = {name: tf.cast(tf.constant(rng.normal(size=shape), tf.float32), tf.bfloat16)
               for name, shape in {"free": (3, 4, 8), "aware": (3, 4, 8), "first": (5, 8), "second": (5, 8)}.items()}
    rounded = {name: tf.cast(value, tf.float32) for name, value in vectors.items()}
    similarities = pair_similarities(vectors["free"], vectors["aware"])
    assert similarities.dtype == tf.float32
    np.testing.assert_allclose(similarities, pair_similarities(rounded["free"], rounded["aware"]), rtol=1e-6)
    half_similarities = tf.cast(similarities, tf.bfloat16)
    for loss, expected in [
        (nt_xent_per_example_loss(half_similarities, 0.05),
         nt_xent_per_example_loss(tf.cast(half_similarities, tf.float32), 0.05)),
        (ranking_per_example_loss(half_similarities), ranking_per_example_loss(tf.cast(half_similarities, tf.float32))),
        (dse_per_anchor_loss(vectors["first"], vectors["second"], 0.05),
         dse_per_anchor_loss(rounded["first"], rounded["second"], 0.05)),
        (simcse_per_anchor_loss(vectors["first"], vectors["second"], 0.05),
         simcse_per_anchor_loss(rounded["first"], rounded["second"], 0.05)),
    ]:
        assert loss.dtype == tf.float32
        np.testing.assert_allclose(loss, expected, rtol=1e-6)
