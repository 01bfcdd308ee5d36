"""SimCSE's training model (Gao et al., EMNLP 2021), as the released `simcse/models.py` builds it:
a BERT backbone, the release's `Pooler` (l.49-83) and, for the `cls` pooler, its `MLPLayer`
(Linear(d, d) + tanh, l.19-33) on top of the [CLS] vector (`cl_forward`, l.158-161).

The MLP is the backbone's own pooler layer (keras-hub's `pooled_dense`: Linear(d, d) + tanh on
[CLS]), so the written encoder carries it where BERT keeps its pooler: the release's
`simcse_to_huggingface.py` (l.20-23) renames `mlp` to `pooler` for the same reason. The
objective re-initialises it first: the release's `BertForCL` builds BERT without a pooler
(l.281) and a fresh MLP, drawn by `init_weights` (l.95).

Both views of every pair are encoded in one backbone call of 2B sequences, as the release
flattens (bs, num_sent, len) to (bs * num_sent, len) (l.121-122); dropout draws an independent
mask per sequence, so the two views of one sentence differ only through dropout.
"""

import keras
from keras import ops

from dialoguecse_tf.encoder.backbone import backbone_config, backbone_from_config, check_num_length_buckets, encode_pairs
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.records.pairs import PAIR_INPUT_IDS, PAIR_INPUT_MASK

# The release's `Pooler` types that pool the last layer; `avg_top2` and `avg_first_last` (l.72-81)
# read other layers, which the project's inference path does not.
POOLERS = ("cls", "cls_before_pooler", "avg")


def check_pooler(pooler: str) -> str:
    """Returns `pooler` if it is one of `POOLERS`, else raises ValueError."""
    if pooler not in POOLERS:
        raise ValueError(f"pooler must be one of {POOLERS}, got {pooler!r}")
    return pooler


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class SimCSEModel(keras.Model):
    """Batched pair records ([B, 2, L]) -> `embeddings` [B, 2, D], the views z1 and z2 the loss
    compares: the [CLS] vector (`cls`, `cls_before_pooler`) or the masked token mean (`avg`) of
    each sequence, `cls` through the MLP."""

    def __init__(self, backbone, pooler: str = "cls", num_length_buckets: int = 1, **kwargs):
        """Constructor for SimCSEModel.

        Args:
          backbone: a keras-hub `BertBackbone` from `build_backbone`; its pooler layer is the
            MLP.
          pooler: "cls", "cls_before_pooler" or "avg"; `POOLERS`.
          num_length_buckets: positive int, see `backbone.encode_sequences`.
          **kwargs: keras.Model's (name, dtype).

        Raises:
          ValueError: for an unknown `pooler` or a non-positive `num_length_buckets`.
        """
        super().__init__(**kwargs)
        self.backbone = backbone
        self.pooler = check_pooler(pooler)
        self.num_length_buckets = check_num_length_buckets(num_length_buckets)

    @property
    def mlp(self):
        """The release's MLPLayer: the backbone's `pooled_dense` (Linear(D, D) + tanh)."""
        return self.backbone.pooled_dense

    def call(self, inputs, training=False):
        """Embeds both views of every pair.

        Args:
          inputs: the batched pair records' dict: `pair_input_ids` and `pair_input_mask` int
            Tensors of shape [B, 2, L]; other keys are ignored.
          training: bool, whether dropout is on (the views differ through it only).

        Returns:
          {"embeddings": float32 Tensor of shape [B, 2, D]}, the views z1 and z2.
        """
        outputs, flat_mask = encode_pairs(self.backbone, inputs[PAIR_INPUT_IDS], inputs[PAIR_INPUT_MASK],
                                          training, self.num_length_buckets)
        pooled = masked_mean(outputs, flat_mask) if self.pooler == "avg" else outputs[:, 0]
        if self.pooler == "cls":
            pooled = ops.cast(self.mlp(pooled), "float32")
        return {"embeddings": ops.reshape(pooled, (-1, 2, pooled.shape[-1]))}

    def get_config(self):
        return {**super().get_config(), "backbone": backbone_config(self.backbone), "pooler": self.pooler,
                "num_length_buckets": self.num_length_buckets}

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "backbone": backbone_from_config(config["backbone"])})
