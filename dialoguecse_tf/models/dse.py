"""DSE's training model (Zhou et al., NAACL 2022, section 3): a BERT backbone, mean pooling and
a projection head.

As the authors' released `pretrain/models/Transformers.py` (PSCBert, l.19-22, 53-64): the
sentence embedding is the masked mean of BERT's last layer over every non-pad token (special
tokens included); the head is Linear(d, d, no bias) -> ReLU -> Linear(d, 128, no bias)
(the paper, L913-915, says "two-layer MLP with size (d x d, d x 128)" and does not mention
that the layers have no bias), and its output is L2-normalised by the loss. The head serves
training only: the written encoder is the backbone, evaluated with mean pooling.

The head's initialisation (`head_init`): "normal" draws N(0, initializer_range), 0.02 for
BERT, as the release's head ends up: PSCBert's `__init__` builds it with nn.Linear's uniform
default (l.19-22) and never calls `init_weights`, but `PSCBert.from_pretrained` (main.py:44)
under its transformers 4.8.1 (requirements.txt) re-initialises every module missing from the
checkpoint with `BertPreTrainedModel._init_weights` (`_fast_init`), a normal draw. "uniform"
keeps nn.Linear's U(+-1 / sqrt(fan_in)), which is what the code reads as; its spread is
0.0208 for BERT-base (d = 768) but 0.0295 for MiniLM (d = 384).

Both sides of every pair are encoded in one backbone call of 2B sequences; dropout draws an
independent mask per sequence either way, so this is the release's two calls (l.51-52) in one.
"""

import keras
from keras import ops

from dialoguecse_tf.encoder.backbone import backbone_config, backbone_from_config, check_num_length_buckets, encode_pairs
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.records.pairs import PAIR_INPUT_IDS, PAIR_INPUT_MASK

DEFAULT_PROJECTION_SIZE = 128
HEAD_NAME = "dse_head"
HEAD_INITS = ("normal", "uniform")


def head_initializer(head_init: str, initializer_range: float) -> keras.initializers.Initializer:
    """The head's kernel initializer (see the module docstring).

    Args:
      head_init: "normal" or "uniform"; `HEAD_INITS`.
      initializer_range: float, the normal draw's standard deviation.

    Returns:
      A keras Initializer.

    Raises:
      ValueError: for an unknown `head_init`.
    """
    if head_init == "normal":
        return keras.initializers.RandomNormal(stddev=initializer_range)
    if head_init == "uniform":
        return keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform")
    raise ValueError(f"head_init must be one of {HEAD_INITS}, got {head_init!r}")


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class DSEModel(keras.Model):
    """Batched pair records ([B, 2, L]) -> `embeddings` [B, 2, D] (mean-pooled BERT) and
    `projections` [B, 2, projection_size] (the head's output, not normalised)."""

    def __init__(self, backbone, projection_size: int = DEFAULT_PROJECTION_SIZE, num_length_buckets: int = 1,
                 head_init: str = "normal", initializer_range: float = 0.02, **kwargs):
        """Constructor for DSEModel.

        Args:
          backbone: a keras-hub `BertBackbone` from `build_backbone`.
          projection_size: int, the head's output size (128 in the paper).
          num_length_buckets: positive int, see `backbone.encode_sequences`.
          head_init: "normal" or "uniform", the head's initialisation (module docstring).
          initializer_range: float, the "normal" draw's standard deviation.
          **kwargs: keras.Model's (name, dtype).

        Raises:
          ValueError: for an unknown `head_init` or a non-positive `num_length_buckets`.
        """
        super().__init__(**kwargs)
        self.backbone = backbone
        self.projection_size = projection_size
        self.num_length_buckets = check_num_length_buckets(num_length_buckets)
        self.head_init = head_init
        self.initializer_range = initializer_range
        initializer = head_initializer(head_init, initializer_range)
        # The projections are what the loss normalises and compares: float32 in every precision
        # (`precision`), as the pooled embeddings they are computed from.
        self.head = keras.Sequential([
            keras.layers.Dense(backbone.hidden_dim, activation="relu", use_bias=False, name="hidden",
                               kernel_initializer=initializer, dtype="float32"),
            keras.layers.Dense(projection_size, use_bias=False, name="projection", kernel_initializer=initializer,
                               dtype="float32"),
        ], name=HEAD_NAME)
        self.head.build((None, backbone.hidden_dim))

    def call(self, inputs, training=False):
        """Embeds and projects both sides of every pair.

        Args:
          inputs: the batched pair records' dict: `pair_input_ids` and `pair_input_mask` int
            Tensors of shape [B, 2, L]; other keys are ignored.
          training: bool, whether dropout is on.

        Returns:
          A dict: `embeddings`, float32 Tensor of shape [B, 2, D], and `projections`, float32
          Tensor of shape [B, 2, projection_size].
        """
        outputs, flat_mask = encode_pairs(self.backbone, inputs[PAIR_INPUT_IDS], inputs[PAIR_INPUT_MASK],
                                          training, self.num_length_buckets)
        embeddings = masked_mean(outputs, flat_mask)
        projections = self.head(embeddings)
        return {"embeddings": ops.reshape(embeddings, (-1, 2, embeddings.shape[-1])),
                "projections": ops.reshape(projections, (-1, 2, self.projection_size))}

    def head_variables(self) -> list:
        """The projection head's trainable variables: the hidden then the projection kernel."""
        return list(self.head.trainable_variables)

    def get_config(self):
        return {**super().get_config(), "backbone": backbone_config(self.backbone),
                "projection_size": self.projection_size, "num_length_buckets": self.num_length_buckets,
                "head_init": self.head_init, "initializer_range": self.initializer_range}

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "backbone": backbone_from_config(config["backbone"])})
