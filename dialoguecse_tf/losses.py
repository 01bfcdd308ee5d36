"""Every training loss, as a function of embeddings or scores (never of a model).

Each loss has a per-example form, reduced by `example_means` over `mean_denominators` so
that under a distribution strategy the replicas' losses add up to the global-batch mean and
their summed gradients equal one device's. `gather_across_replicas` is the building block
of in-batch losses whose negatives are the other examples of the whole global batch.

Layout of the pair losses: [B, K, D] pairs, pair k of example b compared, candidate 0 of
each example being the positive.

Precision: similarities, temperatures, softmax and losses are computed in float32 whatever the
model computes in (`precision`: a cosine / 0.05 logit in bfloat16 keeps about 3 significant
digits), so each function here casts 16-bit float embeddings, similarities or scores it is given
to float32 first (float32 and float64 inputs, which every model gives it, are left as they are).
"""

import keras
import tensorflow as tf
from keras import ops

# A floor on the squared norm, as in tf.math.l2_normalize: a zero vector (a context
# with no valid turn) gets cosine 0 instead of NaN. `keras.ops.normalize` is not used:
# it clips rsqrt(0) = inf afterwards, and the gradient through that inf is NaN.
_SQUARED_NORM_EPSILON = 1e-12


def _at_least_float32(x):
    """`x` cast to float32 when it is a 16-bit float (mixed precision), else as it is."""
    x = ops.convert_to_tensor(x)
    return ops.cast(x, "float32") if keras.backend.standardize_dtype(x.dtype) in ("float16", "bfloat16") else x


def l2_normalize(x):
    """Scales each vector of the last axis to unit length; a zero vector stays zero.

    Args:
      x: float Tensor of shape [..., D].

    Returns:
      float Tensor of shape [..., D], `x` over max(||x||, 1e-6) along the last axis.
    """
    squared_norm = ops.sum(ops.square(x), axis=-1, keepdims=True)
    return x * ops.rsqrt(ops.maximum(squared_norm, _SQUARED_NORM_EPSILON))


def pair_similarities(first, second):
    """Cosine similarity of each pair of vectors.

    Args:
      first: float Tensor of shape [..., D].
      second: float Tensor of the same shape [..., D].

    Returns:
      float Tensor of shape [...], float32 at least: cos(first[i], second[i]); 0 where either
      vector is zero.
    """
    first, second = _at_least_float32(first), _at_least_float32(second)
    return ops.sum(l2_normalize(first) * l2_normalize(second), axis=-1)


def _check_temperature(temperature: float) -> None:
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}")


def nt_xent_per_example_loss(similarities, temperature: float):
    """DialogueCSE's eq. 8 per example: -log softmax(similarities[b] / tau)[0].

    Args:
      similarities: float Tensor of shape [B, K], the cosines of each example's K pairs,
        pair 0 the positive.
      temperature: tau, positive.

    Returns:
      float Tensor of shape [B], float32 at least, each example's loss.

    Raises:
      ValueError: if `temperature` is not positive.
    """
    _check_temperature(temperature)
    logits = _at_least_float32(similarities) / temperature
    return ops.logsumexp(logits, axis=-1) - logits[:, 0]


def released_nt_xent_per_example_loss(similarities, temperature: float):
    """The released code's form of eq. 8 (dse_cl_bert.py:197): `-reduce_mean(log_softmax(cos / tau)
    * labels)` over all B * K entries, i.e. each example's NT-Xent divided by K.

    Args:
      similarities: float Tensor of shape [B, K], pair 0 of each example the positive.
      temperature: tau, positive.

    Returns:
      float32 Tensor of shape [B]: `nt_xent_per_example_loss` / K.

    Raises:
      ValueError: if `temperature` is not positive.
    """
    return nt_xent_per_example_loss(similarities, temperature) / ops.cast(ops.shape(similarities)[-1], "float32")


def nt_xent_loss(context_free, context_aware, temperature: float):
    """Eq. 8 on one device: the batch mean of `nt_xent_per_example_loss`.

    Args:
      context_free: float Tensor of shape [B, K, D], candidate 0 of each example the positive.
      context_aware: float Tensor of shape [B, K, D], compared with `context_free` pair by pair.
      temperature: tau, positive.

    Returns:
      float scalar Tensor.

    Raises:
      ValueError: if `temperature` is not positive.
    """
    return ops.mean(nt_xent_per_example_loss(pair_similarities(context_free, context_aware), temperature))


def ranking_per_example_loss(scores):
    """Softmax cross-entropy ranking the positive (index 0) first.

    The SiameseBERT baselines' loss over their matching layer's scores.

    Args:
      scores: float Tensor of shape [B, K], logits of each example's K candidates.

    Returns:
      float Tensor of shape [B], float32 at least, -log softmax(scores[b])[0].
    """
    labels = ops.zeros_like(scores[:, 0], dtype="int32")
    return keras.losses.sparse_categorical_crossentropy(labels, _at_least_float32(scores), from_logits=True)


