import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf import losses
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.models import DialogueCSEModel, MatchingGuidedEmbedding, TurnAggregation
from dialoguecse_tf.objectives.dialoguecse import DialogueCSEObjective, DialogueCSEOptions
from harness import run_serialization_test
from tiny_dialoguecse import B, K, L, T, contrastive_batch, dialoguecse_model


def _similarities(outputs):
    return losses.pair_similarities(outputs["context_free"], outputs["context_aware"])


def _loss(model, batch, training=False, temperature=0.1):
    """Eq. 8 on one device: the batch mean of NT-Xent over the model's cosines."""
    outputs = model(batch, training=training)
    return losses.nt_xent_loss(outputs["context_free"], outputs["context_aware"], temperature)


def test_outputs_have_the_documented_shapes(tiny_bert_config):
    model = dialoguecse_model(tiny_bert_config)
    batch = contrastive_batch(tiny_bert_config.vocab_size)
    outputs = model(batch)
    assert set(outputs) == {"context_free", "context_aware"}
    for name in ("context_free", "context_aware"):
        assert outputs[name].shape == (B, K, tiny_bert_config.hidden_size), name
        assert outputs[name].dtype == "float32" and np.isfinite(outputs[name].numpy()).all(), name
    similarities = _similarities(outputs).numpy()
    assert np.isfinite(similarities).all() and np.abs(similarities).max() <= 1.0 + 1e-6
    # The context-free embedding is each candidate's mean-pooled BERT output.
    tokens = model.encode_sequences(batch["candidate_input_ids"].reshape(B * K, L),
                                    batch["candidate_input_mask"].reshape(B * K, L))
    expected = masked_mean(tokens, batch["candidate_input_mask"].reshape(B * K, L)).numpy().reshape(B, K, -1)
    np.testing.assert_allclose(outputs["context_free"], expected, atol=1e-5)
    assert model.backbone is model.get_layer("bert_backbone")


def test_wraps_the_backbone_it_is_given(tiny_bert_config):
    backbone = build_backbone(tiny_bert_config)
    model = DialogueCSEModel(backbone)
    assert model.backbone is backbone
    # Freezing is the objective's business: the model alone leaves every backbone weight trainable.
    assert {id(v) for v in backbone.trainable_weights} <= {id(v) for v in model.trainable_weights}
    assert len(model.trainable_weights) == len(backbone.trainable_weights) == len(backbone.weights)


@pytest.mark.parametrize("graph", [False, True])
def test_backbone_encodes_every_sequence_once_in_one_call(tiny_bert_config, monkeypatch, graph):
    model = dialoguecse_model(tiny_bert_config)
    batch = contrastive_batch(tiny_bert_config.vocab_size)
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
    model = dialoguecse_model(tiny_bert_config, aggregation="attention", attention_hidden_size=6)
    batch = contrastive_batch(tiny_bert_config.vocab_size)
    outputs = model(batch)

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
        np.testing.assert_allclose(outputs["context_free"][b], context_free, atol=1e-5)
        np.testing.assert_allclose(outputs["context_aware"][b], context_aware[0], atol=1e-5)
        expected = losses.pair_similarities(context_free[None], context_aware).numpy()[0]
        np.testing.assert_allclose(_similarities(outputs)[b], expected, atol=1e-5)


