"""`ReleasedDialogueCSEModel` against a NumPy transcription of the authors' released code
(dialogue-cse/model/dse_cl_bert.py:49-197, model/pooling.py:9-44), on a small batch with
padding tokens, an empty round on one side and a context with no right side at all."""

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf import losses
from dialoguecse_tf.encoder.backbone import build_backbone, encode_sequences
from dialoguecse_tf.models.dialoguecse import ReleasedDialogueCSEModel
from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET)
from harness import run_serialization_test

B, N, K, L = 3, 2, 3, 7


def _batch(vocab_size):
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, L + 1, size=(B, 2 * N + K))
    # Example 0: a full context. Example 1: one left round missing (slot 0). Example 2: no right side.
    turn_mask = np.array([[1, 1, 1, 1], [0, 1, 1, 1], [1, 1, 0, 0]])
    ids = rng.integers(5, vocab_size, size=(B, 2 * N + K, L))
    mask = (np.arange(L)[None, None, :] < lengths[..., None]).astype(np.int64)
    mask[:, : 2 * N] *= turn_mask[..., None]
    ids = ids * mask
    offsets = np.array([[-2, -1, 1, 2], [0, -1, 1, 2], [-2, -1, 0, 0]]) * turn_mask
    return {
        CONTEXT_INPUT_IDS: tf.constant(ids[:, : 2 * N]),
        CONTEXT_INPUT_MASK: tf.constant(mask[:, : 2 * N]),
        CONTEXT_TURN_MASK: tf.constant(turn_mask),
        CONTEXT_TURN_OFFSET: tf.constant(offsets),
        CANDIDATE_INPUT_IDS: tf.constant(ids[:, 2 * N:]),
        CANDIDATE_INPUT_MASK: tf.constant(mask[:, 2 * N:]),
    }


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _unit(x):
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(norm > 0, x / np.maximum(norm, 1e-12), 0.0)


def _released_reference(h_ctx, m_ctx, rounds_valid, h_rsp, m_rsp, w, b, u, attention, matching_side="context",
                        normalize=False, fuse=False, masked_rounds_weigh=False):
    """dse_cl_bert.py, literally: the [Lu, Lr] matching matrix, the unmasked round mean, the
    -(2^32 - 1) round mask, (1 + alpha), a sum over rounds and sides, cos / 0.1. The study
    options, as matrices: M from unit token vectors; R_hat' = M^T U pooled over the candidate's
    tokens; the rounds' R_hat rows summed, then pooled over the longest round."""
    h_ctx = h_ctx * m_ctx[..., None]  # l.90-91
    h_rsp = h_rsp * m_rsp[..., None]  # l.139-140
    r_bar = h_rsp.sum(2) / (m_rsp.sum(2)[..., None] + 1e-6)  # l.148-149
    r_tilde = np.zeros_like(r_bar)
    fused = np.zeros((B, K, L, r_bar.shape[-1]))
    match_ctx, match_rsp = (_unit(h_ctx), _unit(h_rsp)) if normalize else (h_ctx, h_rsp)
    for side in (slice(0, N), slice(N, 2 * N)):
        u_side, m_side, valid = h_ctx[:, side], m_ctx[:, side], rounds_valid[:, side]
        x = u_side.mean(axis=2)  # l.166-167: over all L positions
        scores = np.tanh(x @ w + b) @ u
        scores = np.where(valid > 0, scores, -(2.0**32) + 1)
        alpha = np.exp(scores - scores.max(-1, keepdims=True))
        alpha = alpha / alpha.sum(-1, keepdims=True)
        for i in range(N):
            for a in range(K):
                weight = (1 + alpha[:, i]) if attention else np.ones(B)
                if not masked_rounds_weigh:
                    # Our "zero" reading: a padding round does not count at all.
                    weight = weight * (valid[:, i] > 0)
                matching = 0.1 * np.einsum("bld,bmd->blm", match_ctx[:, side][:, i], match_rsp[:, a])  # l.58-61
                if matching_side == "response":
                    refined = np.einsum("blm,bld->bmd", matching, u_side[:, i])  # rows: candidate tokens
                    e = refined.sum(1) / np.maximum(m_rsp[:, a].sum(-1)[:, None], 1)
                    r_tilde[:, a] += e * weight[:, None]
                    continue
                refined = np.einsum("blm,bmd->bld", matching, h_rsp[:, a])  # l.63
                fused[:, a] += refined * weight[:, None, None]
                count = m_side[:, i].sum(-1)[:, None]
                # l.65-66 divides by the token count, NaN for a round with no token: the
                # release's unreleased data code must fill such slots ("empty_text" does).
                assert masked_rounds_weigh is False or (count > 0).all()
                e = np.where(count > 0, refined.sum(1) / np.maximum(count, 1), 0.0)
                r_tilde[:, a] += e * weight[:, None]
    if fuse and matching_side == "context":
        r_tilde = fused.sum(2) / m_ctx.sum(-1).max(-1)[:, None, None]
    cos = (r_bar * r_tilde).sum(-1) / (np.linalg.norm(r_bar, axis=-1) * np.linalg.norm(r_tilde, axis=-1))
    logits = cos / 0.1  # l.36-47
    labels = np.zeros((B, K))
    labels[:, 0] = 1
    loss = -(_log_softmax(logits) * labels).mean()  # l.197
    return r_bar, r_tilde, cos, loss