def masked_lm_per_token_loss(labels, logits):
    """Cross-entropy of each masked position.

    Args:
      labels: int Tensor of shape [B, P], the original token id at each masked position.
      logits: float Tensor of shape [B, P, V], cast to float32 first (mixed precision).

    Returns:
      float32 Tensor of shape [B, P]; the caller weights out the padding positions.
    """
    return keras.losses.sparse_categorical_crossentropy(labels, tf.cast(logits, tf.float32), from_logits=True)


def mean_denominators(weights, batch_size, global_batch_size: int):
    """(global, local) denominators of the means of per-example terms: the loss's over the
    global batch, the metrics' over this replica's `batch_size` examples.

    Computed from a replica's whole batch, they stay fixed while its examples pass through
    the model in parts, so the parts' terms add up to the whole batch's means.

    Args:
      weights: None, every example weighs 1 and the global batch size needs no
        communication; or a Tensor of shape [b], each example's weight (e.g. its masked
        tokens), whose global sum is gathered from every replica (an all-reduce, so call it
        in a replica context).
      batch_size: int scalar (Tensor), this replica's number of examples b.
      global_batch_size: int, the examples of all replicas in one step.

    Returns:
      (total, local), float32 scalar Tensors: the global batch's weight (at least 1) and this
      replica's (at least 1; `batch_size` when `weights` is None).
    """
    if weights is None:
        return tf.constant(float(global_batch_size)), tf.cast(batch_size, tf.float32)
    local = tf.reduce_sum(tf.cast(weights, tf.float32))
    total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, local)
    return tf.maximum(total, 1.0), tf.maximum(local, 1.0)


def example_means(terms, metric_terms: dict, denominators) -> tuple:
    """Sums per-example terms over `mean_denominators`.

    Args:
      terms: Tensor of shape [b], the per-example loss of this replica's examples (or of a
        part of them).
      metric_terms: {name: Tensor of shape [b]}, per-example values to log.
      denominators: the (total, local) pair `mean_denominators` returns.

    Returns:
      (loss, metrics): this replica's share of the global loss, a float32 scalar Tensor
      (sum(terms) / total), and {name: float32 scalar Tensor}, its share of the
      replica-local mean (sum / local).
    """
    total, local = denominators

    def summed(values):
        # float32 even when the model computes in float16 (mixed precision).
        return tf.reduce_sum(tf.cast(values, tf.float32))

    return summed(terms) / total, {name: summed(values) / local for name, values in metric_terms.items()}


def gather_across_replicas(tensor):
    """This replica's `tensor` and every replica's, concatenated in replica order.

    Gradients flow back to the local rows only, as in SimCSE's and DSE's distributed losses:
    each replica differentiates its own anchors against every replica's examples.

    Args:
      tensor: Tensor of shape [b, ...], this replica's rows (every replica with the same b).

    Returns:
      (gathered, offset): a Tensor of shape [b * R, ...] for R replicas, and the index of
      this replica's first row in it (int, or an int32 scalar Tensor where the replica id is
      not static). Outside a strategy or with one replica: (`tensor`, 0).
    """
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return tensor, 0
    gathered = context.all_gather(tf.stop_gradient(tensor), axis=0)
    replica = tf.get_static_value(context.replica_id_in_sync_group)
    if replica is None:
        replica = context.replica_id_in_sync_group
    offset = replica * tf.shape(tensor)[0]
    # The local rows are put back with their gradient path intact.
    before = gathered[:offset]
    after = gathered[offset + tf.shape(tensor)[0]:]
    return tf.concat([before, tensor, after], axis=0), offset


CONTRAST_TYPES = ("HardNeg", "Orig")
# Logit given to the masked-out entries (self and partner): exp() of it is exactly 0.
_MASKED_LOGIT = -1e9


def pair_layout(num_pairs):
    """Which of the 2N texts [first; second] of N pairs are each other's partners.

    Args:
      num_pairs: int or int32 scalar Tensor, N.

    Returns:
      (partner, excluded): int32 Tensor of shape [2N], each text's partner index (a + N mod
      2N), and bool Tensor of shape [2N, 2N], True at [a, b] where b is a or its partner
      (what is not a negative of anchor a).
    """
    partner = tf.concat([tf.range(num_pairs, 2 * num_pairs), tf.range(num_pairs)], axis=0)
    excluded = tf.logical_or(tf.eye(2 * num_pairs, dtype=tf.bool), tf.cast(tf.one_hot(partner, 2 * num_pairs), tf.bool))
    return partner, excluded


