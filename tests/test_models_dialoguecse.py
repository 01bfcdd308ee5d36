import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.models import DialogueCSEModel, MatchingGuidedEmbedding, TurnAggregation
from dialoguecse_tf.models.losses import nt_xent_per_example_loss, pair_similarities
from dialoguecse_tf.pooling import masked_mean

B, T, K, L = 3, 3, 4, 8


def _batch(vocab_size, seed=0):
    """A contrastive batch with padded tokens, a missing turn and a context with none."""
    rng = np.random.default_rng(seed)
    context_lengths = rng.integers(2, L + 1, size=(B, T))
    candidate_lengths = rng.integers(2, L + 1, size=(B, K))
    turn_mask = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 0]], np.int32)
    context_lengths[turn_mask == 0] = 0
    context_mask = (np.arange(L) < context_lengths[..., None]).astype(np.int32)
    candidate_mask = (np.arange(L) < candidate_lengths[..., None]).astype(np.int32)
    context_ids = rng.integers(5, vocab_size, size=(B, T, L)).astype(np.int32) * context_mask
    candidate_ids = rng.integers(5, vocab_size, size=(B, K, L)).astype(np.int32) * candidate_mask
    return {
        "context_input_ids": context_ids,
        "context_input_mask": context_mask,
        "context_turn_mask": turn_mask,
        "candidate_input_ids": candidate_ids,
        "candidate_input_mask": candidate_mask,
    }


def _model(config, **kwargs):
    kwargs.setdefault("num_frozen_layers", 1)
    return DialogueCSEModel(config, **kwargs)


def test_outputs_have_the_documented_shapes(tiny_bert_config):
    model = _model(tiny_bert_config)
    outputs = model(_batch(tiny_bert_config.vocab_size))
    assert set(outputs) == {"similarities", "per_example_loss"}
    assert outputs["similarities"].shape == (B, K)
    assert outputs["per_example_loss"].shape == (B,)
    assert np.isfinite(outputs["similarities"].numpy()).all()
    assert np.abs(outputs["similarities"].numpy()).max() <= 1.0 + 1e-6
    assert model.backbone is model.get_layer("bert_backbone")


@pytest.mark.parametrize("graph", [False, True])
def test_backbone_encodes_every_sequence_once_in_one_call(tiny_bert_config, monkeypatch, graph):
    model = _model(tiny_bert_config)
    batch = _batch(tiny_bert_config.vocab_size)
    seen = []
    backbone_call = model.backbone.call

    def spy(inputs, *args, **kwargs):
        seen.append(tuple(inputs["token_ids"].shape))
        if not graph:
            assert not np.asarray(inputs["segment_ids"]).any()
        return backbone_call(inputs, *args, **kwargs)

    monkeypatch.setattr(model.backbone, "call", spy)
    forward = tf.function(model) if graph else model
    forward(batch, training=True)
    assert seen == [(B * T + B * K, L)]


def test_matches_encoding_each_example_on_its_own(tiny_bert_config):
    """The batched concat / split gives what encoding every example separately gives."""
    model = _model(tiny_bert_config, aggregation="attention", attention_hidden_size=6)
    batch = _batch(tiny_bert_config.vocab_size)
    similarities = model(batch)["similarities"].numpy()

    for b in range(B):
        context = model.encode_sequences(batch["context_input_ids"][b], batch["context_input_mask"][b])
        candidates = model.encode_sequences(batch["candidate_input_ids"][b], batch["candidate_input_mask"][b])
        context_free = masked_mean(candidates, batch["candidate_input_mask"][b])
        refined = model.matching(
            context[None], batch["context_input_mask"][b][None],
            candidates[None], batch["candidate_input_mask"][b][None],
        )
        context_aware = model.turn_aggregation(
            refined, batch["context_input_mask"][b][None], batch["context_turn_mask"][b][None]
        )
        expected = pair_similarities(context_free[None], context_aware).numpy()[0]
        np.testing.assert_allclose(similarities[b], expected, atol=1e-5)


def test_per_example_loss_is_nt_xent_of_the_similarities(tiny_bert_config):
    model = _model(tiny_bert_config, temperature=0.05)
    outputs = model(_batch(tiny_bert_config.vocab_size))
    expected = nt_xent_per_example_loss(outputs["similarities"], 0.05)
    np.testing.assert_allclose(outputs["per_example_loss"], expected, rtol=1e-6)
    loss = model.compute_contrastive_loss(_batch(tiny_bert_config.vocab_size))
    assert float(loss) == pytest.approx(float(np.mean(expected)), rel=1e-6)