@pytest.mark.parametrize("aggregation", ["attention", "mean"])
@pytest.mark.parametrize("num_length_buckets", [1, 3])
def test_released_model_matches_the_released_arithmetic(tiny_bert_config, aggregation, num_length_buckets):
    config = tiny_bert_config.replace(max_position_embeddings=L, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0)
    backbone = build_backbone(config)
    model = ReleasedDialogueCSEModel(backbone, aggregation=aggregation, num_length_buckets=num_length_buckets,
                                     attention_size=16)
    batch = _batch(config.vocab_size)
    outputs = model(batch)
    ctx_ids = tf.reshape(batch[CONTEXT_INPUT_IDS], (-1, L))
    rsp_ids = tf.reshape(batch[CANDIDATE_INPUT_IDS], (-1, L))
    h_ctx = encode_sequences(backbone, ctx_ids, tf.reshape(batch[CONTEXT_INPUT_MASK], (-1, L)))
    h_rsp = encode_sequences(backbone, rsp_ids, tf.reshape(batch[CANDIDATE_INPUT_MASK], (-1, L)))
    attention = model.round_attention
    r_bar, r_tilde, cos, loss = _released_reference(
        h_ctx.numpy().reshape(B, 2 * N, L, -1), batch[CONTEXT_INPUT_MASK].numpy(),
        batch[CONTEXT_TURN_MASK].numpy(), h_rsp.numpy().reshape(B, K, L, -1),
        batch[CANDIDATE_INPUT_MASK].numpy(), attention.w.numpy(), attention.b.numpy(), attention.u.numpy(),
        aggregation == "attention",
    )
    assert outputs["context_free"].shape == (B, K, config.hidden_size)
    np.testing.assert_allclose(outputs["context_free"], r_bar, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outputs["context_aware"], r_tilde, rtol=1e-4, atol=1e-5)
    similarities = losses.pair_similarities(outputs["context_free"], outputs["context_aware"])
    np.testing.assert_allclose(similarities, cos, rtol=1e-4, atol=1e-5)
    ours = float(tf.reduce_mean(losses.released_nt_xent_per_example_loss(similarities, 0.1)))
    np.testing.assert_allclose(ours, loss, rtol=1e-4)


@pytest.mark.parametrize("matching_side,normalize,fuse", [
    ("response", False, False), ("context", True, False), ("context", False, True), ("response", True, True),
])
def test_study_readings_match_their_matrix_form(tiny_bert_config, matching_side, normalize, fuse):
    config = tiny_bert_config.replace(max_position_embeddings=L, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0)
    backbone = build_backbone(config)
    model = ReleasedDialogueCSEModel(backbone, aggregation="attention", attention_size=16,
                                     matching_side=matching_side, normalize_matching_tokens=normalize,
                                     fuse_turns_before_pooling=fuse)
    batch = _batch(config.vocab_size)
    outputs = model(batch)
    h_ctx = encode_sequences(backbone, tf.reshape(batch[CONTEXT_INPUT_IDS], (-1, L)),
                             tf.reshape(batch[CONTEXT_INPUT_MASK], (-1, L)))
    h_rsp = encode_sequences(backbone, tf.reshape(batch[CANDIDATE_INPUT_IDS], (-1, L)),
                             tf.reshape(batch[CANDIDATE_INPUT_MASK], (-1, L)))
    attention = model.round_attention
    _, r_tilde, _, _ = _released_reference(
        h_ctx.numpy().reshape(B, 2 * N, L, -1), batch[CONTEXT_INPUT_MASK].numpy(),
        batch[CONTEXT_TURN_MASK].numpy(), h_rsp.numpy().reshape(B, K, L, -1),
        batch[CANDIDATE_INPUT_MASK].numpy(), attention.w.numpy(), attention.b.numpy(), attention.u.numpy(),
        True, matching_side, normalize, fuse,
    )
    np.testing.assert_allclose(outputs["context_aware"], r_tilde, rtol=1e-4, atol=1e-5)
    default = ReleasedDialogueCSEModel(backbone, aggregation="attention", attention_size=16)
    default.round_attention.set_weights(attention.get_weights())
    assert not np.allclose(default(batch)["context_aware"], outputs["context_aware"], rtol=1e-3)
    restored = run_serialization_test(model, (batch,))
    assert (restored.matching_side, restored.normalize_matching_tokens, restored.fuse_turns_before_pooling) == (
        matching_side, normalize, fuse)