def dse_per_anchor_loss(first, second, temperature: float, contrast_type: str = "HardNeg"):
    """DSE's loss (the released `pretrain/utils/contrastive_utils.py`, `HardConLoss`) of N pairs.

    The 2N texts f = [first; second] are anchors in turn; anchor a's positive is its
    partner, its negatives the other 2N - 2 texts. With l_ab = f_a . f_b / tau:

    * Orig: -log(exp(l_a,p) / (exp(l_a,p) + sum_b exp(l_ab))), symmetric NT-Xent;
    * HardNeg: the negatives' sum replaced by sum_b alpha_ab exp(l_ab), alpha_ab =
      exp(l_ab) / mean_b' exp(l_ab') (l.46-51). alpha is NOT stopped from the gradient
      (the release's `neg.log().exp()` is a differentiable identity); the weight multiplies
      exp(l) outside the exponent, whereas the paper's eq. 1 puts alpha inside it
      (exp(alpha sim / tau)) and normalises over k != i+ only; the code is followed.

    Computed in log space (log sum_b alpha_ab exp(l_ab) = logsumexp(2 l) - logmeanexp(l)),
    which is the release's plain exp/log arithmetic without its overflow risk.

    Args:
      first: float Tensor of shape [N, D], L2-normalised projections of the pairs' first sides.
      second: float Tensor of shape [N, D], the second sides, likewise normalised.
      temperature: tau, positive.
      contrast_type: "HardNeg" or "Orig" (`CONTRAST_TYPES`).

    Returns:
      float Tensor of shape [2N], float32 at least, the per-anchor losses (first sides'
      anchors, then second sides'); the release's loss is their mean.

    Raises:
      ValueError: if `temperature` is not positive or `contrast_type` is unknown.
    """
    _check_temperature(temperature)
    if contrast_type not in CONTRAST_TYPES:
        raise ValueError(f"contrast_type must be one of {CONTRAST_TYPES}, got {contrast_type!r}")
    num_pairs = tf.shape(first)[0]
    texts = tf.concat([_at_least_float32(first), _at_least_float32(second)], axis=0)
    logits = tf.matmul(texts, texts, transpose_b=True) / temperature
    partner, excluded = pair_layout(num_pairs)
    positive = tf.gather(logits, partner, batch_dims=1)
    negatives = tf.where(excluded, _MASKED_LOGIT, logits)
    if contrast_type == "Orig":
        log_negative_mass = tf.reduce_logsumexp(negatives, axis=-1)
    else:
        num_negatives = tf.cast(2 * num_pairs - 2, logits.dtype)
        log_negative_mass = (tf.reduce_logsumexp(2.0 * negatives, axis=-1)
                             - (tf.reduce_logsumexp(negatives, axis=-1) - tf.math.log(num_negatives)))
    return tf.math.reduce_logsumexp(tf.stack([positive, log_negative_mass], axis=-1), axis=-1) - positive


def simcse_per_anchor_loss(first, second, temperature: float):
    """Unsupervised SimCSE's loss (Gao et al., EMNLP 2021, eq. 1; the released `simcse/models.py`,
    `cl_forward`, l.194-212) of N pairs of views.

    With l_ij = cos(z1_i, z2_j) / tau, anchor i's loss is the cross-entropy of row i of l with
    label i: -log(exp(l_ii) / sum_j exp(l_ij)), its N - 1 negatives the other rows' second
    views only. One direction: z2_i is never an anchor, and no z1_j is a negative (DSE's
    `dse_per_anchor_loss` uses both).

    Args:
      first: float Tensor of shape [N, D], the views z1 (not normalised: the release's
        `Similarity` takes their cosine, l.35-46).
      second: float Tensor of shape [N, D], the views z2.
      temperature: tau, positive.

    Returns:
      float Tensor of shape [N], float32 at least, the per-anchor losses; the release's
      `CrossEntropyLoss` is their mean.

    Raises:
      ValueError: if `temperature` is not positive.
    """
    _check_temperature(temperature)
    first, second = _at_least_float32(first), _at_least_float32(second)
    logits = tf.matmul(l2_normalize(first), l2_normalize(second), transpose_b=True) / temperature
    return tf.reduce_logsumexp(logits, axis=-1) - tf.linalg.diag_part(logits)


def replica_share_of_global_loss(global_loss):
    """This replica's share of a loss every replica computes in full over the global batch.

    In-batch losses whose negatives are the whole global batch (DSE, SimCSE) are computed by
    each replica on `gather_across_replicas` outputs, whose local rows alone carry gradients.
    Returning `global_loss` / R would make the replicas' summed gradients 1/R of one
    device's; returning `global_loss` would make the logged loss R times too large. The share
    has the value global_loss / R (the replicas add up to the global loss) and the gradient
    of the full `global_loss` with respect to the local rows, so the replicas' summed
    gradients equal one device's exactly.

    Args:
      global_loss: float scalar Tensor, the loss over the whole global batch.

    Returns:
      float scalar Tensor, `global_loss` itself outside a strategy or with one replica.
    """
    context = tf.distribute.get_replica_context()
    replicas = 1 if context is None else context.num_replicas_in_sync
    if replicas == 1:
        return global_loss
    return global_loss - tf.stop_gradient(global_loss) * (1.0 - 1.0 / replicas)
