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

    A row whose mask is all zero (e.g. a missing context turn) pools to zeros instead of NaN.

    Args:
      embeddings: float Tensor of shape [..., L, D].
      mask: Tensor of shape [..., L], 1 for a real token and 0 for padding (cast to the
        embeddings' dtype).

    Returns:
      Tensor of shape [..., D] in the embeddings' dtype.

    Example:
      >>> masked_mean(np.ones((2, 3, 4), "float32"), np.array([[1, 1, 0], [0, 0, 0]])).shape
      TensorShape([2, 4])
    """
    mask = ops.cast(mask, embeddings.dtype)[..., None]
    total = ops.sum(embeddings * mask, axis=-2)
    count = ops.maximum(ops.sum(mask, axis=-2), 1.0)
    return total / count


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class MaskedMeanPooling(keras.layers.Layer):
    """`masked_mean` as a layer.

    `call(embeddings, mask)`: float `embeddings` of shape [..., L, D] and `mask` of shape
    [..., L] (1 = real token) -> the masked mean, shape [..., D]. No weights.
    """

    def call(self, embeddings, mask):
        return masked_mean(embeddings, mask)


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class SentencePooling(keras.layers.Layer):
    """Pools BERT's outputs into one vector per sequence: `mean`, `cls` or `pooler` (which reads
    `pooled_output`, BERT's pooler applied to [CLS]). No weights of its own.

    Example:
      >>> pool = SentencePooling("cls")
      >>> pool(outputs["sequence_output"], padding_mask)  # [N, L, D], [N, L] -> [N, D]
    """

    def __init__(self, pooling: str = "mean", **kwargs):
        """Constructor for SentencePooling.

        Args:
          pooling: one of `POOLING_MODES` ("mean", "cls", "pooler").
          **kwargs: keras.layers.Layer's (name, dtype).

        Raises:
          ValueError: if `pooling` is not one of `POOLING_MODES`.
        """
        super().__init__(**kwargs)
        if pooling not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
        self.pooling = pooling

    def call(self, sequence_output, padding_mask, pooled_output=None):
        """Pools each sequence into one vector.

        Args:
          sequence_output: float Tensor of shape [..., L, D], BERT's last layer.
          padding_mask: Tensor of shape [..., L], 1 for a real token (read by "mean" only).
          pooled_output: float Tensor of shape [..., D], BERT's pooler output; needed by
            "pooler" only.

        Returns:
          float Tensor of shape [..., D]: the masked mean ("mean"), position 0 ([CLS],
          "cls") or `pooled_output` itself ("pooler").

        Raises:
          ValueError: for "pooler" without `pooled_output`.
        """
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
    masked mean of role 1's.

    Args:
      embeddings: float Tensor of shape [..., L, D].
      mask: Tensor of shape [..., L], 1 for a real token.
      roles: int Tensor of shape [..., L], each token's speaker, 0 or 1.

    Returns:
      Tensor of shape [..., D]; a role with no real token adds zeros.
    """
    mask = ops.cast(mask, "int32")
    roles = ops.cast(roles, "int32")
    return sum(masked_mean(embeddings, mask * ops.cast(ops.equal(roles, role), "int32")) for role in (0, 1))
