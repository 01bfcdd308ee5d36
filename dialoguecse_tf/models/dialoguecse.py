"""DialogueCSE (Liu et al., EMNLP 2021): BERT + matching-guided embedding + turn aggregation."""

import numbers

import keras
import tensorflow as tf
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
from dialoguecse_tf.sentence_encoder import trim_padding


def _bucket_sizes(num_sequences, num_buckets: int) -> list:
    """Near-equal group sizes; the batch size is static in training (drop_remainder)."""
    if num_sequences is None:
        raise ValueError("num_length_buckets > 1 needs a static batch size (batch with drop_remainder=True)")
    num_buckets = min(num_buckets, num_sequences)
    return [num_sequences // num_buckets + (i < num_sequences % num_buckets) for i in range(num_buckets)]


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
        num_length_buckets: int = 1,
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
        if isinstance(num_length_buckets, bool) or not isinstance(num_length_buckets, int) or num_length_buckets < 1:
            raise ValueError(f"num_length_buckets must be a positive int, got {num_length_buckets!r}")
        self.num_length_buckets = num_length_buckets

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
        """[N, L] token ids and mask -> BERT's float32 sequence output [N, L, D].

        With `num_length_buckets` > 1 the positions past the longest sequence of a
        sequence's group are zero instead of BERT's output there; every consumer masks
        padding positions, so the model's outputs do not change.
        """
        token_ids = ops.cast(token_ids, "int32")
        padding_mask = ops.cast(padding_mask, "int32")
        if self.num_length_buckets == 1:
            return self._run_backbone(token_ids, padding_mask, training)
        seq_length = token_ids.shape[1]
        order = tf.argsort(tf.reduce_sum(padding_mask, axis=1))
        outputs = []
        for group in tf.split(order, _bucket_sizes(token_ids.shape[0], self.num_length_buckets)):
            ids, mask = trim_padding(tf.gather(token_ids, group), tf.gather(padding_mask, group))
            encoded = self._run_backbone(ids, mask, training)
            outputs.append(tf.pad(encoded, [[0, 0], [0, seq_length - tf.shape(encoded)[1]], [0, 0]]))
        sorted_outputs = tf.concat(outputs, axis=0)
        return tf.ensure_shape(tf.gather(sorted_outputs, tf.argsort(order)), [None, seq_length, None])

    def _run_backbone(self, token_ids, padding_mask, training):
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
            "num_length_buckets": self.num_length_buckets,
        }

    @classmethod
    def from_config(cls, config):
        # The config holds this constructor's own arguments; keras.Model's version would
        # first probe it for a functional-model layout.
        return cls(**config)
