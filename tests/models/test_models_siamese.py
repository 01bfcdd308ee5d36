import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf import losses
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.models import SiameseBertModel
from dialoguecse_tf.models.siamese import flatten_context
from harness import run_serialization_test
from tiny_dialoguecse import B, K, L, T, contrastive_batch

CLS_ID = 2


def _model(config, num_length_buckets=1, matching_hidden_size=8):
    return SiameseBertModel(build_backbone(config), matching_hidden_size=matching_hidden_size, cls_id=CLS_ID,
                            num_length_buckets=num_length_buckets)


def test_outputs_have_the_documented_shapes_and_meaning(tiny_bert_config):
    model = _model(tiny_bert_config)
    batch = contrastive_batch(tiny_bert_config.vocab_size)
    outputs = model(batch)
    hidden = tiny_bert_config.hidden_size
    assert set(outputs) == {"scores", "context", "responses"}
    assert outputs["scores"].shape == (B, K)
    assert outputs["context"].shape == outputs["responses"].shape == (B, K, hidden)
    # One context embedding per example, matched against each of its candidates: the mean-pooled
    # BERT output of the flattened context.
    flat_ids, flat_mask = flatten_context(batch["context_input_ids"], batch["context_input_mask"],
                                          batch["context_turn_mask"], CLS_ID, T * L)
    context = masked_mean(model.backbone({"token_ids": flat_ids, "segment_ids": tf.zeros_like(flat_ids),
                                          "padding_mask": flat_mask})["sequence_output"], flat_mask)
    np.testing.assert_allclose(outputs["context"], np.repeat(context.numpy()[:, None], K, axis=1), atol=1e-5)
    cosines = losses.pair_similarities(outputs["context"], outputs["responses"]).numpy()
    assert np.isfinite(cosines).all() and np.abs(cosines).max() <= 1.0 + 1e-6
    assert np.isfinite(losses.ranking_per_example_loss(outputs["scores"]).numpy()).all()


@pytest.mark.parametrize("graph", [False, True])
def test_length_buckets_give_the_same_scores(tiny_bert_config, graph):
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    plain = _model(config)
    bucketed = _model(config, num_length_buckets=4)
    bucketed.set_weights(plain.get_weights())
    batch = contrastive_batch(config.vocab_size)

    def forward(model):
        return model(batch, training=False)

    run = tf.function(forward) if graph else forward
    expected, got = run(plain), run(bucketed)
    np.testing.assert_allclose(got["scores"], expected["scores"], atol=1e-5)
    for name in ("context", "responses"):
        np.testing.assert_allclose(got[name], expected[name], atol=1e-5, err_msg=name)
    # Not trivially equal: the scores tell the candidates apart.
    assert np.ptp(expected["scores"].numpy()) > 1e-4
    assert bucketed.get_config()["num_length_buckets"] == 4


def test_config_round_trip_gives_the_same_scores(tiny_bert_config):
    model = _model(tiny_bert_config, num_length_buckets=2, matching_hidden_size=6)
    config = model.get_config()
    assert {key: config[key] for key in ("matching_hidden_size", "cls_id", "num_length_buckets")} == {
        "matching_hidden_size": 6, "cls_id": CLS_ID, "num_length_buckets": 2,
    }
    clone = run_serialization_test(model, (contrastive_batch(tiny_bert_config.vocab_size),))
    assert clone.backbone.get_config() == model.backbone.get_config()


@pytest.mark.parametrize("kwargs", [{"num_length_buckets": 0}, {"num_length_buckets": 1.5}])
def test_rejects_bad_hyperparameters(tiny_bert_config, kwargs):
    with pytest.raises(ValueError):
        _model(tiny_bert_config, **kwargs)
