"""The project's one pooling implementation (token embeddings -> sentence embedding).

The paper takes "the mean pooling of BERT's output embeddings as the sentence embedding";
padding positions must not move the mean, so it is masked. CLS pooling is kept for the
BERT-CLS baselines of Table 2 and for unsupervised SimCSE, whose [CLS] vector is taken before
any MLP at inference. `pooler` is BERT's pooler output, tanh(W [CLS] + b): SimCSE trained to
keep its MLP at inference writes the MLP there, as the release's `simcse_to_huggingface.py` does.

A trained encoder records its pooling in its metadata (`checkpoints.sentence_pooling` reads it),
so the inference path embeds with the pooling the encoder was trained for.
"""

import keras
from keras import ops

# The names live free of TensorFlow, where command lines are checked.
from dialoguecse_tf.config_fields import POOLING_MODES

DEFAULT_POOLING = "mean"


def masked_mean(embeddings, mask):
    """Mean of the token embeddings where `mask` is 1; works on any leading shape.

    `embeddings` [..., L, D] and `mask` [..., L] (1 = real token). A row whose mask is all
    zero (e.g. a missing context turn) pools to zeros instead of NaN.
    """
    mask = ops.cast(mask, embeddings.dtype)[..., None]
    total = ops.sum(embeddings * mask, axis=-2)
    count = ops.maximum(ops.sum(mask, axis=-2), 1.0)
    return total / count


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class MaskedMeanPooling(keras.layers.Layer):
    """`masked_mean` as a layer: inputs `embeddings` [..., L, D] and `mask` [..., L]."""

    def call(self, embeddings, mask):
        return masked_mean(embeddings, mask)


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class SentencePooling(keras.layers.Layer):
    """Pools BERT's outputs into one vector per sequence: `mean`, `cls` or `pooler` (which reads
    `pooled_output`, BERT's pooler applied to [CLS])."""

    def __init__(self, pooling: str = "mean", **kwargs):
        super().__init__(**kwargs)
        if pooling not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
        self.pooling = pooling

    def call(self, sequence_output, padding_mask, pooled_output=None):
        if self.pooling == "pooler":
            if pooled_output is None:
                raise ValueError("pooling 'pooler' needs BERT's pooled_output")
            return pooled_output
        if self.pooling == "cls":
            return sequence_output[..., 0, :]
        return masked_mean(sequence_output, padding_mask)

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling}


DIALOGUE_POOLING_MODES = ("interlocutor", "mean")


def interlocutor_mean(embeddings, mask, roles):
    """dial2vec's dialogue embedding ("interlocutor-level pooling", its Table 5; the release's
    `mean_by_role`, network.py:139-140): the masked mean of role 0's token embeddings plus the
    masked mean of role 1's. `embeddings` [..., L, D], `mask` and `roles` [..., L]."""
    mask = ops.cast(mask, "int32")
    roles = ops.cast(roles, "int32")
    return sum(masked_mean(embeddings, mask * ops.cast(ops.equal(roles, role), "int32")) for role in (0, 1))