# The paper's eq. 8 per example; the released code's mean over the B x K entries is it divided by K.
@pytest.mark.parametrize("variant, scale", [("paper_text", 1.0), ("released", 1.0 / K)])
def test_objective_loss_is_nt_xent_of_the_similarities(tiny_bert_config, variant, scale):
    objective = DialogueCSEObjective(DialogueCSEOptions(temperature=0.05, variant=variant))
    model = dialoguecse_model(tiny_bert_config)
    batch = contrastive_batch(tiny_bert_config.vocab_size)
    similarities = _similarities(model(batch))
    expected = losses.nt_xent_per_example_loss(similarities, 0.05)
    loss, metrics = objective.compute_loss(model, batch, False, B)
    assert float(loss) == pytest.approx(scale * float(np.mean(expected)), rel=1e-6)
    assert float(_loss(model, batch, temperature=0.05)) == pytest.approx(float(np.mean(expected)), rel=1e-6)
    similarities = similarities.numpy()
    # Strictly first: the context without turns scores every candidate alike, which is no win.
    assert float(metrics["positive_ranked_first"]) == pytest.approx(
        np.mean(similarities[:, 0] > similarities[:, 1:].max(-1)))
    assert float(metrics["positive_cosine"]) == pytest.approx(similarities[:, 0].mean(), abs=1e-6)
    assert float(metrics["negative_cosine"]) == pytest.approx(similarities[:, 1:].mean(), abs=1e-6)
    assert float(metrics["cosine_gap"]) == pytest.approx(similarities[:, 0].mean() - similarities[:, 1:].mean(),
                                                         abs=1e-6)


def test_trainable_weights_follow_freezing_and_aggregation(tiny_bert_config):
    # token, position, segment embeddings + their LayerNorm gamma/beta; 16 per layer.
    embedding_weights, per_layer = 5, 16
    all_trainable = dialoguecse_model(tiny_bert_config, num_frozen_layers=0)
    one_frozen = dialoguecse_model(tiny_bert_config, num_frozen_layers=1)
    # The [CLS] pooler, which no loss term reaches, is frozen whatever num_frozen_layers says.
    assert len(all_trainable.trainable_weights) == embedding_weights + 2 * per_layer
    assert len(one_frozen.trainable_weights) == per_layer
    assert {id(v) for v in one_frozen.trainable_weights} == {
        id(v) for v in one_frozen.backbone.trainable_weights
    }
    assert {v.path.split("/")[0] for v in one_frozen.trainable_weights} == {"transformer_layer_1"}

    attention = dialoguecse_model(tiny_bert_config, num_frozen_layers=1, aggregation="attention",
                                  attention_hidden_size=6)
    extra = [v for v in attention.trainable_weights if not v.path.startswith("transformer_layer_")]
    assert len(attention.trainable_weights) == per_layer + 4
    hidden = tiny_bert_config.hidden_size
    assert sorted(tuple(v.shape) for v in extra) == sorted([(hidden, 6), (6,), (6, 1), (1,)])


# keras-hub's BertBackbone config holds neither the activation nor the LayerNorm epsilon that
# `build_backbone` sets from the BertConfig, so models store the whole BertConfig instead.
@pytest.mark.parametrize("numerics", [{}, {"hidden_act": "gelu_exact", "layer_norm_eps": 1e-3}])
def test_config_round_trip_gives_the_same_embeddings(tiny_bert_config, numerics):
    bert_config = tiny_bert_config.replace(**numerics)
    model = dialoguecse_model(bert_config, num_length_buckets=2, aggregation="attention", attention_hidden_size=6)
    config = model.get_config()
    assert config["backbone"]["bert_config"] == bert_config.to_dict()
    assert {key: config[key] for key in ("aggregation", "attention_hidden_size", "num_length_buckets")} == {
        "aggregation": "attention", "attention_hidden_size": 6, "num_length_buckets": 2,
    }
    clone = run_serialization_test(model, (contrastive_batch(bert_config.vocab_size),))
    assert clone.backbone.get_config() == model.backbone.get_config()
    assert len(clone.weights) == len(model.weights)
    # Freezing is not part of the model's config: the objective applies it to what it builds.
    assert len(clone.trainable_weights) == len(clone.weights)


def test_gradients_reach_unfrozen_layers_only(tiny_bert_config):
    model = dialoguecse_model(tiny_bert_config, aggregation="attention", attention_hidden_size=6)
    frozen = model.backbone.get_layer("transformer_layer_0").weights + model.backbone.get_layer("token_embedding").weights
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([v.value for v in model.trainable_variables])
        loss = _loss(model, contrastive_batch(tiny_bert_config.vocab_size), training=True)
    gradients = tape.gradient(loss, model.trainable_variables + frozen)
    trainable_gradients = gradients[: len(model.trainable_variables)]
    assert all(g is not None and np.isfinite(np.asarray(g)).all() for g in trainable_gradients)
    top_kernel = model.backbone.get_layer("transformer_layer_1")._feedforward_output_dense.kernel
    index = [id(v) for v in model.trainable_variables].index(id(top_kernel))
    assert np.abs(np.asarray(trainable_gradients[index])).max() > 0.0
    assert all(g is None for g in gradients[len(model.trainable_variables):])


