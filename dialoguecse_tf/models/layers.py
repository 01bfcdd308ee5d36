"""The DialogueCSE heads: matching-guided embedding (eq. 3-4), turn aggregation (eq. 5-7), and
the released code's round attention.

Shapes: B examples, T context turns, K candidates (the true response first, then its
negatives), L tokens per sequence, D = BERT's hidden size.
"""

import math

import keras
import numpy as np
from keras import ops

from dialoguecse_tf.encoder.pooling import masked_mean

AGGREGATIONS = ("mean", "attention")

# The paper (eq. 6) only says "a two-layer feed-forward network with ReLU"; 256 hidden
# units is a common size for such scoring MLPs and adds only ~0.2M weights to BERT-base.
DEFAULT_ATTENTION_HIDDEN_SIZE = 256


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class MatchingGuidedEmbedding(keras.layers.Layer):
    """Eq. 3-4 for every (context utterance u, candidate r) pair of a batch.

    For one pair, with U = BERT(u) and R = BERT(r) both [L, D]:
    `M = U R^T / sqrt(D)` ([L_u, L_r]) and `R_hat = M R` ([L_u, D]), so row i of R_hat
    is a mix of r's token vectors weighted by their match with u's i-th token. The rows
    of M at u's padding positions and its columns at r's padding positions are zeroed,
    so padding contributes nothing and R_hat is zero at u's padding rows.

    No weights. Memory grows as B*K*T*L*(L + D): the matching tensors are materialised
    literally.
    """

    def call(self, context_tokens, context_mask, candidate_tokens, candidate_mask):
        """R_hat for every (context turn, candidate) pair of each example.

        Args:
          context_tokens: float Tensor of shape [B, T, L, D], the context turns' BERT outputs.
          context_mask: Tensor of shape [B, T, L], 1 for a real token.
          candidate_tokens: float Tensor of shape [B, K, L, D].
          candidate_mask: Tensor of shape [B, K, L].

        Returns:
          R_hat, float Tensor of shape [B, K, T, L, D] (row i indexed by turn t's token i);
          zero at the context's padding rows.
        """
        scale = 1.0 / math.sqrt(context_tokens.shape[-1])
        matching = ops.einsum("btid,bkjd->bktij", context_tokens, candidate_tokens) * scale
        u_mask = ops.cast(context_mask, matching.dtype)[:, None, :, :, None]
        r_mask = ops.cast(candidate_mask, matching.dtype)[:, :, None, None, :]
        matching = matching * u_mask * r_mask
        return ops.einsum("bktij,bkjd->bktid", matching, candidate_tokens)


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class TurnAggregation(keras.layers.Layer):
    """Fuses the refined matrices of all turns and pools them: [B, K, T, L, D] -> [B, K, D].

    Pooling order and mask. The paper fuses R_tilde = sum_i alpha_i R_hat_i (eq. 5 / 7)
    and then mean-pools it along the sequence (the `sim` of eq. 8). The rows of R_hat_i
    are indexed by u_i's token positions, so the only mask that says which rows are real
    is u_i's own `context_input_mask` (the response's mask indexes M's columns, already
    applied inside R_hat_i); different turns have different masks, so this layer pools
    each R_hat_i over u_i's real tokens. Mean pooling of a fixed row set is linear, hence
    pool(sum_i alpha_i R_hat_i) = sum_i alpha_i pool(R_hat_i): pooling every turn first
    and then aggregating gives the pooled R_tilde exactly, without materialising R_tilde
    and with every turn averaged over its own length (a long utterance does not outweigh
    a short one, in the spirit of the paper's "turn-level unbiased aggregation").

    Aggregation over turns uses `turn_mask`, so padding turns take no part:
    * "mean" (I2, eq. 7): the plain average over the valid turns (divided by their
      count, not by T).
    * "attention" (I1, eq. 5-6): Dense(attention_hidden_size, relu) -> Dense(1) scores
      each turn's pooled R_hat_i (eq. 6 needs a scalar per turn; pooling first is the
      one choice consistent with the linearity above), softmax over the valid turns.
    A sample with no valid turn gets the zero vector rather than NaN.
    """

    def __init__(self, aggregation: str = "mean",
                 attention_hidden_size: int = DEFAULT_ATTENTION_HIDDEN_SIZE, **kwargs):
        """Constructor for TurnAggregation.

        Args:
          aggregation: "mean" (I2) or "attention" (I1); `AGGREGATIONS`.
          attention_hidden_size: positive int, the scoring FFN's hidden units ("attention").
          **kwargs: keras.layers.Layer's (name, dtype).

        Raises:
          ValueError: for an unknown `aggregation` or a non-positive `attention_hidden_size`.
        """
        super().__init__(**kwargs)
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        if isinstance(attention_hidden_size, bool) or not isinstance(attention_hidden_size, int) \
                or attention_hidden_size <= 0:
            raise ValueError(f"attention_hidden_size must be a positive int, got {attention_hidden_size!r}")
        self.aggregation = aggregation
        self.attention_hidden_size = attention_hidden_size
        if aggregation == "attention":
            # The sublayers follow this layer's dtype policy, so a float32 head stays
            # float32 under a mixed-precision global policy.
            self.attention_hidden = keras.layers.Dense(
                attention_hidden_size, activation="relu", dtype=self.dtype_policy, name="attention_hidden"
            )
            self.attention_score = keras.layers.Dense(1, dtype=self.dtype_policy, name="attention_score")

    def build(self, refined_shape):
        if self.aggregation == "attention":
            dim = refined_shape[-1]
            self.attention_hidden.build((None, dim))
            self.attention_score.build((None, self.attention_hidden_size))

    def call(self, refined, token_mask, turn_mask):
        """Pools each turn's R_hat over its own tokens, then aggregates the valid turns.

        Args:
          refined: float Tensor of shape [B, K, T, L, D], MatchingGuidedEmbedding's R_hat.
          token_mask: Tensor of shape [B, T, L], the context utterances' `context_input_mask`.
          turn_mask: Tensor of shape [B, T], `context_turn_mask` (0 = a padding turn of a
            context shorter than T).

        Returns:
          float Tensor of shape [B, K, D], the pooled R_tilde of each candidate; zeros for an
          example with no valid turn.
        """
        pooled = masked_mean(refined, ops.expand_dims(token_mask, 1))  # [B, K, T, D]
        valid = ops.cast(turn_mask, pooled.dtype)[:, None, :]  # [B, 1, T]
        if self.aggregation == "mean":
            weights = valid / ops.maximum(ops.sum(valid, axis=-1, keepdims=True), 1.0)
        else:
            scores = self.attention_score(self.attention_hidden(pooled))[..., 0]  # [B, K, T]
            # A finite floor rather than -inf: a row with no valid turn would otherwise
            # give softmax(-inf - -inf) = NaN; its uniform weights are zeroed below.
            floor = float(np.finfo(keras.backend.standardize_dtype(scores.dtype)).min)
            scores = ops.where(valid > 0, scores, floor)
            weights = ops.softmax(scores, axis=-1) * valid
        return ops.sum(pooled * weights[..., None], axis=2)

    def get_config(self):
        return {
            **super().get_config(),
            "aggregation": self.aggregation,
            "attention_hidden_size": self.attention_hidden_size,
        }


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class RoundAttention(keras.layers.Layer):
    """The released code's round attention (`model/pooling.py`, `attentive_pooling`).

    `call` gives the weights alpha of R rounds: score_i = u . tanh(W x_i + b) (W [D, size],
    b and u [size], all initialised N(0, 0.1) as in pooling.py:23-28), softmax over the
    valid rounds (invalid ones get -(2^32 - 1) as in pooling.py:35-37; a row with no valid
    round gets uniform weights, as there). One layer
    with tanh and a context vector, not the paper's two-layer ReLU FFN (eq. 6).
    """

    def __init__(self, size: int = 256, **kwargs):
        """Constructor for RoundAttention.

        Args:
          size: int, the units of W, b and u.
          **kwargs: keras.layers.Layer's (name, dtype).
        """
        super().__init__(**kwargs)
        self.size = size

    def build(self, rounds_shape):
        initializer = keras.initializers.RandomNormal(stddev=0.1)
        dim = rounds_shape[-1]
        self.w = self.add_weight(name="w", shape=(dim, self.size), initializer=initializer)
        self.b = self.add_weight(name="b", shape=(self.size,), initializer=initializer)
        self.u = self.add_weight(name="u", shape=(self.size,), initializer=initializer)

    def call(self, rounds, round_mask):
        """Weights each valid round.

        Args:
          rounds: float Tensor of shape [B, R, D], one vector x_i per round.
          round_mask: Tensor of shape [B, R], nonzero for a valid round.

        Returns:
          alpha, float Tensor of shape [B, R]: a softmax over the valid rounds (0 at the
          others), uniform 1/R where no round is valid.
        """
        scores = ops.sum(ops.tanh(ops.matmul(rounds, self.w) + self.b) * self.u, axis=-1)
        scores = ops.where(ops.cast(round_mask, "bool"), scores, -(2.0**32) + 1.0)
        return ops.softmax(scores, axis=-1)

    def get_config(self):
        return {**super().get_config(), "size": self.size}
