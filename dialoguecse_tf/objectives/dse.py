"""DSE (Zhou et al., NAACL 2022, "Learning Dialogue Representations from Consecutive
Utterances") as a registered objective, as the authors' released PyTorch code computes it
(amazon-research/dse; the code index holds it as amazon-science/dse):

* records: positive pairs (`records.pairs.PairRecordSpec`): consecutive utterances, or an utterance
  with itself (`data_prep/create_pair_data.py`), which makes this objective the DSE paper's
  DSE-dropout (L363-364). That is not the paper's SimCSE-unsup row, Gao et al.'s released
  model trained on Wikipedia (L355-356, L900-901), whose own recipe pools [CLS] through an
  MLP and takes a one-directional loss over N - 1 negatives;
* model: mean-pooled BERT -> Linear(d, d, no bias) -> ReLU -> Linear(d, 128, no bias)
  (`models/dse.py`), L2-normalised; the head drawn from N(0, 0.02) as the release's
  `from_pretrained` re-initialises it (`head_init`; `models/dse.py` says why);
* loss: `losses.dse_per_anchor_loss` over the 2M texts of the GLOBAL batch (every replica's
  rows gathered, as the release's DataParallel gathers its GPUs' features), mean over the
  2M anchors; `contrast_type` HardNeg (default, main.py:76) or Orig; tau 0.05 (main.py:80);
* optimiser: `torch.optim.Adam` with its defaults (beta 0.9 / 0.999, epsilon 1e-8, no weight
  decay), epsilon added after the bias correction as PyTorch does (`TwoRateAdam`), the
  encoder at `learning_rate` and the head at `learning_rate * head_learning_rate_scale`
  (3e-6 and 3e-4 in the paper and README; utils/optimizer.py:13-27); constant rate, no
  warmup, no gradient clipping (training.py:131-139). Every layer trains;
* batches (`training.strategy.make_dataset`): each epoch is shuffled within a 10,000-record buffer
  over records shuffled once when written, and its last partial batch is dropped; the
  release's `DataLoader(shuffle=True)` reshuffles the whole set every epoch and keeps the
  last partial batch (pretrain/dataloader/dataloader.py:36, 53).

The head is dropped afterwards: the written encoder is the backbone, whose mean-pooled output
is the sentence embedding (the release's evaluation loads the encoder alone).
"""

import dataclasses

import keras
import tensorflow as tf
from absl import logging
from keras import ops

from dialoguecse_tf import losses
from dialoguecse_tf.config_fields import field
from dialoguecse_tf.encoder.backbone import freeze_bottom_layers, freeze_pooler
from dialoguecse_tf.models.dse import DEFAULT_PROJECTION_SIZE, HEAD_INITS, DSEModel
from dialoguecse_tf.objectives.base import Objective, register
from dialoguecse_tf.records.pairs import RECORD_TYPE_PAIRS


@dataclasses.dataclass(frozen=True)
class DSEOptions:
    contrast_type: str = field("HardNeg", "HardNeg: DSE's hard-negative weighted loss (the release's default); Orig: "
                               "plain symmetric NT-Xent.", choices=losses.CONTRAST_TYPES)
    temperature: float = field(0.05, "Temperature tau (DSE: 0.05).")
    head_learning_rate_scale: float = field(100.0, "The projection head's learning rate over the encoder's (DSE: "
                                            "3e-4 / 3e-6 = 100).")
    projection_size: int = field(DEFAULT_PROJECTION_SIZE, "Output width of the projection head (DSE: 128).")
    head_init: str = field("normal", "Initialisation of the head's kernels: normal, N(0, the BERT config's "
                           "initializer_range), as the release's from_pretrained re-initialises them; uniform, "
                           "PyTorch nn.Linear's U(+-1/sqrt(fan_in)).", choices=HEAD_INITS)
    num_frozen_layers: int = field(0, "Bottom BERT layers kept frozen, with the embeddings (DSE trains all: 0).")

    def __post_init__(self):
        if isinstance(self.temperature, bool) or not self.temperature > 0:
            raise ValueError(f"temperature must be a positive number, got {self.temperature!r}")
        if not self.head_learning_rate_scale > 0:
            raise ValueError(f"head_learning_rate_scale must be positive, got {self.head_learning_rate_scale!r}")
        if self.head_init not in HEAD_INITS:
            raise ValueError(f"head_init must be one of {HEAD_INITS}, got {self.head_init!r}")
        if self.contrast_type not in losses.CONTRAST_TYPES:
            raise ValueError(f"contrast_type must be one of {losses.CONTRAST_TYPES}, got {self.contrast_type!r}")