def test_a_few_optimizer_steps_lower_the_loss(tiny_bert_config):
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = dialoguecse_model(config, num_frozen_layers=0)
    optimizer = tf.keras.optimizers.Adam(1e-3)
    batch = contrastive_batch(config.vocab_size)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = _loss(model, batch, training=True)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    losses_ = [float(step()) for _ in range(15)]
    assert losses_[-1] < 0.8 * losses_[0]


def test_missing_turns_are_ignored_and_give_no_nan(tiny_bert_config):
    model = dialoguecse_model(tiny_bert_config, aggregation="attention", attention_hidden_size=6)
    batch = contrastive_batch(tiny_bert_config.vocab_size)
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True)
        loss = tf.reduce_mean(losses.nt_xent_per_example_loss(_similarities(outputs), 0.1))
    gradients = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(_similarities(outputs).numpy()).all()
    assert all(np.isfinite(np.asarray(g)).all() for g in gradients)
    # Example 2 has no valid turn: its context-aware embedding is zero, every cosine 0.
    outputs = model(batch)
    np.testing.assert_array_equal(outputs["context_aware"][2], 0.0)
    np.testing.assert_allclose(_similarities(outputs)[2], 0.0, atol=1e-6)

    # Whatever a missing turn holds, it does not move the result.
    garbage = {key: value.copy() for key, value in batch.items()}
    garbage["context_input_ids"][1, 2] = np.arange(L) + 5
    garbage["context_input_mask"][1, 2] = 1
    moved = model(garbage)
    for name in ("context_free", "context_aware"):
        np.testing.assert_allclose(moved[name], outputs[name], atol=1e-6, err_msg=name)


def test_mirrored_step_matches_a_single_device_step(tiny_bert_config):
    """Per-example losses averaged over the global batch make replicas add up exactly."""
    devices = [d.name for d in tf.config.list_logical_devices("CPU")][:2]
    assert len(devices) == 2, "conftest splits the CPU into two logical devices"
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    batch = contrastive_batch(config.vocab_size)

    def sgd_step(model, optimizer, inputs):
        with tf.GradientTape() as tape:
            similarities = _similarities(model(inputs, training=True))
            loss = tf.nn.compute_average_loss(losses.nt_xent_per_example_loss(similarities, 0.1), global_batch_size=B)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    single = dialoguecse_model(config, aggregation="attention", attention_hidden_size=6)
    # Collective all-reduce keys are per strategy but the collective runtime is per
    # process: a second collective-based strategy in the test process then fails another
    # test's all-reduce with a shape mismatch, so this one reduces without collectives.
    strategy = tf.distribute.MirroredStrategy(devices, cross_device_ops=tf.distribute.ReductionToOneDevice())
    with strategy.scope():
        mirrored = dialoguecse_model(config, aggregation="attention", attention_hidden_size=6)
        mirrored_optimizer = tf.keras.optimizers.SGD(0.5)
    mirrored.set_weights(single.get_weights())
    initial = [v.numpy().copy() for v in single.trainable_variables]

    @tf.function
    def mirrored_step(inputs):
        losses_ = strategy.run(sgd_step, args=(mirrored, mirrored_optimizer, inputs))
        return strategy.reduce("SUM", losses_, axis=None)

    dataset = tf.data.Dataset.from_tensor_slices(batch).batch(B)
    mirrored_loss = mirrored_step(next(iter(strategy.experimental_distribute_dataset(dataset))))
    single_loss = tf.function(sgd_step)(single, tf.keras.optimizers.SGD(0.5), batch)

    assert strategy.num_replicas_in_sync == 2
    assert float(mirrored_loss) == pytest.approx(float(single_loss), rel=1e-5)
    for expected, actual in zip(single.trainable_variables, mirrored.trainable_variables):
        np.testing.assert_allclose(actual.numpy(), expected.numpy(), atol=1e-5, err_msg=expected.path)
    assert any(np.abs(v.numpy() - w).max() > 1e-4 for v, w in zip(single.trainable_variables, initial))


