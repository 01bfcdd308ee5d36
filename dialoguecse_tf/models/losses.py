"""The NT-Xent objective of eq. 8 over one positive and K - 1 negative pairs per example.

Pairs are laid out [B, K, D]: pair k of example b is (context-free embedding of candidate
k, its context-aware embedding), candidate 0 being the true response.
"""

from keras import ops

# A floor on the squared norm, as in tf.math.l2_normalize: a zero vector (a context
# with no valid turn) gets cosine 0 instead of NaN. `keras.ops.normalize` is not used:
# it clips rsqrt(0) = inf afterwards, and the gradient through that inf is NaN.
_SQUARED_NORM_EPSILON = 1e-12


def _l2_normalize(x):
    squared_norm = ops.sum(ops.square(x), axis=-1, keepdims=True)
    return x * ops.rsqrt(ops.maximum(squared_norm, _SQUARED_NORM_EPSILON))


def pair_similarities(context_free, context_aware):
    """Cosine similarity of each pair: [B, K, D] x [B, K, D] -> [B, K]."""
    return ops.sum(_l2_normalize(context_free) * _l2_normalize(context_aware), axis=-1)


def nt_xent_per_example_loss(similarities, temperature: float):
    """[B, K] cosines -> [B] losses, -log softmax(similarities[b] / temperature)[0].

    Per-example so that a distributed loop can average over the global batch
    (`tf.nn.compute_average_loss`) rather than over each replica's share.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}")
    logits = similarities / temperature
    return ops.logsumexp(logits, axis=-1) - logits[:, 0]


def nt_xent_loss(context_free, context_aware, temperature: float):
    """Eq. 8: the mean over the batch of the per-example NT-Xent loss (a scalar)."""
    similarities = pair_similarities(context_free, context_aware)
    return ops.mean(nt_xent_per_example_loss(similarities, temperature))
