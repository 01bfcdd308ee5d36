"""DialogueCSE (Liu et al., EMNLP 2021): BERT + matching-guided embedding + turn aggregation."""

import numbers

import keras
from keras import ops

from dialoguecse_tf.bert_config import BertConfig
from dialoguecse_tf.encoder import build_backbone, freeze_bottom_layers
from dialoguecse_tf.models.layers import (
    DEFAULT_ATTENTION_HIDDEN_SIZE,
    MatchingGuidedEmbedding,
    TurnAggregation,
)
from dialoguecse_tf.models.losses import nt_xent_per_example_loss, pair_similarities
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
    """The contrastive-stage model: a batch of contrastive records -> similarities and loss.

    Constructor: `bert_config` (BertConfig or its dict), `aggregation` ("mean" = I2,
    "attention" = I1), `temperature` (tau of eq. 8), `num_frozen_layers` (bottom BERT
    layers, and the embeddings, kept fixed; the paper freezes 6; BERT's [CLS] pooler,
    which no loss term reaches, is frozen too), `attention_hidden_size` (the I1 scoring
    FFN; unused with "mean").

    `call(inputs, training=False)` takes the batched `ContrastiveRecordSpec` dict
    (`context_input_ids`/`context_input_mask` [B, T, L], `context_turn_mask` [B, T],
    `candidate_input_ids`/`candidate_input_mask` [B, K, L], candidate 0 the true
    response) and returns
      * `similarities` [B, K]: cosine of each candidate's context-free embedding (its
        mean-pooled BERT output) with its context-aware one (MGE + turn aggregation);
      * `per_example_loss` [B]: the NT-Xent term of eq. 8 for each example.
    A distributed custom loop calls `model(inputs, training=True)` inside `strategy.run`
    and reduces with `tf.nn.compute_average_loss(out["per_example_loss"],
    global_batch_size=...)`, so every replica's loss is scaled to the global batch;
    `compute_contrastive_loss` is the single-device mean. Build the model inside
    `strategy.scope()`. The frozen layers' Keras variables are non-trainable but their
    tf.Variables are not, so an eager default GradientTape still records them; a loop
    that wants to skip that work opens `tf.GradientTape(watch_accessed_variables=False)`
    and watches `[v.value for v in model.trainable_variables]`.

    One backbone encodes context utterances and candidates alike (the paper's shared
    BERT), in one call per forward pass over the B*T utterances and B*K candidates: a
    context is encoded once and matched against all of its candidates.
    """

    def __init__(
        self,
        bert_config,
        aggregation: str = "mean",
        temperature: float = 0.1,
        num_frozen_layers: int = 6,
        attention_hidden_size: int = DEFAULT_ATTENTION_HIDDEN_SIZE,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(bert_config, dict):
            bert_config = BertConfig.from_dict(bert_config)
        if not isinstance(bert_config, BertConfig):
            raise TypeError(f"bert_config must be a BertConfig or a dict, got {type(bert_config).__name__}")
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or temperature <= 0:
            raise ValueError(f"temperature must be a positive number, got {temperature!r}")
        self.bert_config = bert_config
        self.aggregation = aggregation
        self.temperature = float(temperature)
        self.num_frozen_layers = num_frozen_layers
        self.attention_hidden_size = attention_hidden_size

        self.backbone = build_backbone(bert_config)
        freeze_bottom_layers(self.backbone, num_frozen_layers)
        # No DialogueCSE loss term reaches BERT's [CLS] pooler; left trainable it would
        # only hand the optimizer None gradients. Its weights are kept for checkpoints.
        self.backbone.get_layer("pooled_dense").trainable = False
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
        self.turn_aggregation.build((None, None, None, None, bert_config.hidden_size))

    def encode_sequences(self, token_ids, padding_mask, training=False):
        """[N, L] token ids and mask -> BERT's float32 sequence output [N, L, D]."""
        token_ids = ops.cast(token_ids, "int32")
        padding_mask = ops.cast(padding_mask, "int32")
        outputs = self.backbone(
            {
                "token_ids": token_ids,
                "segment_ids": ops.zeros_like(token_ids),
                "padding_mask": padding_mask,
            },
            training=training,
        )
        return ops.cast(outputs["sequence_output"], "float32")

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

        context_free = masked_mean(candidate_tokens, candidate_mask)
        refined = self.matching(context_tokens, context_mask, candidate_tokens, candidate_mask)
        context_aware = self.turn_aggregation(refined, context_mask, turn_mask)
        similarities = pair_similarities(context_free, context_aware)
        return {
            "similarities": similarities,
            "per_example_loss": nt_xent_per_example_loss(similarities, self.temperature),
        }

    def compute_contrastive_loss(self, inputs, training=False):
        """Eq. 8 on one device: the batch mean of `per_example_loss`."""
        return ops.mean(self(inputs, training=training)["per_example_loss"])

    def get_config(self):
        return {
            **super().get_config(),
            "bert_config": self.bert_config.to_dict(),
            "aggregation": self.aggregation,
            "temperature": self.temperature,
            "num_frozen_layers": self.num_frozen_layers,
            "attention_hidden_size": self.attention_hidden_size,
        }

    @classmethod
    def from_config(cls, config):
        # The config holds this constructor's own arguments; keras.Model's version would
        # first probe it for a functional-model layout.
        return cls(**config)
