"""DialogueCSE (Liu et al., EMNLP 2021): BERT + matching-guided embedding + turn aggregation."""

import keras
from keras import ops

from dialoguecse_tf.encoder.backbone import backbone_config, backbone_from_config, check_num_length_buckets, encode_sequences
from dialoguecse_tf.losses import l2_normalize
from dialoguecse_tf.models.layers import (
    DEFAULT_ATTENTION_HIDDEN_SIZE,
    MatchingGuidedEmbedding,
    RoundAttention,
    TurnAggregation,
)
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.records.contrastive import (
    CANDIDATE_INPUT_IDS,
    CANDIDATE_INPUT_MASK,
    CONTEXT_INPUT_IDS,
    CONTEXT_INPUT_MASK,
    CONTEXT_TURN_MASK,
)


def encode_contexts_and_candidates(backbone, inputs, training, num_length_buckets: int):
    """Encodes a batch's context turns and candidates in one backbone call (a context is
    encoded once, whatever the number of its candidates).

    Args:
      backbone: a keras-hub `BertBackbone`.
      inputs: the batched `ContrastiveRecordSpec` dict (`context_input_ids`,
        `context_input_mask` [B, T, L], `context_turn_mask` [B, T], `candidate_input_ids`,
        `candidate_input_mask` [B, K, L]).
      training: bool, whether dropout is on.
      num_length_buckets: positive int, see `backbone.encode_sequences`.

    Returns:
      (context tokens [B, T, L, D], context mask [B, T, L], turn mask [B, T], candidate
      tokens [B, K, L, D], candidate mask [B, K, L]): the tokens float32, the masks int32.

    Raises:
      ValueError: if context and candidate sequences differ in length L.
    """
    context_ids = ops.cast(inputs[CONTEXT_INPUT_IDS], "int32")
    context_mask = ops.cast(inputs[CONTEXT_INPUT_MASK], "int32")
    turn_mask = ops.cast(inputs[CONTEXT_TURN_MASK], "int32")
    candidate_ids = ops.cast(inputs[CANDIDATE_INPUT_IDS], "int32")
    candidate_mask = ops.cast(inputs[CANDIDATE_INPUT_MASK], "int32")
    _, num_turns, seq_length = context_ids.shape
    num_candidates = candidate_ids.shape[1]
    if candidate_ids.shape[2] != seq_length:
        raise ValueError(
            f"context and candidate sequences must share one length to be encoded together, "
            f"got {seq_length} and {candidate_ids.shape[2]}"
        )
    num_context_sequences = ops.shape(context_ids)[0] * num_turns
    tokens = encode_sequences(
        backbone,
        ops.concatenate([ops.reshape(context_ids, (-1, seq_length)), ops.reshape(candidate_ids, (-1, seq_length))],
                        axis=0),
        ops.concatenate([ops.reshape(context_mask, (-1, seq_length)),
                         ops.reshape(candidate_mask, (-1, seq_length))], axis=0),
        training, num_length_buckets,
    )
    dim = tokens.shape[-1]
    context_tokens = ops.reshape(tokens[:num_context_sequences], (-1, num_turns, seq_length, dim))
    candidate_tokens = ops.reshape(tokens[num_context_sequences:], (-1, num_candidates, seq_length, dim))
    return context_tokens, context_mask, turn_mask, candidate_tokens, candidate_mask


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class DialogueCSEModel(keras.Model):
    """The contrastive-stage model around a BERT backbone it is given.

    The loss (`losses.nt_xent_per_example_loss` of the cosines of `call`'s two embeddings)
    is the objective's. One backbone encodes context utterances and candidates alike (the
    paper's shared BERT), in one call per forward pass over the B*T utterances and B*K
    candidates: a context is encoded once and matched against all of its candidates. The
    frozen layers' Keras variables are non-trainable but their tf.Variables are not, so an
    eager default GradientTape still records them; a loop that wants to skip that work opens
    `tf.GradientTape(watch_accessed_variables=False)` and watches
    `[v.value for v in model.trainable_variables]`.

    Example:
      >>> model = DialogueCSEModel(build_backbone(bert_config), aggregation="attention")
      >>> outputs = model(batch)  # a batched ContrastiveRecordSpec dict
      >>> similarities = losses.pair_similarities(outputs["context_free"], outputs["context_aware"])
    """

    def __init__(
        self,
        backbone,
        aggregation: str = "mean",
        attention_hidden_size: int = DEFAULT_ATTENTION_HIDDEN_SIZE,
        num_length_buckets: int = 1,
        **kwargs,
    ):
        """Constructor for DialogueCSEModel.

        Args:
          backbone: a keras-hub `BertBackbone` from `build_backbone` (freezing is the
            objective's business).
          aggregation: "mean" (I2, eq. 7) or "attention" (I1, eq. 5-6); `AGGREGATIONS`.
          attention_hidden_size: int, the units of I1's scoring FFN; unused with "mean".
          num_length_buckets: positive int, see `backbone.encode_sequences`.
          **kwargs: keras.Model's (name, dtype).

        Raises:
          ValueError: for an unknown `aggregation`, a non-positive `attention_hidden_size`
            or `num_length_buckets`.
        """
        super().__init__(**kwargs)
        self.backbone = backbone
        self.aggregation = aggregation
        self.attention_hidden_size = attention_hidden_size
        self.num_length_buckets = check_num_length_buckets(num_length_buckets)
        # The matching products are unnormalised sums over L and D, which can overflow
        # float16; under a mixed-precision policy the head still runs in float32.
        self.matching = MatchingGuidedEmbedding(dtype="float32", name="matching_guided_embedding")
        self.turn_aggregation = TurnAggregation(
            aggregation, attention_hidden_size, dtype="float32", name="turn_aggregation"
        )
        # Building the head now creates the FFN before any data is seen, so a checkpoint
        # can restore into it and an optimizer can create its slots; with every sublayer
        # built, Keras also skips its symbolic tracing pass on the first call.
        self.matching.build(None)
        self.turn_aggregation.build((None, None, None, None, backbone.hidden_dim))

    def encode_sequences(self, token_ids, padding_mask, training=False):
        """`backbone.encode_sequences` with this model's backbone and length buckets.

        Args:
          token_ids: int Tensor of shape [N, L].
          padding_mask: int Tensor of shape [N, L], 1 for a real token.
          training: bool, whether dropout is on.

        Returns:
          float32 Tensor of shape [N, L, D], BERT's last layer.
        """
        return encode_sequences(self.backbone, token_ids, padding_mask, training, self.num_length_buckets)

    def call(self, inputs, training=False):
        """Embeds each candidate without and with its context.

        Args:
          inputs: the batched `ContrastiveRecordSpec` dict: `context_input_ids` and
            `context_input_mask` int Tensors of shape [B, T, L], `context_turn_mask` of shape
            [B, T] (0 = a padding turn), `candidate_input_ids` and `candidate_input_mask` of
            shape [B, K, L] (candidate 0 the true response); other keys are ignored.
          training: bool, whether dropout is on.

        Returns:
          A dict of the two float32 Tensors the loss compares, each of shape [B, K, D]:
            * `context_free`: each candidate's mean-pooled BERT output;
            * `context_aware`: its MGE + turn-aggregation embedding given the context.

        Raises:
          ValueError: if context and candidate sequences differ in length L.
        """
        context_tokens, context_mask, turn_mask, candidate_tokens, candidate_mask = encode_contexts_and_candidates(
            self.backbone, inputs, training, self.num_length_buckets)
        refined = self.matching(context_tokens, context_mask, candidate_tokens, candidate_mask)
        return {
            "context_free": masked_mean(candidate_tokens, candidate_mask),
            "context_aware": self.turn_aggregation(refined, context_mask, turn_mask),
        }

    def get_config(self):
        return {
            **super().get_config(),
            "backbone": backbone_config(self.backbone),
            "aggregation": self.aggregation,
            "attention_hidden_size": self.attention_hidden_size,
            "num_length_buckets": self.num_length_buckets,
        }

    @classmethod
    def from_config(cls, config):
        # As keras-hub's tasks: the backbone is rebuilt from its own config. keras.Model's
        # version would first probe the config for a functional-model layout.
        config = {**config, "backbone": backbone_from_config(config["backbone"])}
        return cls(**config)


