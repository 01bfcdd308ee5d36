"""DialogueCSE (Liu et al., EMNLP 2021): BERT + matching-guided embedding + turn aggregation."""

import keras
from keras import ops

from dialoguecse_tf.encoder import check_num_length_buckets, encode_sequences
from dialoguecse_tf.models.layers import (
    DEFAULT_ATTENTION_HIDDEN_SIZE,
    MatchingGuidedEmbedding,
    TurnAggregation,
)
from dialoguecse_tf.pooling import masked_mean
from dialoguecse_tf.schema import (
    CANDIDATE_INPUT_IDS,
    CANDIDATE_INPUT_MASK,
    CONTEXT_INPUT_IDS,
    CONTEXT_INPUT_MASK,
    CONTEXT_TURN_MASK,
)


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class DialogueCSEModel(keras.Model):
    """The contrastive-stage model around a BERT backbone it is given.

    Constructor: `backbone` (a keras-hub `BertBackbone`; freezing is the objective's
    business), `aggregation` ("mean" = I2, "attention" = I1), `attention_hidden_size`
    (the I1 scoring FFN; unused with "mean"), `num_length_buckets` (see
    `encoder.encode_sequences`).

    `call(inputs, training=False)` takes the batched `ContrastiveRecordSpec` dict
    (`context_input_ids`/`context_input_mask` [B, T, L], `context_turn_mask` [B, T],
    `candidate_input_ids`/`candidate_input_mask` [B, K, L], candidate 0 the true
    response) and returns the embeddings the loss compares, each [B, K, D]:
      * `context_free`: each candidate's mean-pooled BERT output;
      * `context_aware`: its MGE + turn-aggregation embedding given the context.
    The loss (`losses.nt_xent_per_example_loss` of their cosines) is the objective's.

    One backbone encodes context utterances and candidates alike (the paper's shared
    BERT), in one call per forward pass over the B*T utterances and B*K candidates: a
    context is encoded once and matched against all of its candidates. The frozen layers'
    Keras variables are non-trainable but their tf.Variables are not, so an eager default
    GradientTape still records them; a loop that wants to skip that work opens
    `tf.GradientTape(watch_accessed_variables=False)` and watches
    `[v.value for v in model.trainable_variables]`.
    """

    def __init__(
        self,
        backbone,
        aggregation: str = "mean",
        attention_hidden_size: int = DEFAULT_ATTENTION_HIDDEN_SIZE,
        num_length_buckets: int = 1,
        **kwargs,
    ):
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
        """[N, L] token ids and mask -> BERT's float32 sequence output [N, L, D]."""
        return encode_sequences(self.backbone, token_ids, padding_mask, training, self.num_length_buckets)

    def call(self, inputs, training=False):
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
        tokens = self.encode_sequences(
            ops.concatenate(
                [ops.reshape(context_ids, (-1, seq_length)), ops.reshape(candidate_ids, (-1, seq_length))],
                axis=0,
            ),
            ops.concatenate(
                [ops.reshape(context_mask, (-1, seq_length)), ops.reshape(candidate_mask, (-1, seq_length))],
                axis=0,
            ),
            training=training,
        )
        dim = tokens.shape[-1]
        context_tokens = ops.reshape(tokens[:num_context_sequences], (-1, num_turns, seq_length, dim))
        candidate_tokens = ops.reshape(tokens[num_context_sequences:], (-1, num_candidates, seq_length, dim))

        refined = self.matching(context_tokens, context_mask, candidate_tokens, candidate_mask)
        return {
            "context_free": masked_mean(candidate_tokens, candidate_mask),
            "context_aware": self.turn_aggregation(refined, context_mask, turn_mask),
        }

    def get_config(self):
        return {
            **super().get_config(),
            "backbone": keras.layers.serialize(self.backbone),
            "aggregation": self.aggregation,
            "attention_hidden_size": self.attention_hidden_size,
            "num_length_buckets": self.num_length_buckets,
        }

    @classmethod
    def from_config(cls, config):
        # As keras-hub's tasks: the backbone is rebuilt from its own config. keras.Model's
        # version would first probe the config for a functional-model layout.
        config = {**config, "backbone": keras.layers.deserialize(config["backbone"])}
        return cls(**config)
