"""Every training loss, as a function of embeddings or scores (never of a model).

Each loss has a per-example form, reduced by `example_means` over `mean_denominators` so
that under a distribution strategy the replicas' losses add up to the global-batch mean and
their summed gradients equal one device's. `gather_across_replicas` is the building block
of in-batch losses whose negatives are the other examples of the whole global batch.

Layout of the pair losses: [B, K, D] pairs, pair k of example b compared, candidate 0 of
each example being the positive.
"""

import keras
import tensorflow as tf
from keras import ops

# A floor on the squared norm, as in tf.math.l2_normalize: a zero vector (a context
# with no valid turn) gets cosine 0 instead of NaN. `keras.ops.normalize` is not used:
# it clips rsqrt(0) = inf afterwards, and the gradient through that inf is NaN.
_SQUARED_NORM_EPSILON = 1e-12


def l2_normalize(x):
    squared_norm = ops.sum(ops.square(x), axis=-1, keepdims=True)
    return x * ops.rsqrt(ops.maximum(squared_norm, _SQUARED_NORM_EPSILON))


def pair_similarities(first, second):
    """Cosine similarity of each pair: [..., D] x [..., D] -> [...]."""
    return ops.sum(l2_normalize(first) * l2_normalize(second), axis=-1)


def _check_temperature(temperature: float) -> None:
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}")


def nt_xent_per_example_loss(similarities, temperature: float):
    """DialogueCSE's eq. 8: [B, K] cosines -> [B] losses, -log softmax(similarities[b] / tau)[0]."""
    _check_temperature(temperature)
    logits = similarities / temperature
    return ops.logsumexp(logits, axis=-1) - logits[:, 0]


def released_nt_xent_per_example_loss(similarities, temperature: float):
    """The released code's form of eq. 8 (dse_cl_bert.py:197): `-reduce_mean(log_softmax(cos / tau)
    * labels)` over all B * K entries, i.e. each example's NT-Xent divided by K."""
    return nt_xent_per_example_loss(similarities, temperature) / ops.cast(ops.shape(similarities)[-1], "float32")


def nt_xent_loss(context_free, context_aware, temperature: float):
    """Eq. 8 on one device: the batch mean of the per-example loss of [B, K, D] pairs."""
    return ops.mean(nt_xent_per_example_loss(pair_similarities(context_free, context_aware), temperature))


def ranking_per_example_loss(scores):
    """Softmax cross-entropy ranking the positive (index 0) first: [B, K] scores -> [B].

    The SiameseBERT baselines' loss over their matching layer's scores.
    """
    labels = ops.zeros_like(scores[:, 0], dtype="int32")
    return keras.losses.sparse_categorical_crossentropy(labels, scores, from_logits=True)


def masked_lm_per_token_loss(labels, logits):
    """Cross-entropy of each masked position: [B, P] labels, [B, P, V] logits -> [B, P]."""
    return keras.losses.sparse_categorical_crossentropy(labels, tf.cast(logits, tf.float32), from_logits=True)


def mean_denominators(weights, batch_size, global_batch_size: int):
    """(global, local) denominators of the means of per-example terms: the loss's over the
    global batch, the metrics' over this replica's `batch_size` examples.

    `weights` [b]: each example's weight (e.g. its masked tokens), the global sum gathered from
    every replica; None: every example weighs 1, and the global batch size needs no
    communication. Computed from a replica's whole batch, they stay fixed while its examples
    pass through the model in parts, so the parts' terms add up to the whole batch's means.
    """
    if weights is None:
        return tf.constant(float(global_batch_size)), tf.cast(batch_size, tf.float32)
    local = tf.reduce_sum(tf.cast(weights, tf.float32))
    total = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, local)
    return tf.maximum(total, 1.0), tf.maximum(local, 1.0)


def example_means(terms, metric_terms: dict, denominators) -> tuple:
    """(this replica's share of the global loss, {name: its share of the replica-local mean}) of
    per-example loss `terms` [b] and `metric_terms` {name: [b]}, over `mean_denominators`."""
    total, local = denominators

    def summed(values):
        # float32 even when the model computes in float16 (mixed precision).
        return tf.reduce_sum(tf.cast(values, tf.float32))

    return summed(terms) / total, {name: summed(values) / local for name, values in metric_terms.items()}


def gather_across_replicas(tensor):
    """This replica's `tensor` [b, ...] and every replica's, concatenated in replica order.

    Returns (gathered [b * replicas, ...], offset of this replica's rows in it). Gradients
    flow back to the local rows only, as in SimCSE's and DSE's distributed losses: each
    replica differentiates its own anchors against every replica's examples.
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
    """The 2N texts [first; second] of N pairs: each text's partner index [2N], and [2N, 2N]
    True where b is a or its partner (what is not a negative of anchor a)."""
    partner = tf.concat([tf.range(num_pairs, 2 * num_pairs), tf.range(num_pairs)], axis=0)
    excluded = tf.logical_or(tf.eye(2 * num_pairs, dtype=tf.bool), tf.cast(tf.one_hot(partner, 2 * num_pairs), tf.bool))
    return partner, excluded


def dse_per_anchor_loss(first, second, temperature: float, contrast_type: str = "HardNeg"):
    """DSE's loss (the released `pretrain/utils/contrastive_utils.py`, `HardConLoss`) of N pairs.

    `first`, `second`: [N, D] L2-normalised projections of the pairs' two sides. The 2N
    texts f = [first; second] are anchors in turn; anchor a's positive is its partner, its
    negatives the other 2N - 2 texts. With l_ab = f_a . f_b / tau:

    * Orig: -log(exp(l_a,p) / (exp(l_a,p) + sum_b exp(l_ab))), symmetric NT-Xent;
    * HardNeg: the negatives' sum replaced by sum_b alpha_ab exp(l_ab), alpha_ab =
      exp(l_ab) / mean_b' exp(l_ab') (l.46-51). alpha is NOT stopped from the gradient
      (the release's `neg.log().exp()` is a differentiable identity); the weight multiplies
      exp(l) outside the exponent, whereas the paper's eq. 1 puts alpha inside it
      (exp(alpha sim / tau)) and normalises over k != i+ only; the code is followed.

    Computed in log space (log sum_b alpha_ab exp(l_ab) = logsumexp(2 l) - logmeanexp(l)),
    which is the release's plain exp/log arithmetic without its overflow risk. Returns the
    [2N] per-anchor losses; the release's loss is their mean.
    """
    _check_temperature(temperature)
    if contrast_type not in CONTRAST_TYPES:
        raise ValueError(f"contrast_type must be one of {CONTRAST_TYPES}, got {contrast_type!r}")
    num_pairs = tf.shape(first)[0]
    texts = tf.concat([first, second], axis=0)
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

    `first`, `second`: [N, D] the two views z1, z2 (not normalised: `Similarity` takes their
    cosine, l.35-46). With l_ij = cos(z1_i, z2_j) / tau, anchor i's loss is the cross-entropy of
    row i of l with label i: -log(exp(l_ii) / sum_j exp(l_ij)), its N - 1 negatives the other
    rows' second views only. One direction: z2_i is never an anchor, and no z1_j is a negative
    (DSE's `dse_per_anchor_loss` uses both). Returns the [N] per-anchor losses; the release's
    `CrossEntropyLoss` is their mean.
    """
    _check_temperature(temperature)
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
    """
    context = tf.distribute.get_replica_context()
    replicas = 1 if context is None else context.num_replicas_in_sync
    if replicas == 1:
        return global_loss
    return global_loss - tf.stop_gradient(global_loss) * (1.0 - 1.0 / replicas)