def test_trainable_weights_follow_freezing_and_aggregation(tiny_bert_config):
    # token, position, segment embeddings + their LayerNorm gamma/beta; 16 per layer.
    embedding_weights, per_layer = 5, 16
    all_trainable = _model(tiny_bert_config, num_frozen_layers=0)
    one_frozen = _model(tiny_bert_config, num_frozen_layers=1)
    assert len(all_trainable.trainable_weights) == embedding_weights + 2 * per_layer
    assert len(one_frozen.trainable_weights) == per_layer
    assert {id(v) for v in one_frozen.trainable_weights} == {
        id(v) for v in one_frozen.backbone.trainable_weights
    }
    assert {v.path.split("/")[0] for v in one_frozen.trainable_weights} == {"transformer_layer_1"}

    attention = _model(tiny_bert_config, num_frozen_layers=1, aggregation="attention", attention_hidden_size=6)
    extra = [v for v in attention.trainable_weights if not v.path.startswith("transformer_layer_")]
    assert len(attention.trainable_weights) == per_layer + 4
    hidden = tiny_bert_config.hidden_size
    assert sorted(tuple(v.shape) for v in extra) == sorted([(hidden, 6), (6,), (6, 1), (1,)])


def test_config_round_trip_gives_the_same_similarities(tiny_bert_config):
    model = _model(tiny_bert_config, aggregation="attention", temperature=0.2, attention_hidden_size=6)
    config = model.get_config()
    assert config["bert_config"] == tiny_bert_config.to_dict()
    assert {key: config[key] for key in ("aggregation", "temperature", "num_frozen_layers", "attention_hidden_size")} == {
        "aggregation": "attention", "temperature": 0.2, "num_frozen_layers": 1, "attention_hidden_size": 6,
    }
    clone = DialogueCSEModel.from_config(config)
    clone.set_weights(model.get_weights())
    batch = _batch(tiny_bert_config.vocab_size)
    np.testing.assert_allclose(clone(batch)["similarities"], model(batch)["similarities"], atol=1e-6)
    assert clone.bert_config == tiny_bert_config
    assert len(clone.trainable_weights) == len(model.trainable_weights)


def test_gradients_reach_unfrozen_layers_only(tiny_bert_config):
    model = _model(tiny_bert_config, aggregation="attention", attention_hidden_size=6)
    frozen = model.backbone.get_layer("transformer_layer_0").weights + model.backbone.get_layer("token_embedding").weights
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([v.value for v in model.trainable_variables])
        loss = model.compute_contrastive_loss(_batch(tiny_bert_config.vocab_size), training=True)
    gradients = tape.gradient(loss, model.trainable_variables + frozen)
    trainable_gradients = gradients[: len(model.trainable_variables)]
    assert all(g is not None and np.isfinite(np.asarray(g)).all() for g in trainable_gradients)
    top_kernel = model.backbone.get_layer("transformer_layer_1")._feedforward_output_dense.kernel
    index = [id(v) for v in model.trainable_variables].index(id(top_kernel))
    assert np.abs(np.asarray(trainable_gradients[index])).max() > 0.0
    assert all(g is None for g in gradients[len(model.trainable_variables):])


def test_a_few_optimizer_steps_lower_the_loss(tiny_bert_config):
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = _model(config, num_frozen_layers=0)
    optimizer = tf.keras.optimizers.Adam(1e-3)
    batch = _batch(config.vocab_size)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = model.compute_contrastive_loss(batch, training=True)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    losses = [float(step()) for _ in range(15)]
    assert losses[-1] < 0.8 * losses[0]


def test_missing_turns_are_ignored_and_give_no_nan(tiny_bert_config):
    model = _model(tiny_bert_config, aggregation="attention", attention_hidden_size=6)
    batch = _batch(tiny_bert_config.vocab_size)
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        loss = tf.reduce_mean(outputs["per_example_loss"])
    gradients = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(outputs["similarities"].numpy()).all()
    assert all(np.isfinite(np.asarray(g)).all() for g in gradients)
    # Example 2 has no valid turn: its context-aware embedding is zero, every cosine 0.
    np.testing.assert_allclose(model(batch)["similarities"][2], 0.0, atol=1e-6)

    # Whatever a missing turn holds, it does not move the result.
    garbage = {key: value.copy() for key, value in batch.items()}
    garbage["context_input_ids"][1, 2] = np.arange(L) + 5
    garbage["context_input_mask"][1, 2] = 1
    np.testing.assert_allclose(model(garbage)["similarities"], model(batch)["similarities"], atol=1e-6)