class TwoRateAdam(keras.optimizers.Adam):
    """`torch.optim.Adam` with a second learning rate, `learning_rate * head_scale`, for
    `head_variables` (the release's two parameter groups).

    PyTorch adds epsilon to the bias-corrected sqrt(v / (1 - beta_2^t)); Keras's Adam adds it
    to sqrt(v) before the correction, which makes its epsilon act as PyTorch's epsilon /
    sqrt(1 - beta_2^t) (3.2e-7 at the first step for 1e-8). This step is PyTorch's.
    """

    def __init__(self, head_variables, head_scale: float, **kwargs):
        """Constructor for TwoRateAdam.

        Args:
          head_variables: list of variables trained at `learning_rate * head_scale`.
          head_scale: float, the head's learning rate over the others'.
          **kwargs: keras.optimizers.Adam's (learning_rate, beta_1, beta_2, epsilon, ...).
        """
        super().__init__(**kwargs)
        self.head_scale = head_scale
        self._head_keys = {self._var_key(variable) for variable in head_variables}

    def update_step(self, gradient, variable, learning_rate):
        dtype = variable.dtype
        learning_rate = ops.cast(learning_rate, dtype)
        if self._var_key(variable) in self._head_keys:
            learning_rate = learning_rate * self.head_scale
        gradient = ops.cast(gradient, dtype)
        step = ops.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = ops.cast(self.beta_1, dtype), ops.cast(self.beta_2, dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, (gradient - m) * (1 - beta_1))
        self.assign_add(v, (ops.square(gradient) - v) * (1 - beta_2))
        denominator = ops.sqrt(v) / ops.sqrt(1 - ops.power(beta_2, step)) + self.epsilon
        self.assign_sub(variable, learning_rate / (1 - ops.power(beta_1, step)) * m / denominator)


def pair_metrics(first, second) -> dict:
    """Per-step logs of N normalised pairs, over the 2N texts as the loss sees them: how often
    an anchor's partner is its most similar text, and the mean cosine of positives, of
    negatives (every other text but self and partner) and their gap.

    Args:
      first: float Tensor of shape [N, E], the pairs' first sides, L2-normalised.
      second: float Tensor of shape [N, E], their second sides, likewise.

    Returns:
      {"positive_ranked_first", "positive_cosine", "negative_cosine", "cosine_gap"}: float32
      scalar Tensors.
    """
    num_pairs = tf.shape(first)[0]
    texts = tf.concat([first, second], axis=0)
    cosines = tf.matmul(texts, texts, transpose_b=True)
    partner, excluded = losses.pair_layout(num_pairs)
    positive = tf.gather(cosines, partner, batch_dims=1)
    is_negative = tf.logical_not(excluded)
    negative = tf.reduce_sum(tf.where(is_negative, cosines, 0.0)) / tf.reduce_sum(tf.cast(is_negative, tf.float32))
    # Strictly first: a tie is no win, or a collapsed encoder would read 1.0.
    best_negative = tf.reduce_max(tf.where(is_negative, cosines, -2.0), axis=-1)
    return {
        "positive_ranked_first": tf.reduce_mean(tf.cast(positive > best_negative, tf.float32)),
        "positive_cosine": tf.reduce_mean(positive),
        "negative_cosine": negative,
        "cosine_gap": tf.reduce_mean(positive) - negative,
    }


@register
class DSEObjective(Objective):
    """In-batch contrastive learning on positive pairs (see the module docstring)."""

    name = "dse"
    paper = ("DSE",
             'Zhou et al., NAACL 2022, "Learning Dialogue Representations from Consecutive Utterances"',
             "https://arxiv.org/abs/2205.13568")
    summary = "DSE: consecutive-utterance pairs, in-batch (hard-negative) contrastive loss"
    record_type = RECORD_TYPE_PAIRS
    options_class = DSEOptions
    # The paper's: batch 1,024 pairs, encoder lr 3e-6 (App. A.2).
    training_defaults = {"train_batch_size": 1024, "learning_rate": 3e-6}
    in_batch_negatives = True

    def check_records(self, spec, records_dir: str) -> None:
        self._pairing = spec.pairing

    def build_model(self, backbone, bert_config, tokenizer, num_length_buckets: int):
        freeze_bottom_layers(backbone, self.options.num_frozen_layers)
        # Mean pooling never reads BERT's [CLS] pooler.
        freeze_pooler(backbone)
        return DSEModel(backbone, self.options.projection_size, num_length_buckets, self.options.head_init,
                        bert_config.initializer_range)

    def create_optimizer(self, config, num_train_steps: int, model):
        """The release's constant-rate Adam, the head at `head_learning_rate_scale` times the rate.

        Raises:
          ValueError: with precision float16, whose loss scaling this Adam lacks (the release
            trains in float32; bfloat16 needs no loss scaling).
        """
        if config.num_warmup_steps:
            logging.warning("dse: the release trains at a constant rate; num_warmup_steps=%d is ignored",
                            config.num_warmup_steps)
        if config.precision == "float16":
            raise ValueError("dse: precision float16 is not supported (its Adam does no loss scaling; the release "
                             "trains in float32): use float32, or bfloat16, which needs no loss scaling")
        return TwoRateAdam(model.head_variables(), self.options.head_learning_rate_scale,
                           learning_rate=config.learning_rate, beta_1=0.9, beta_2=0.999, epsilon=1e-8)

    def embed(self, model, batch, training):
        """The projections the loss compares, float Tensor of shape [b, 2, projection_size]."""
        return model(batch, training=training)["projections"]

    def loss_of_embeddings(self, projections, global_batch_size):
        """`dse_per_anchor_loss`'s mean over the 2N texts of every replica's pairs (normalised
        here, in float32), and `pair_metrics`."""
        projections = tf.cast(projections, tf.float32)
        first, _ = losses.gather_across_replicas(losses.l2_normalize(projections[:, 0]))
        second, _ = losses.gather_across_replicas(losses.l2_normalize(projections[:, 1]))
        per_anchor = losses.dse_per_anchor_loss(first, second, self.options.temperature, self.options.contrast_type)
        loss = losses.replica_share_of_global_loss(tf.reduce_mean(per_anchor))
        return loss, pair_metrics(first, second)

    def metadata(self) -> dict:
        return {**dataclasses.asdict(self.options), "pairing": getattr(self, "_pairing", None)}