@pytest.mark.parametrize("kwargs", [
    {"num_frozen_layers": 3}, {"aggregation": "sum"}, {"num_length_buckets": 0}, {"num_length_buckets": True},
    {"aggregation": "attention", "attention_hidden_size": 0},
])
def test_rejects_bad_hyperparameters(tiny_bert_config, kwargs):
    with pytest.raises(ValueError):
        dialoguecse_model(tiny_bert_config, **kwargs)


@pytest.mark.parametrize("temperature", [0.0, -0.1, True])
def test_objective_rejects_a_non_positive_temperature(temperature):
    with pytest.raises(ValueError, match="temperature"):
        DialogueCSEOptions(temperature=temperature)


def test_every_layer_frozen_leaves_nothing_to_train(tiny_bert_config):
    model = dialoguecse_model(tiny_bert_config, num_frozen_layers=2)
    assert model.trainable_weights == []
    assert isinstance(model.matching, MatchingGuidedEmbedding)
    assert isinstance(model.turn_aggregation, TurnAggregation)


@pytest.mark.parametrize("graph", [False, True])
def test_length_buckets_give_the_same_loss_and_gradients(tiny_bert_config, graph):
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    plain = dialoguecse_model(config, aggregation="attention", attention_hidden_size=6)
    bucketed = dialoguecse_model(config, aggregation="attention", attention_hidden_size=6, num_length_buckets=4)
    bucketed.set_weights(plain.get_weights())
    batch = contrastive_batch(config.vocab_size)

    def loss_and_gradients(model):
        with tf.GradientTape() as tape:
            loss = _loss(model, batch, training=True)
        return loss, tape.gradient(loss, model.trainable_variables)

    run = tf.function(loss_and_gradients) if graph else loss_and_gradients
    plain_loss, plain_gradients = run(plain)
    bucketed_loss, bucketed_gradients = run(bucketed)
    assert float(bucketed_loss) == pytest.approx(float(plain_loss), abs=1e-5)
    for expected, got in zip(plain_gradients, bucketed_gradients):
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), atol=1e-5)
    assert bucketed.get_config()["num_length_buckets"] == 4



def test_each_variant_aggregates_as_its_source_by_default(tiny_bert_config):
    """released: the release's (1 + alpha) round attention, its only path; paper_text: I2, the
    paper's best. The mean on the released variant must be asked for by name."""
    assert DialogueCSEOptions().aggregation == "attention"
    assert DialogueCSEOptions(variant="paper_text").aggregation == "mean"
    assert DialogueCSEOptions(aggregation="mean").aggregation == "mean"
    vocab = [f"w{i}" for i in range(tiny_bert_config.vocab_size)]
    tokenizer = type("Tokenizer", (), {"cls_id": 2, "sep_id": 3, "vocab": vocab})()
    objective = DialogueCSEObjective(DialogueCSEOptions(num_frozen_layers=1))
    model = objective.build_model(build_backbone(tiny_bert_config), tiny_bert_config, tokenizer, 1)
    # Padding rounds as the release's arithmetic reads them: "[CLS] [SEP]" slots; "zero" on request.
    assert model.aggregation == "attention" and model.empty_round_token_ids == (2, 3)
    assert DialogueCSEOptions().empty_rounds == "empty_text"
    assert DialogueCSEOptions(variant="paper_text").empty_rounds == "zero"
    objective = DialogueCSEObjective(DialogueCSEOptions(num_frozen_layers=1, empty_rounds="zero"))
    model = objective.build_model(build_backbone(tiny_bert_config), tiny_bert_config, tokenizer, 1)
    assert model.empty_round_token_ids is None
    with pytest.raises(ValueError, match="empty_rounds is an option of variant=released"):
        DialogueCSEOptions(variant="paper_text", empty_rounds="empty_text")