# The released code's constants (model/dse_cl_bert.py): the matching matrix is scaled by 0.1
# (l.61) where the paper divides by sqrt(d), and the round attention has 256 units (l.23).
RELEASED_MATCHING_SCALE = 0.1
RELEASED_ATTENTION_SIZE = 256
# Which tokens index the rows of R_hat = M R before they are pooled: the context utterance's
# (the release) or the candidate's (R_hat' = M^T U, a study variant).
MATCHING_SIDES = ("context", "response")


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class ReleasedDialogueCSEModel(keras.Model):
    """DialogueCSE as the authors' released TF1 code computes it (`dialogue-cse/`,
    `model/dse_cl_bert.py`). Whether that code, with its own defaults, made the paper's
    numbers cannot be checked: its data code is not public and its defaults differ from the
    paper's stated settings (max_seq_len 100, 50 epochs, 4 towers; config_bert.py:39, 46, 50).

    Input: contrastive records of `context_layout="sides"`: `num_context_turns` slots of
    left context then as many of right context ([B, 2N, L]), the candidates [B, K, L]. For
    one candidate a (BERT's last-layer outputs masked to real tokens, as l.90-91, 122-123,
    139-140):

      r_bar_a  = masked mean of a's tokens                                     (l.148-149)
      per side s in (left, right), per round i of that side:
        M       = 0.1 * U_i R_a^T                   (paper eq. 3: U_i R_a^T / sqrt(d))
        e_{a,i} = mean over U_i's real tokens of the rows of M R_a             (l.58-66)
                = 0.1 * sum_k (u_bar_i . r_k) r_k,  u_bar_i = masked mean of U_i
      (the second form, used here, is the same number without the [L, L] matrix)
        x_i     = sum of U_i's real token vectors / L  (a mean over all L positions,
                  padding included, l.166-167)
        alpha^s = RoundAttention(x, valid rounds of side s)   (shared by both sides, l.169-172)
        R_s     = sum_i (1 + alpha^s_i) e_{a,i}                               (l.180-184)
      R_tilde_a = R_left + R_right                 (bidirectional=1, the default, l.183-184)

    Paper vs code: eq. 5-7 weight the rounds by alpha (I1) or 1/(t-1) (I2) over t-1 context
    turns; the code weights by (1 + alpha) and sums both sides. `aggregation="attention"`
    is the code exactly; `aggregation="mean"` drops alpha (a plain sum over every valid round
    of both sides, which is the paper's I2 up to a per-candidate scale the cosine ignores).
    Padding rounds (a side shorter than N) are where the release cannot be known: they are
    all padding in our records, and the release's mean over a round's tokens (l.65-66)
    divides by their count, a NaN for an empty slot, so its unreleased data code (`/data`,
    excluded by its .gitignore, imported at wrapper_bert.py:16) must have put tokens there.
    `empty_round_token_ids` chooses the reading:
      * None (this class's default; the objective's `empty_rounds="zero"`, its default before
        the padding-rounds change): a padding round contributes zero (weight 0);
      * (cls_id, sep_id) (the objective's `empty_rounds="empty_text"`, the default of variant
        released): the reading the release's arithmetic implies, the slot holds the
        BERT features of an empty text "[CLS] [SEP]". The release never multiplies a round's
        matching feature by the round mask (l.176-184), only the attention scores (pooling.py
        l.34-37), so such a slot adds e_pad with weight 1 + 0 = 1, or 1 + 1/N (4/3 for N = 3)
        when its whole side is empty and the masked softmax is uniform; with
        `aggregation="mean"` every slot weighs 1.

    `call` returns {"context_free": r_bar [B, K, D], "context_aware": R_tilde [B, K, D]}; the
    objective compares them by cosine / tau (`losses.released_nt_xent_per_example_loss`).

    Three readings the paper's text leaves open, for ablation studies only (the defaults are
    the release; none is the paper's stated method):
      * `matching_side="response"`: R_hat' = M^T U_i, whose rows are the candidate's tokens,
        pooled over them: e_{a,i} = 0.1 * sum_j (r_bar_a . u_ij) u_ij, the candidate re-expressed
        in the context's tokens (the release pools M R_a over the context's tokens);
      * `normalize_matching_tokens=True`: M built from L2-normalised token vectors (cosines
        instead of dot products); R_hat still multiplies the raw vectors;
      * `fuse_turns_before_pooling=True`: R_tilde summed over the rounds row by row as token
        matrices, then pooled once over the longest round's length (the paper's order: eq. 5/7
        fuse matrices, sim() pools), so a round weighs by its token count instead of equally.
        With `matching_side="response"` every round's rows are the candidate's tokens and the
        two orders give the same vector.
    """

    def __init__(self, backbone, aggregation: str = "attention", num_length_buckets: int = 1,
                 attention_size: int = RELEASED_ATTENTION_SIZE, matching_side: str = "context",
                 normalize_matching_tokens: bool = False, fuse_turns_before_pooling: bool = False,
                 empty_round_token_ids=None, **kwargs):
        """Constructor for ReleasedDialogueCSEModel.

        Args:
          backbone: a keras-hub `BertBackbone` from `build_backbone`.
          aggregation: "attention" (the release: weights 1 + alpha) or "mean" (weight 1).
          num_length_buckets: positive int, see `backbone.encode_sequences`.
          attention_size: int, the round attention's units (256 in the release, l.23).
          matching_side: "context" (the release) or "response"; `MATCHING_SIDES`.
          normalize_matching_tokens: bool, M from L2-normalised token vectors.
          fuse_turns_before_pooling: bool, R_tilde fused over rounds before pooling.
          empty_round_token_ids: None (a padding round adds zero) or (cls_id, sep_id), the
            ids of the "[CLS] [SEP]" text a padding round is encoded as.
          **kwargs: keras.Model's (name, dtype).

        Raises:
          ValueError: for an unknown `aggregation` or `matching_side`, an
            `empty_round_token_ids` that is not a pair, or a non-positive
            `num_length_buckets`.
        """
        super().__init__(**kwargs)
        if aggregation not in ("attention", "mean"):
            raise ValueError(f"aggregation must be 'attention' or 'mean', got {aggregation!r}")
        if empty_round_token_ids is not None:
            empty_round_token_ids = tuple(int(i) for i in empty_round_token_ids)
            if len(empty_round_token_ids) != 2:
                raise ValueError(f"empty_round_token_ids must be (cls_id, sep_id), got {empty_round_token_ids!r}")
        self.empty_round_token_ids = empty_round_token_ids
        if matching_side not in MATCHING_SIDES:
            raise ValueError(f"matching_side must be one of {MATCHING_SIDES}, got {matching_side!r}")
        self.backbone = backbone
        self.aggregation = aggregation
        self.attention_size = attention_size
        self.matching_side = matching_side
        self.normalize_matching_tokens = bool(normalize_matching_tokens)
        self.fuse_turns_before_pooling = bool(fuse_turns_before_pooling)
        self.num_length_buckets = check_num_length_buckets(num_length_buckets)
        self.round_attention = RoundAttention(attention_size, dtype="float32", name="round_attention")
        self.round_attention.build((None, None, backbone.hidden_dim))

    def _fill_empty_rounds(self, inputs):
        """Puts "[CLS] [SEP]" into every padding round's slot (the turn mask stays as it is:
        the round attention still masks those slots)."""
        ids = ops.cast(inputs[CONTEXT_INPUT_IDS], "int32")
        mask = ops.cast(inputs[CONTEXT_INPUT_MASK], "int32")
        seq_length = ids.shape[2]
        if seq_length < 2:
            raise ValueError(f"an empty-text round needs 2 positions, got sequences of {seq_length}")
        positions = ops.arange(seq_length)
        filler_ids = ops.where(positions == 0, self.empty_round_token_ids[0],
                               ops.where(positions == 1, self.empty_round_token_ids[1], 0))
        filler_mask = ops.cast(positions < 2, "int32")
        empty = (ops.cast(inputs[CONTEXT_TURN_MASK], "int32") == 0)[..., None]  # [B, T, 1]
        return {**inputs, CONTEXT_INPUT_IDS: ops.where(empty, filler_ids, ids),
                CONTEXT_INPUT_MASK: ops.where(empty, filler_mask, mask)}

    def call(self, inputs, training=False):
        """Embeds each candidate without and with its two-sided context (class docstring).

        Args:
          inputs: the batched `ContrastiveRecordSpec` dict of `context_layout="sides"`:
            `context_input_ids` and `context_input_mask` int Tensors of shape [B, 2N, L] (N
            left slots, then N right slots), `context_turn_mask` of shape [B, 2N],
            `candidate_input_ids` and `candidate_input_mask` of shape [B, K, L]; other keys
            are ignored.
          training: bool, whether dropout is on.

        Returns:
          {"context_free": r_bar, "context_aware": R_tilde}, float32 Tensors of shape
          [B, K, D].

        Raises:
          ValueError: for an odd number of context slots, context and candidate sequences
            of different lengths, or (with `empty_round_token_ids`) L < 2.
        """
        if self.empty_round_token_ids is not None:
            inputs = self._fill_empty_rounds(inputs)
        context_tokens, context_mask, turn_mask, candidate_tokens, candidate_mask = encode_contexts_and_candidates(
            self.backbone, inputs, training, self.num_length_buckets)
        num_slots, seq_length = context_tokens.shape[1], context_tokens.shape[2]
        if num_slots % 2:
            raise ValueError(f"the released model reads left and right contexts of equal size, got {num_slots} slots")
        turn_mask = ops.cast(turn_mask, "float32")
        context_tokens = context_tokens * ops.cast(context_mask, "float32")[..., None]
        candidate_tokens = candidate_tokens * ops.cast(candidate_mask, "float32")[..., None]

        context_free = masked_mean(candidate_tokens, candidate_mask)  # [B, K, D]
        refined = self._refined_rounds(context_tokens, context_mask, candidate_tokens, candidate_mask)  # [B, K, 2N, D]
        if self.aggregation == "attention":
            unmasked_mean = ops.sum(context_tokens, axis=2) / float(seq_length)  # [B, 2N, D]
            half = num_slots // 2
            alphas = ops.concatenate([
                self.round_attention(unmasked_mean[:, :half], turn_mask[:, :half]),
                self.round_attention(unmasked_mean[:, half:], turn_mask[:, half:]),
            ], axis=1)  # [B, 2N]
            weights = 1.0 + alphas
        else:
            weights = ops.ones_like(turn_mask)
        if self.empty_round_token_ids is None:
            # A padding round's e is zero already (its masked mean is zero); the weight keeps it so.
            weights = weights * turn_mask
        context_aware = ops.sum(refined * weights[:, None, :, None], axis=2)
        return {"context_free": context_free, "context_aware": context_aware}

    def _refined_rounds(self, context_tokens, context_mask, candidate_tokens, candidate_mask):
        """e_{a,i} for every candidate a and round i, [B, K, 2N, D]; token vectors already masked."""
        match_context, match_candidates = context_tokens, candidate_tokens
        if self.normalize_matching_tokens:
            # Padding rows are zero and stay zero (the norm is floored, not divided by).
            match_context = l2_normalize(context_tokens)
            match_candidates = l2_normalize(candidate_tokens)
        if self.matching_side == "response":
            candidate_mean = masked_mean(match_candidates, candidate_mask)  # [B, K, D]
            projections = ops.einsum("bkd,bsld->bksl", candidate_mean, match_context)
            return RELEASED_MATCHING_SCALE * ops.einsum("bksl,bsld->bksd", projections, context_tokens)
        if self.fuse_turns_before_pooling:
            # Rows summed over rounds, then pooled over the longest round's rows: a per-example
            # scale the cosine ignores, so each round counts by its token sum.
            lengths = ops.sum(ops.cast(context_mask, "float32"), axis=2)  # [B, 2N]
            longest = ops.maximum(ops.max(lengths, axis=1), 1.0)[:, None, None]
            context_vectors = ops.sum(match_context, axis=2) / longest
        else:
            context_vectors = masked_mean(match_context, context_mask)  # [B, 2N, D]
        projections = ops.einsum("bsd,bkld->bksl", context_vectors, match_candidates)
        return RELEASED_MATCHING_SCALE * ops.einsum("bksl,bkld->bksd", projections, candidate_tokens)

    def get_config(self):
        return {
            **super().get_config(),
            "backbone": backbone_config(self.backbone),
            "aggregation": self.aggregation,
            "attention_size": self.attention_size,
            "num_length_buckets": self.num_length_buckets,
            "matching_side": self.matching_side,
            "normalize_matching_tokens": self.normalize_matching_tokens,
            "fuse_turns_before_pooling": self.fuse_turns_before_pooling,
            "empty_round_token_ids": self.empty_round_token_ids,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "backbone": backbone_from_config(config["backbone"])})