def test_study_options_belong_to_the_released_variant():
    from dialoguecse_tf.objectives.dialoguecse import DialogueCSEOptions

    with pytest.raises(ValueError, match="study options of variant=released"):
        DialogueCSEOptions(variant="paper_text", normalize_matching_tokens=True)
    with pytest.raises(ValueError, match="matching_side must be one of"):
        ReleasedDialogueCSEModel(None, matching_side="both")


def test_round_attention_masks_invalid_rounds_and_is_uniform_without_any(tiny_bert_config):
    model = ReleasedDialogueCSEModel(build_backbone(tiny_bert_config), attention_size=8)
    rounds = tf.random.normal((2, 3, tiny_bert_config.hidden_size))
    alpha = model.round_attention(rounds, tf.constant([[1, 0, 1], [0, 0, 0]])).numpy()
    assert alpha[0, 1] == 0.0 and np.isclose(alpha[0].sum(), 1.0)
    np.testing.assert_allclose(alpha[1], [1 / 3] * 3, rtol=1e-6)


def test_released_model_refuses_unpaired_sides(tiny_bert_config):
    model = ReleasedDialogueCSEModel(build_backbone(tiny_bert_config.replace(max_position_embeddings=L)))
    batch = _batch(tiny_bert_config.vocab_size)
    odd = {**batch, **{name: batch[name][:, :3] for name in (CONTEXT_INPUT_IDS, CONTEXT_INPUT_MASK,
                                                              CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET)}}
    with pytest.raises(ValueError, match="left and right"):
        model(odd)


@pytest.mark.parametrize("aggregation", ["attention", "mean"])
def test_empty_text_rounds_follow_the_released_arithmetic(tiny_bert_config, aggregation):
    """empty_rounds="empty_text": a padding slot is encoded as "[CLS] [SEP]" and weighs
    1 + alpha with alpha from the masked softmax (0 for a masked round next to real ones,
    1/N on a side with no real round): the release's l.176-184 literally, no round mask."""
    config = tiny_bert_config.replace(max_position_embeddings=L, hidden_dropout_prob=0.0,
                                      attention_probs_dropout_prob=0.0)
    backbone = build_backbone(config)
    cls_id, sep_id = 2, 3
    model = ReleasedDialogueCSEModel(backbone, aggregation=aggregation, attention_size=16,
                                     empty_round_token_ids=(cls_id, sep_id))
    batch = _batch(config.vocab_size)
    outputs = model(batch)
    turn_mask = batch[CONTEXT_TURN_MASK].numpy()
    ctx_ids = batch[CONTEXT_INPUT_IDS].numpy().copy()
    ctx_mask = batch[CONTEXT_INPUT_MASK].numpy().copy()
    filler = np.zeros(L, np.int64)
    filler[:2] = (cls_id, sep_id)
    ctx_ids[turn_mask == 0] = filler
    ctx_mask[turn_mask == 0] = (filler > 0).astype(np.int64)
    h_ctx = encode_sequences(backbone, tf.constant(ctx_ids.reshape(-1, L)), tf.constant(ctx_mask.reshape(-1, L)))
    h_rsp = encode_sequences(backbone, tf.reshape(batch[CANDIDATE_INPUT_IDS], (-1, L)),
                             tf.reshape(batch[CANDIDATE_INPUT_MASK], (-1, L)))
    attention = model.round_attention
    args = (h_ctx.numpy().reshape(B, 2 * N, L, -1), ctx_mask, turn_mask, h_rsp.numpy().reshape(B, K, L, -1),
            batch[CANDIDATE_INPUT_MASK].numpy(), attention.w.numpy(), attention.b.numpy(),
            attention.u.numpy(), aggregation == "attention")
    _, r_tilde, _, _ = _released_reference(*args, masked_rounds_weigh=True)
    np.testing.assert_allclose(outputs["context_aware"], r_tilde, rtol=1e-4, atol=1e-5)
    # Example 0 has no padding round: both readings agree there and only there.
    zero = ReleasedDialogueCSEModel(backbone, aggregation=aggregation, attention_size=16)
    zero.round_attention.set_weights(attention.get_weights())
    zero_out = zero(batch)["context_aware"].numpy()
    np.testing.assert_allclose(zero_out[0], outputs["context_aware"][0], rtol=1e-4, atol=1e-5)
    assert not np.allclose(zero_out[1:], outputs["context_aware"][1:], rtol=1e-3)
    restored = run_serialization_test(model, (batch,))
    assert restored.empty_round_token_ids == (cls_id, sep_id)


def test_whole_empty_side_weighs_four_thirds_per_slot():
    """Where a side has no real round, the release's masked softmax is uniform: each of its
    N = 3 slots weighs 1 + 1/3."""
    from dialoguecse_tf.models.layers import RoundAttention

    layer = RoundAttention(8)
    alphas = layer(tf.random.normal((2, 3, 5)), tf.constant([[0, 0, 0], [1, 1, 0]]))
    np.testing.assert_allclose(1 + alphas[0].numpy(), [4 / 3] * 3, rtol=1e-6)
    assert alphas[1, 2] == 0.0
