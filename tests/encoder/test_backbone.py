import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.encoder.checkpoints import assign_bert_variables, backbone_to_tf1_variables
from dialoguecse_tf.encoder.backbone import (
    backbone_config,
    backbone_from_config,
    build_backbone,
    check_num_length_buckets,
    encode_sequences,
    freeze_bottom_layers,
    freeze_pooler,
    layer_norms,
    run_backbone,
    set_compiled_elementwise,
    transformer_layers,
    trim_padding,
    with_precision,
)
from numpy_bert import bert_forward, random_bert_weights


def _inputs(config, seed=1):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(5, config.vocab_size, size=(3, 9)).astype(np.int32)
    mask = np.ones_like(token_ids)
    mask[1, 6:] = 0
    mask[2, 2:] = 0
    token_ids[mask == 0] = 0
    return token_ids, mask


def _run(backbone, token_ids, mask):
    out = backbone(
        {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": mask},
        training=False,
    )
    return np.asarray(out["sequence_output"]), np.asarray(out["pooled_output"])


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_exact"])
def test_backbone_matches_numpy_bert(tiny_bert_config, hidden_act):
    config = tiny_bert_config.replace(hidden_act=hidden_act, layer_norm_eps=1e-6)
    weights = random_bert_weights(config, seed=3)
    backbone = build_backbone(config)
    assign_bert_variables(backbone, weights, source="test")
    token_ids, mask = _inputs(config)
    sequence, pooled = _run(backbone, token_ids, mask)
    ref_sequence, ref_pooled = bert_forward(weights, config, token_ids, mask)
    real = mask.astype(bool)
    assert np.abs(sequence[real] - ref_sequence[real]).max() < 1e-4
    assert np.abs(pooled - ref_pooled).max() < 1e-4


def test_exact_and_approximate_gelu_really_differ(tiny_bert_config):
    weights = random_bert_weights(tiny_bert_config, seed=3)
    token_ids, mask = _inputs(tiny_bert_config)
    outputs = []
    for act in ("gelu", "gelu_exact"):
        backbone = build_backbone(tiny_bert_config.replace(hidden_act=act))
        assign_bert_variables(backbone, weights, source="test")
        outputs.append(_run(backbone, token_ids, mask)[0])
    assert np.abs(outputs[0] - outputs[1]).max() > 1e-4


def test_tf1_variable_export_inverts_assignment(tiny_bert_config):
    weights = random_bert_weights(tiny_bert_config, seed=5)
    backbone = build_backbone(tiny_bert_config)
    assign_bert_variables(backbone, weights, source="test")
    exported = backbone_to_tf1_variables(backbone)
    assert set(exported) == set(weights)
    for name, value in weights.items():
        np.testing.assert_array_equal(exported[name], value, err_msg=name)


def test_freezing_bottom_layers_changes_trainable_count(tiny_bert_config):
    config = tiny_bert_config.replace(num_hidden_layers=4)
    backbone = build_backbone(config)
    total = len(backbone.trainable_weights)
    per_layer = len(backbone.get_layer("transformer_layer_0").trainable_weights)
    # token, position, segment embeddings + LayerNorm gamma/beta
    embedding_weights = 5
    assert per_layer == 16
    freeze_bottom_layers(backbone, 3)
    assert len(backbone.trainable_weights) == total - embedding_weights - 3 * per_layer
    assert not backbone.get_layer("transformer_layer_2").trainable
    assert backbone.get_layer("transformer_layer_3").trainable
    assert not backbone.get_layer("token_embedding").trainable
    frozen_ids = {id(v) for v in backbone.non_trainable_weights}
    assert id(backbone.get_layer("transformer_layer_3")._feedforward_output_dense.kernel) not in frozen_ids


def test_freezing_validates_range(tiny_bert_config):
    backbone = build_backbone(tiny_bert_config)
    with pytest.raises(ValueError, match="num_frozen_layers"):
        freeze_bottom_layers(backbone, 3)
    freeze_bottom_layers(backbone, 0)
    assert all(layer.trainable for layer in backbone.layers)


def test_freezing_the_pooler_keeps_its_weights_out_of_training(tiny_bert_config):
    backbone = build_backbone(tiny_bert_config)
    pooler = {id(v) for v in backbone.get_layer("pooled_dense").weights}
    total = len(backbone.trainable_weights)
    freeze_pooler(backbone)
    assert len(backbone.trainable_weights) == total - 2
    assert not pooler & {id(v) for v in backbone.trainable_weights}
    assert pooler <= {id(v) for v in backbone.weights}  # still there, for checkpoints


def test_run_backbone_defaults_to_single_sentence_segments(tiny_bert_config):
    weights = random_bert_weights(tiny_bert_config, seed=3)
    backbone = build_backbone(tiny_bert_config)
    assign_bert_variables(backbone, weights, source="test")
    token_ids, mask = _inputs(tiny_bert_config)
    outputs = run_backbone(backbone, tf.constant(token_ids), tf.constant(mask))
    sequence, pooled = _run(backbone, token_ids, mask)
    np.testing.assert_array_equal(np.asarray(outputs["sequence_output"]), sequence)
    np.testing.assert_array_equal(np.asarray(outputs["pooled_output"]), pooled)
    segments = tf.ones_like(token_ids)
    other = run_backbone(backbone, tf.constant(token_ids), tf.constant(mask), segment_ids=segments)["sequence_output"]
    assert np.abs(np.asarray(other) - sequence)[mask == 1].max() > 1e-4


def test_trim_padding_keeps_every_column_any_row_uses():
    ids = tf.constant([[5, 6, 0, 0, 0], [7, 0, 8, 0, 0]])
    mask = tf.constant([[1, 1, 0, 0, 0], [1, 0, 1, 0, 0]])
    trimmed_ids, trimmed_mask = trim_padding(ids, mask)
    np.testing.assert_array_equal(trimmed_ids.numpy(), [[5, 6, 0], [7, 0, 8]])
    np.testing.assert_array_equal(trimmed_mask.numpy(), [[1, 1, 0], [1, 0, 1]])
    assert trim_padding(ids, tf.zeros_like(mask))[1].shape == (2, 1)


def test_encode_sequences_is_the_float32_sequence_output(tiny_bert_config):
    weights = random_bert_weights(tiny_bert_config, seed=3)
    backbone = build_backbone(tiny_bert_config)
    assign_bert_variables(backbone, weights, source="test")
    token_ids, mask = _inputs(tiny_bert_config)
    encoded = encode_sequences(backbone, token_ids, mask)
    assert encoded.dtype == tf.float32 and encoded.shape == token_ids.shape + (tiny_bert_config.hidden_size,)
    reference, _ = bert_forward(weights, tiny_bert_config, token_ids, mask)
    real = mask.astype(bool)
    assert np.abs(encoded.numpy()[real] - reference[real]).max() < 1e-4


def test_length_buckets_cut_each_group_to_its_longest_sequence(tiny_bert_config, monkeypatch):
    backbone = build_backbone(tiny_bert_config)
    length = 8
    ids = np.ones((6, length), np.int32)
    mask = (np.arange(length) < np.array([[1], [8], [2], [3], [8], [4]])).astype(np.int32)
    plain = encode_sequences(backbone, ids, mask).numpy()
    seen = []
    backbone_call = backbone.call

    def spy(inputs, *args, **kwargs):
        seen.append(tuple(inputs["token_ids"].shape))
        return backbone_call(inputs, *args, **kwargs)

    monkeypatch.setattr(backbone, "call", spy)
    encoded = encode_sequences(backbone, ids, mask, num_length_buckets=3).numpy()
    assert seen == [(2, 2), (2, 4), (2, 8)]
    assert encoded.shape == (6, length, tiny_bert_config.hidden_size)
    group_lengths = np.array([2, 8, 2, 4, 8, 4])
    beyond_group = np.arange(length) >= group_lengths[:, None]
    assert not encoded[beyond_group].any() and np.abs(encoded[~beyond_group]).sum(-1).min() > 0
    np.testing.assert_allclose(encoded[mask == 1], plain[mask == 1], atol=1e-5)
    # More buckets than sequences: one group per sequence; a ragged split still restores the order.
    seen.clear()
    np.testing.assert_allclose(encode_sequences(backbone, ids, mask, num_length_buckets=10).numpy()[mask == 1],
                               plain[mask == 1], atol=1e-5)
    assert len(seen) == 6
    seen.clear()
    odd = encode_sequences(backbone, ids[:5], mask[:5], num_length_buckets=2).numpy()
    np.testing.assert_allclose(odd[mask[:5] == 1], plain[:5][mask[:5] == 1], atol=1e-5)
    assert seen == [(3, 3), (2, 8)]  # lengths 1, 2, 3 then 8, 8: the first group takes the remainder


def test_length_buckets_need_a_static_batch_size(tiny_bert_config):
    backbone = build_backbone(tiny_bert_config)
    spec = tf.TensorSpec([None, 8], tf.int32)
    bucketed = tf.function(lambda ids, mask: encode_sequences(backbone, ids, mask, num_length_buckets=2))
    with pytest.raises(ValueError, match="static batch size"):
        bucketed.get_concrete_function(spec, spec)
    plain = tf.function(lambda ids, mask: encode_sequences(backbone, ids, mask))
    assert plain.get_concrete_function(spec, spec).structured_outputs.shape.as_list() == [None, 8, 32]


@pytest.mark.parametrize("value", [0, -1, 1.0, True, "2"])
def test_check_num_length_buckets_rejects_non_positive_ints(value):
    with pytest.raises(ValueError, match="num_length_buckets"):
        check_num_length_buckets(value)
    assert check_num_length_buckets(3) == 3


def test_a_bfloat16_backbone_computes_in_bfloat16_on_float32_variables(tiny_bert_config):
    weights = random_bert_weights(tiny_bert_config, seed=3)
    plain = build_backbone(tiny_bert_config)
    assign_bert_variables(plain, weights, source="test")
    half = with_precision(plain, "bfloat16")
    assert half.compute_dtype == "bfloat16" and {v.dtype for v in half.weights} == {"float32"}
    assert with_precision(half, "bfloat16") is half and with_precision(plain, "float32") is plain
    # Its variables hold the same float32 numbers, which the written checkpoint reads.
    for name, value in backbone_to_tf1_variables(half).items():
        assert value.dtype == np.float32
        np.testing.assert_array_equal(value, backbone_to_tf1_variables(plain)[name])
    token_ids, mask = _inputs(tiny_bert_config)
    assert run_backbone(half, tf.constant(token_ids), tf.constant(mask))["sequence_output"].dtype == tf.bfloat16
    encoded = encode_sequences(half, token_ids, mask, num_length_buckets=2)
    assert encoded.dtype == tf.float32
    real = mask.astype(bool)
    reference = encode_sequences(plain, token_ids, mask).numpy()[real]
    # bfloat16's rounding through two layers: within a few percent of the float32 outputs' scale.
    assert np.abs(encoded.numpy()[real] - reference).max() < 0.05 * np.abs(reference).max()
    # Models serialise the precision with the backbone; a float32 backbone's config is as before.
    assert "precision" not in backbone_config(plain)
    assert backbone_from_config(backbone_config(half)).compute_dtype == "bfloat16"


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_exact"])
def test_bfloat16_runs_gelu_and_layer_norms_xla_compiled_as_the_plain_ops_compute(tiny_bert_config, hidden_act):
    # An epsilon large enough that an island dropping it would be caught.
    config = tiny_bert_config.replace(hidden_act=hidden_act, layer_norm_eps=1e-2)
    plain = build_backbone(config)
    assign_bert_variables(plain, random_bert_weights(config, seed=3), source="test")
    half = with_precision(plain, "bfloat16")
    # float32 keeps the plain ops (and so its numbers); bfloat16 overrides every LayerNorm's call and
    # the feed-forward's first layer's.
    def overridden(backbone):
        return [layer for layer in layer_norms(backbone) + [layer._feedforward_intermediate_dense
                                                            for layer in transformer_layers(backbone)]
                if "call" in vars(layer)]

    assert not overridden(plain)
    assert len(overridden(half)) == 3 * len(transformer_layers(half)) + 1
    token_ids, mask = _inputs(config)

    def forward_and_gradients(backbone):
        with tf.GradientTape() as tape:
            encoded = encode_sequences(backbone, token_ids, mask, training=False)
            loss = tf.reduce_sum(tf.square(encoded) * tf.cast(mask, tf.float32)[..., None])
        gradients = tape.gradient(loss, backbone.trainable_variables)
        # The pooler, which no sequence output reaches, has none.
        return encoded, tf.concat([tf.reshape(tf.convert_to_tensor(g), [-1]) for g in gradients if g is not None], 0)

    # Every island runs: one call of an XLA-compiled function per LayerNorm and feed-forward layer.
    forward = tf.function(lambda: encode_sequences(half, token_ids, mask)).get_concrete_function().graph.as_graph_def()
    compiled_functions = {function.signature.name for function in forward.library.function
                          if "_XlaMustCompile" in function.attr}
    calls = [node for node in forward.node if "f" in node.attr and node.attr["f"].func.name in compiled_functions]
    assert len(calls) == 3 * len(transformer_layers(half)) + 1
    traced = tf.function(lambda: forward_and_gradients(half))
    compiled, compiled_gradients = (value.numpy() for value in traced())
    set_compiled_elementwise(half, False)
    assert not overridden(half)
    unfused, unfused_gradients = (value.numpy() for value in tf.function(lambda: forward_and_gradients(half))())
    exact, exact_gradients = (value.numpy() for value in tf.function(lambda: forward_and_gradients(plain))())
    real = mask.astype(bool)
    # The islands' maths (the GELU's flavour, epsilon, gamma and beta), free of bfloat16's rounding:
    # compiled on the float32 backbone they give float32's numbers.
    set_compiled_elementwise(plain, True)
    islands, islands_gradients = (value.numpy() for value in tf.function(lambda: forward_and_gradients(plain))())
    set_compiled_elementwise(plain, False)
    np.testing.assert_allclose(islands[real], exact[real], rtol=0, atol=1e-5 * np.abs(exact[real]).max())
    assert np.linalg.norm(islands_gradients - exact_gradients) <= 1e-5 * np.linalg.norm(exact_gradients)
    # The islands round once where the plain ops round per op: as close to float32 as the plain
    # bfloat16 ops are, forward and backward.
    for ours, theirs, reference in ((compiled[real], unfused[real], exact[real]),
                                    (compiled_gradients, unfused_gradients, exact_gradients)):
        assert np.linalg.norm(ours - reference) <= 1.5 * np.linalg.norm(theirs - reference)
        assert np.linalg.norm(ours - reference) <= 0.03 * np.linalg.norm(reference)
