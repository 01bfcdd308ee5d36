"""SiameseBERT_S / SiameseBERT_M, the dialogue-based baselines of the paper (section 5.2.2).

A siamese BERT (Yang et al. 2018; Reimers and Gurevych 2019) embeds the context and each
candidate response by mean pooling, and an MLP matching layer with a non-linear activation
scores each (context, response) pair; training ranks the true response above the
negatives with softmax cross-entropy. The variants differ only in their context:
`_S` sees the single nearest context utterance, `_M` the whole multi-turn context flattened
into one token sequence (Henderson et al. 2020). The objective picks the turns; this
model flattens whatever valid turns it receives. After training, as for DialogueCSE, the
sentence embedding is the mean-pooled BERT output.
"""

import keras
import tensorflow as tf
from keras import ops

from dialoguecse_tf.encoder.backbone import backbone_config, backbone_from_config, check_num_length_buckets, encode_sequences
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK)


def flatten_context(context_ids, context_mask, turn_mask, cls_id: int, max_length: int):
    """Joins the valid turns of each context into `[CLS] u_1 [SEP] u_2 [SEP] ...`.

    Each turn arrives as `[CLS] u_i [SEP]` plus padding: its [CLS] is dropped, its [SEP]
    kept as the separator. Turns stay in dialogue order; a context longer than
    `max_length` keeps its beginning.

    Args:
      context_ids: int Tensor of shape [B, T, L].
      context_mask: Tensor of shape [B, T, L], 1 for a real token.
      turn_mask: Tensor of shape [B, T], 0 for a padding turn.
      cls_id: int, the [CLS] token's id, put first.
      max_length: int, the flattened sequence's length.

    Returns:
      (ids, mask): dense Tensors of shape [B, max_length], ids in `context_ids`' dtype,
      zero-padded.
    """
    tokens = tf.ragged.boolean_mask(context_ids, tf.cast(context_mask, tf.bool))
    tokens = tf.ragged.boolean_mask(tokens, tf.cast(turn_mask, tf.bool))
    tokens = tokens[:, :, 1:].merge_dims(1, 2)
    cls = tf.fill([tf.shape(context_ids)[0], 1], tf.cast(cls_id, context_ids.dtype))
    tokens = tf.concat([cls, tokens], axis=1)[:, :max_length]
    ids = tokens.to_tensor(default_value=0, shape=[None, max_length])
    mask = tf.ones_like(tokens).to_tensor(default_value=0, shape=[None, max_length])
    return ids, mask


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class SiameseBertModel(keras.Model):
    """Batched contrastive records -> matching `scores` [B, K] (candidate 0 the true response).

    Around a BERT `backbone` it is given. The matching layer sees `[u; v; |u - v|; u * v]`
    for context embedding u and response embedding v (Reimers and Gurevych's features, plus
    the product) through a ReLU layer of `matching_hidden_size` units and a linear scorer.
    The loss (`losses.ranking_per_example_loss` of the scores) is the objective's; the
    cosines `context`/`responses` embeddings are returned too, for the training logs.
    """

    def __init__(self, backbone, matching_hidden_size: int = 256, cls_id: int = 2,
                 num_length_buckets: int = 1, **kwargs):
        """Constructor for SiameseBertModel.

        Args:
          backbone: a keras-hub `BertBackbone` from `build_backbone`.
          matching_hidden_size: int, the ReLU layer's units.
          cls_id: int, the vocabulary's [CLS] id, which starts a flattened context.
          num_length_buckets: positive int, see `backbone.encode_sequences`.
          **kwargs: keras.Model's (name, dtype).

        Raises:
          ValueError: if `num_length_buckets` is not a positive int.
        """
        super().__init__(**kwargs)
        self.backbone = backbone
        self.matching_hidden_size = matching_hidden_size
        self.cls_id = cls_id
        self.num_length_buckets = check_num_length_buckets(num_length_buckets)
        # The scores are the loss's logits: float32 in every precision (`precision`), as the
        # embeddings they are computed from.
        self.matching_hidden = keras.layers.Dense(matching_hidden_size, activation="relu", dtype="float32",
                                                  name="matching_hidden")
        self.matching_score = keras.layers.Dense(1, dtype="float32", name="matching_score")
        self.matching_hidden.build((None, 4 * backbone.hidden_dim))
        self.matching_score.build((None, matching_hidden_size))

    def embed(self, token_ids, padding_mask, training=False):
        """Mean-pooled BERT embeddings.

        Args:
          token_ids: int Tensor of shape [N, L].
          padding_mask: int Tensor of shape [N, L], 1 for a real token.
          training: bool, whether dropout is on.

        Returns:
          float32 Tensor of shape [N, D].
        """
        outputs = encode_sequences(self.backbone, token_ids, padding_mask, training, self.num_length_buckets)
        return masked_mean(outputs, padding_mask)

    def call(self, inputs, training=False):
        """Scores each candidate against its example's context.

        Args:
          inputs: the batched `ContrastiveRecordSpec` dict: `context_input_ids` and
            `context_input_mask` int Tensors of shape [B, T, L], `context_turn_mask` of shape
            [B, T], `candidate_input_ids` and `candidate_input_mask` of shape [B, K, L]
            (candidate 0 the true response); other keys are ignored. The valid turns are
            flattened into one sequence of min(T * L, the backbone's
            max_sequence_length) tokens.
          training: bool, whether dropout is on.

        Returns:
          A dict: `scores` float32 Tensor of shape [B, K], the matching layer's logits;
          `context` float32 Tensor of shape [B, K, D] (each example's context embedding,
          repeated per candidate) and `responses` float32 Tensor of shape [B, K, D].
        """
        context_ids = ops.cast(inputs[CONTEXT_INPUT_IDS], "int32")
        num_turns, seq_length = context_ids.shape[1], context_ids.shape[2]
        flat_length = min(num_turns * seq_length, self.backbone.max_sequence_length)
        flat_ids, flat_mask = flatten_context(
            context_ids, ops.cast(inputs[CONTEXT_INPUT_MASK], "int32"),
            inputs[CONTEXT_TURN_MASK], self.cls_id, flat_length,
        )
        candidate_ids = ops.cast(inputs[CANDIDATE_INPUT_IDS], "int32")
        candidate_mask = ops.cast(inputs[CANDIDATE_INPUT_MASK], "int32")
        num_candidates = candidate_ids.shape[1]
        context = self.embed(flat_ids, flat_mask, training)
        responses = self.embed(ops.reshape(candidate_ids, (-1, seq_length)),
                               ops.reshape(candidate_mask, (-1, seq_length)), training)
        responses = ops.reshape(responses, (-1, num_candidates, responses.shape[-1]))
        context = ops.broadcast_to(context[:, None, :], ops.shape(responses))
        features = ops.concatenate(
            [context, responses, ops.abs(context - responses), context * responses], axis=-1
        )
        scores = ops.squeeze(self.matching_score(self.matching_hidden(features)), axis=-1)
        return {"scores": scores, "context": context, "responses": responses}

    def get_config(self):
        return {
            **super().get_config(),
            "backbone": backbone_config(self.backbone),
            "matching_hidden_size": self.matching_hidden_size,
            "cls_id": self.cls_id,
            "num_length_buckets": self.num_length_buckets,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "backbone": backbone_from_config(config["backbone"])})