def test_mirrored_step_matches_a_single_device_step(tiny_bert_config):
    """Per-example losses averaged over the global batch make replicas add up exactly."""
    devices = [d.name for d in tf.config.list_logical_devices("CPU")][:2]
    assert len(devices) == 2, "conftest splits the CPU into two logical devices"
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    batch = _batch(config.vocab_size)

    def sgd_step(model, optimizer, inputs):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            loss = tf.nn.compute_average_loss(outputs["per_example_loss"], global_batch_size=B)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    single = _model(config, aggregation="attention", attention_hidden_size=6)
    # Collective all-reduce keys are per strategy but the collective runtime is per
    # process: a second collective-based strategy in the test process then fails another
    # test's all-reduce with a shape mismatch, so this one reduces without collectives.
    strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        mirrored = _model(config, aggregation="attention", attention_hidden_size=6)
        mirrored_optimizer = tf.keras.optimizers.SGD(0.5)
    mirrored.set_weights(single.get_weights())
    initial = [v.numpy().copy() for v in single.trainable_variables]

    @tf.function
    def mirrored_step(inputs):
        losses = strategy.run(sgd_step, args=(mirrored, mirrored_optimizer, inputs))
        return strategy.reduce("SUM", losses, axis=None)

    dataset = tf.data.Dataset.from_tensor_slices(batch).batch(B)
    mirrored_loss = mirrored_step(next(iter(strategy.experimental_distribute_dataset(dataset))))
    single_loss = tf.function(sgd_step)(single, tf.keras.optimizers.SGD(0.5), batch)

    assert strategy.num_replicas_in_sync == 2
    assert float(mirrored_loss) == pytest.approx(float(single_loss), rel=1e-5)
    for expected, actual in zip(single.trainable_variables, mirrored.trainable_variables):
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), atol=1e-5, err_msg=expected.path)
    assert any(np.abs(v.numpy() - w).max() > 1e-4 for v, w in zip(single.trainable_variables, initial))


@pytest.mark.parametrize(
    "kwargs", [{"temperature": 0.0}, {"num_frozen_layers": 3}, {"aggregation": "sum"}, {"num_length_buckets": 0}]
)
def test_rejects_bad_hyperparameters(tiny_bert_config, kwargs):
    with pytest.raises(ValueError):
        DialogueCSEModel(tiny_bert_config, **{"num_frozen_layers": 1, **kwargs})


def test_accepts_the_config_as_a_dict(tiny_bert_config):
    model = DialogueCSEModel(tiny_bert_config.to_dict(), num_frozen_layers=2)
    assert model.bert_config == tiny_bert_config
    assert model.trainable_weights == []
    assert isinstance(model.matching, MatchingGuidedEmbedding)
    assert isinstance(model.turn_aggregation, TurnAggregation)


@pytest.mark.parametrize("graph", [False, True])
def test_length_buckets_give_the_same_loss_and_gradients(tiny_bert_config, graph):
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    plain = _model(config, aggregation="attention", attention_hidden_size=6)
    bucketed = _model(config, aggregation="attention", attention_hidden_size=6, num_length_buckets=4)
    bucketed.set_weights(plain.get_weights())
    batch = _batch(config.vocab_size)

    def loss_and_gradients(model):
        with tf.GradientTape() as tape:
            loss = model.compute_contrastive_loss(batch, training=True)
        return loss, tape.gradient(loss, model.trainable_variables)

    run = tf.function(loss_and_gradients) if graph else loss_and_gradients
    plain_loss, plain_gradients = run(plain)
    bucketed_loss, bucketed_gradients = run(bucketed)
    assert float(bucketed_loss) == pytest.approx(float(plain_loss), abs=1e-5)
    for expected, got in zip(plain_gradients, bucketed_gradients):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-5)
    assert bucketed.get_config()["num_length_buckets"] == 4


def test_length_buckets_cut_each_group_to_its_longest_sequence(tiny_bert_config, monkeypatch):
    model = _model(tiny_bert_config, num_length_buckets=3)
    ids = np.ones((6, L), np.int32)
    mask = (np.arange(L) < np.array([[1], [8], [2], [3], [8], [4]])).astype(np.int32)
    seen = []
    backbone_call = model.backbone.call

    def spy(inputs, *args, **kwargs):
        seen.append(tuple(inputs["token_ids"].shape))
        return backbone_call(inputs, *args, **kwargs)

    monkeypatch.setattr(model.backbone, "call", spy)
    encoded = model.encode_sequences(ids, mask).numpy()
    assert seen == [(2, 2), (2, 4), (2, 8)]
    assert encoded.shape == (6, L, tiny_bert_config.hidden_size)
    group_lengths = np.array([2, 8, 2, 4, 8, 4])
    beyond_group = np.arange(L) >= group_lengths[:, None]
    assert not encoded[beyond_group].any() and np.abs(encoded[~beyond_group]).sum(-1).min() > 0
    plain = _model(tiny_bert_config)
    plain.set_weights(model.get_weights())
    np.testing.assert_allclose(encoded[mask == 1], plain.encode_sequences(ids, mask).numpy()[mask == 1], atol=1e-5)
