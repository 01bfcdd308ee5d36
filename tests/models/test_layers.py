import numpy as np
import pytest

from dialoguecse_tf.models.layers import MatchingGuidedEmbedding, TurnAggregation
from harness import run_serialization_test

B, T, K, L, D = 2, 3, 3, 6, 8


def _token_mask(rng, shape):
    """Random real lengths in [1, L], as left-aligned 0/1 masks."""
    lengths = rng.integers(1, L + 1, size=shape)
    return (np.arange(L) < lengths[..., None]).astype(np.int32)


def _mge_reference(context, context_mask, candidates, candidate_mask):
    """Eq. 3-4 on the unpadded matrices, one (b, k, t) at a time."""
    out = np.zeros((B, K, T, L, D))
    for b in range(B):
        for k in range(K):
            r = candidates[b, k][candidate_mask[b, k] == 1]
            for t in range(T):
                rows = context_mask[b, t] == 1
                u = context[b, t][rows]
                m = u @ r.T / np.sqrt(D)
                out[b, k, t][rows] = m @ r
    return out


def test_matching_guided_embedding_matches_equations_3_and_4():
    rng = np.random.default_rng(0)
    context = rng.normal(size=(B, T, L, D)).astype(np.float32)
    candidates = rng.normal(size=(B, K, L, D)).astype(np.float32)
    context_mask = _token_mask(rng, (B, T))
    candidate_mask = _token_mask(rng, (B, K))
    context_mask[0, 1, -2:] = 0
    candidate_mask[1, 2, 2:] = 0
    # Huge padding vectors would dominate any product they leaked into.
    context[context_mask == 0] = rng.uniform(1e3, 1e4, size=(int((context_mask == 0).sum()), D))
    candidates[candidate_mask == 0] = rng.uniform(1e3, 1e4, size=(int((candidate_mask == 0).sum()), D))

    refined = np.asarray(MatchingGuidedEmbedding()(context, context_mask, candidates, candidate_mask))

    assert refined.shape == (B, K, T, L, D)
    expected = _mge_reference(context, context_mask, candidates, candidate_mask)
    assert np.abs(refined - expected).max() < 1e-5


def test_matching_guided_embedding_has_no_weights_and_round_trips_config():
    layer = MatchingGuidedEmbedding(name="mge")
    layer(np.ones((1, 1, 2, 4), np.float32), np.ones((1, 1, 2)), np.ones((1, 2, 2, 4), np.float32), np.ones((1, 2, 2)))
    assert layer.weights == []
    assert run_serialization_test(layer).name == "mge"


def _aggregation_inputs(seed=1):
    rng = np.random.default_rng(seed)
    refined = rng.normal(size=(B + 1, K, T, L, D)).astype(np.float32)
    token_mask = _token_mask(rng, (B + 1, T))
    turn_mask = np.array([[1, 1, 1], [1, 0, 1], [0, 0, 0]], np.int32)
    # Garbage wherever the masks say "nothing here": padded rows of real turns and
    # whole missing turns (with a full token mask, so only turn_mask can exclude them).
    refined[np.broadcast_to((token_mask == 0)[:, None], refined.shape[:-1])] = 1e4
    missing = turn_mask == 0
    token_mask[missing] = 1
    refined[np.broadcast_to(missing[:, None, :], refined.shape[:3])] = rng.uniform(
        1e3, 1e4, size=(int(missing.sum()) * K, L, D)
    )
    return refined, token_mask, turn_mask


def _pooled_turns(refined, token_mask, b, k):
    return {t: refined[b, k, t][token_mask[b, t] == 1].mean(axis=0) for t in range(T)}


def test_mean_aggregation_matches_equation_7():
    refined, token_mask, turn_mask = _aggregation_inputs()
    out = np.asarray(TurnAggregation("mean")(refined, token_mask, turn_mask))

    assert out.shape == (B + 1, K, D)
    for b in range(B + 1):
        for k in range(K):
            pooled = _pooled_turns(refined, token_mask, b, k)
            valid = [pooled[t] for t in range(T) if turn_mask[b, t]]
            expected = np.mean(valid, axis=0) if valid else np.zeros(D)
            assert np.abs(out[b, k] - expected).max() < 1e-4 * max(1.0, np.abs(expected).max())
    assert np.all(out[2] == 0)


def test_attention_aggregation_matches_equations_5_and_6():
    refined, token_mask, turn_mask = _aggregation_inputs(seed=2)
    layer = TurnAggregation("attention", attention_hidden_size=5)
    out = np.asarray(layer(refined, token_mask, turn_mask))
    w1, b1 = (v.numpy() for v in (layer.attention_hidden.kernel, layer.attention_hidden.bias))
    w2, b2 = (v.numpy() for v in (layer.attention_score.kernel, layer.attention_score.bias))

    assert out.shape == (B + 1, K, D)
    assert np.isfinite(out).all()
    for b in range(B + 1):
        for k in range(K):
            pooled = _pooled_turns(refined, token_mask, b, k)
            valid = [pooled[t] for t in range(T) if turn_mask[b, t]]
            if not valid:
                np.testing.assert_array_equal(out[b, k], 0.0)
                continue
            scores = np.array([(np.maximum(p @ w1 + b1, 0.0) @ w2 + b2)[0] for p in valid])
            alpha = np.exp(scores - scores.max())
            alpha /= alpha.sum()
            expected = np.sum(alpha[:, None] * np.array(valid), axis=0)
            assert np.abs(out[b, k] - expected).max() < 1e-4 * max(1.0, np.abs(expected).max())


def test_attention_aggregation_weights_and_config():
    layer = TurnAggregation("attention", attention_hidden_size=7, name="agg")
    layer.build((None, None, None, None, D))
    assert [tuple(w.shape) for w in layer.trainable_weights] == [(D, 7), (7,), (7, 1), (1,)]
    clone = run_serialization_test(layer)
    assert (clone.aggregation, clone.attention_hidden_size, clone.name) == ("attention", 7, "agg")
    mean_layer = TurnAggregation("mean")
    mean_layer.build((None, None, None, None, D))
    assert mean_layer.weights == []


@pytest.mark.parametrize("kwargs", [{"aggregation": "max"}, {"attention_hidden_size": 0}])
def test_turn_aggregation_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        TurnAggregation(**kwargs)
