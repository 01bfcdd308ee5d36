"""A NumPy BERT forward pass written from Devlin et al. 2019 / google-research/bert.

Takes Google-named arrays (`bert/encoder/layer_0/attention/self/query/kernel`, ...) so the
same arrays can be written to a checkpoint and fed to this reference.
"""

import math

import numpy as np


def gelu(x, approximate):
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def bert_forward(weights, config, token_ids, padding_mask, segment_ids=None):
    """Returns (sequence_output [B, L, H], pooled_output [B, H]) in float64."""
    w = {name: np.asarray(value, dtype=np.float64) for name, value in weights.items()}
    token_ids = np.asarray(token_ids)
    batch, length = token_ids.shape
    segment_ids = np.zeros_like(token_ids) if segment_ids is None else np.asarray(segment_ids)
    eps = config.layer_norm_eps
    approximate = config.hidden_act == "gelu"
    heads, head_size = config.num_attention_heads, config.hidden_size // config.num_attention_heads

    x = (
        w["bert/embeddings/word_embeddings"][token_ids]
        + w["bert/embeddings/position_embeddings"][np.arange(length)][None]
        + w["bert/embeddings/token_type_embeddings"][segment_ids]
    )
    x = layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"], eps)
    # Google's BERT adds -10000 to masked logits; any large negative gives the same softmax.
    bias = (1.0 - np.asarray(padding_mask, dtype=np.float64))[:, None, None, :] * -1e9

    def split(t):
        return t.reshape(batch, length, heads, head_size).transpose(0, 2, 1, 3)

    for i in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{i}/"

        def dense(t, name):
            return t @ w[p + name + "/kernel"] + w[p + name + "/bias"]

        q = split(dense(x, "attention/self/query"))
        k = split(dense(x, "attention/self/key"))
        v = split(dense(x, "attention/self/value"))
        logits = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head_size) + bias
        logits -= logits.max(-1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
        attention = dense(context, "attention/output/dense")
        x = layer_norm(
            attention + x,
            w[p + "attention/output/LayerNorm/gamma"],
            w[p + "attention/output/LayerNorm/beta"],
            eps,
        )
        hidden = gelu(dense(x, "intermediate/dense"), approximate)
        x = layer_norm(
            dense(hidden, "output/dense") + x,
            w[p + "output/LayerNorm/gamma"],
            w[p + "output/LayerNorm/beta"],
            eps,
        )
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    return x, pooled


def random_bert_weights(config, seed=0, with_mlm_head=False):
    """Google-named random arrays for `config` (scale large enough to exercise GELU)."""
    rng = np.random.default_rng(seed)
    h, inter = config.hidden_size, config.intermediate_size

    def normal(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    weights = {
        "bert/embeddings/word_embeddings": normal(config.vocab_size, h, scale=0.5),
        "bert/embeddings/position_embeddings": normal(config.max_position_embeddings, h),
        "bert/embeddings/token_type_embeddings": normal(config.type_vocab_size, h),
        "bert/embeddings/LayerNorm/gamma": 1 + normal(h, scale=0.1),
        "bert/embeddings/LayerNorm/beta": normal(h, scale=0.1),
        "bert/pooler/dense/kernel": normal(h, h),
        "bert/pooler/dense/bias": normal(h),
    }
    for i in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{i}/"
        for name, shape in (
            ("attention/self/query", (h, h)),
            ("attention/self/key", (h, h)),
            ("attention/self/value", (h, h)),
            ("attention/output/dense", (h, h)),
            ("intermediate/dense", (h, inter)),
            ("output/dense", (inter, h)),
        ):
            weights[p + name + "/kernel"] = normal(*shape)
            weights[p + name + "/bias"] = normal(shape[1], scale=0.1)
        for name in ("attention/output/LayerNorm", "output/LayerNorm"):
            weights[p + name + "/gamma"] = 1 + normal(h, scale=0.1)
            weights[p + name + "/beta"] = normal(h, scale=0.1)
    if with_mlm_head:
        weights["cls/predictions/transform/dense/kernel"] = normal(h, h)
        weights["cls/predictions/transform/dense/bias"] = normal(h)
        weights["cls/predictions/transform/LayerNorm/gamma"] = 1 + normal(h, scale=0.1)
        weights["cls/predictions/transform/LayerNorm/beta"] = normal(h)
        weights["cls/predictions/output_bias"] = normal(config.vocab_size)
    return weights
