import numpy as np
import pytest

from dialoguecse_tf.checkpoints import assign_bert_variables, backbone_to_tf1_variables
from dialoguecse_tf.encoder import build_backbone, freeze_bottom_layers
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
