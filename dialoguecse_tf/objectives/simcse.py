"""Unsupervised SimCSE (Gao, Yao and Chen, EMNLP 2021, "SimCSE: Simple Contrastive Learning of
Sentence Embeddings", section 3) as a registered objective, as the authors' released code
computes it (princeton-nlp/SimCSE: `simcse/models.py`, `train.py`, `run_unsup_example.sh`):

* records: positive pairs (`records.pairs.PairRecordSpec`). Unsupervised SimCSE takes each sentence as
  its own positive: `data_prep/create_pair_data.py --pairing=self` writes each distinct
  utterance of a dialogue corpus with itself, as `train.py` (l.395-398) duplicates the single
  column of a one-sentence-per-line file. The release trains on 1M sentences sampled from English
  Wikipedia (`wiki1m_for_simcse.txt`, run_unsup_example.sh:9); here any corpus's utterances are
  used. The release keeps every line; `create_pair_data.py` drops repeated utterances and, unless
  `--min_words=0`, utterances of 3 words or fewer (DSE's filter). Pairs of two different texts
  (`--pairing=consecutive`) train the release's pair mode (a 2-column file, train.py:386-389),
  not unsupervised SimCSE; the stage says so when it reads them;
* views: both texts of a pair encoded in training mode, so a self pair's two views z1, z2
  differ only through dropout (BERT's 0.1); pooled as the release's `Pooler` (l.49-83):
  `pooler` cls (the default, run_unsup_example.sh:19): the [CLS] vector through the MLP
  (Linear(d, d) + tanh, `MLPLayer`, l.19-33, applied at l.158-161), `models/simcse.py`;
* loss: `losses.simcse_per_anchor_loss`, the cross-entropy of cos(z1_i, z2_j) / tau over the
  batch's j (l.194-212), one direction, N - 1 negatives, tau 0.05 (run_unsup_example.sh:22); the
  views are gathered from every replica first, as the release all-gathers them (l.171-192);
* inference: unsupervised SimCSE drops the MLP (`--mlp_only_train`, run_unsup_example.sh:20;
  `sentemb_forward`, l.262-263; the release's README, l.198 and 226, reports that unsupervised
  SimCSE does better with the MLP in training only), so the written encoder embeds a sentence
  by its [CLS] vector. `mlp_only_train=False` keeps the MLP (inference pooling `pooler`, BERT's
  pooler output, where the MLP is written); `cls_before_pooler` and `avg` train and embed
  without it. The choice is recorded in the
  encoder's metadata (`sentence_pooling`), which evaluation, `encode()` and the exports read;
* optimiser: the HuggingFace Trainer's defaults, which the script keeps (transformers 4.2.1,
  requirements.txt; `simcse/trainers.py` builds them at l.313 and clips at l.473-487): transformers'
  AdamW with beta 0.9 / 0.999, epsilon 1e-8 (added to sqrt(v) before the bias correction in both
  it and Keras), weight decay 0.0 (none on biases and LayerNorm when set), a linear decay to 0
  without warmup, the gradient's global norm clipped at 1.0; every layer trains.

Paper and release: the release's README says its published unsupervised models use
hyperparameters newer than the paper's, with slightly better results (l.15, 102); the settings
here are the release's (its README's table, l.236-244, and run_unsup_example.sh).

Departures: the release trains with `--fp16` (run_unsup_example.sh:25; `--precision=float16` here,
GPU only); it evaluates every 125 steps on STS-B dev and keeps the best checkpoint
(run_unsup_example.sh:15-18), a set the project lacks (see `presets.paper_simcse`); it
reshuffles the whole set every epoch and keeps the last partial batch (the Trainer's
DataLoader), where the stage shuffles within a 10k buffer and drops it (`training.strategy.make_dataset`);
under several GPUs its summed gradient is 1/R of one device's (DDP averages the replicas'
gradients of a loss each computes over the gathered batch), where the stage's equals one
device's (`losses.replica_share_of_global_loss`).
"""

import dataclasses

import keras
import tensorflow as tf
from absl import logging

from dialoguecse_tf import losses
from dialoguecse_tf.config_fields import check_values, field
from dialoguecse_tf.encoder.backbone import freeze_pooler
from dialoguecse_tf.models.simcse import POOLERS, SimCSEModel
from dialoguecse_tf.objectives.base import Objective, register
from dialoguecse_tf.records.pairs import RECORD_TYPE_PAIRS
from dialoguecse_tf.training import optimizers


@dataclasses.dataclass(frozen=True)
class SimCSEOptions:
    temperature: float = field(0.05, "Temperature tau (SimCSE: 0.05).", minimum=0.0, exclusive_minimum=True)
    pooler: str = field("cls", "SimCSE's pooler_type: cls ([CLS] through the MLP in training; unsupervised SimCSE's), "
                        "cls_before_pooler ([CLS], no MLP) or avg (mean of the last layer).", choices=POOLERS)
    mlp_only_train: bool = field(True, "With pooler cls: drop the MLP at inference, embedding by the [CLS] vector "
                                 "(unsupervised SimCSE's --mlp_only_train); false keeps it (BERT's pooler output).")
    weight_decay: float = field(0.0, "AdamW weight decay, none on biases and LayerNorm (the HuggingFace Trainer's "
                                "default, which SimCSE keeps: 0.0).", minimum=0.0)

    def __post_init__(self):
        check_values(self)


def view_metrics(first, second) -> dict:
    """Per-step logs of N pairs of views, as the loss sees them: how often z1_i is closest to
    its own z2_i among the batch's z2, and the mean cosine of positives (z1_i, z2_i), of
    negatives (z1_i, z2_j), j != i, and their gap.

    Args:
      first: float Tensor of shape [N, D], the views z1 (not normalised).
      second: float Tensor of shape [N, D], the views z2.

    Returns:
      {"positive_ranked_first", "positive_cosine", "negative_cosine", "cosine_gap"}: float32
      scalar Tensors.
    """
    cosines = tf.matmul(losses.l2_normalize(first), losses.l2_normalize(second), transpose_b=True)
    num_pairs = tf.shape(cosines)[0]
    positive = tf.reduce_mean(tf.linalg.diag_part(cosines))
    is_negative = tf.logical_not(tf.eye(num_pairs, dtype=tf.bool))
    negative = tf.reduce_sum(tf.where(is_negative, cosines, 0.0)) / tf.reduce_sum(tf.cast(is_negative, tf.float32))
    # Strictly first: a tie is no win, or a collapsed encoder would read 1.0.
    best_negative = tf.reduce_max(tf.where(is_negative, cosines, -2.0), axis=-1)
    return {
        "positive_ranked_first": tf.reduce_mean(tf.cast(tf.linalg.diag_part(cosines) > best_negative, tf.float32)),
        "positive_cosine": positive,
        "negative_cosine": negative,
        "cosine_gap": positive - negative,
    }


@register
class SimCSEObjective(Objective):
    """Unsupervised SimCSE: dropout noise as the positive (see the module docstring)."""

    name = "simcse"
    paper = ("unsupervised SimCSE",
             'Gao, Yao and Chen, EMNLP 2021, "SimCSE: Simple Contrastive Learning of Sentence Embeddings"',
             "https://arxiv.org/abs/2104.08821")
    summary = "SimCSE (unsupervised): each utterance twice through dropout, [CLS] + MLP, in-batch loss"
    record_type = RECORD_TYPE_PAIRS
    options_class = SimCSEOptions
    # The release's unsupervised BERT-base settings (README, run_unsup_example.sh:12-13).
    training_defaults = {"train_batch_size": 64, "learning_rate": 3e-5}
    in_batch_negatives = True

    def check_records(self, spec, records_dir: str) -> None:
        self._pairing = spec.pairing
        if spec.pairing != "self":
            logging.warning("simcse: the records in %s pair %s utterances: this trains SimCSE's pair mode, not "
                            "unsupervised SimCSE (write them with create_pair_data.py --pairing=self)", records_dir,
                            spec.pairing)

    def build_model(self, backbone, bert_config, tokenizer, num_length_buckets: int):
        if self.options.pooler != "cls":
            # Only the cls pooler's MLP is BERT's pooler layer.
            freeze_pooler(backbone)
        return SimCSEModel(backbone, self.options.pooler, num_length_buckets)

    def initialize_from(self, model, start) -> None:
        """With pooler "cls", replaces the start's pooler weights by a fresh MLP, as the release
        starts its MLP; other poolers keep them (frozen)."""
        if self.options.pooler != "cls":
            return
        # The release's fresh MLP (`_init_weights` of transformers 4.2.1): N(0, initializer_range), zero bias.
        initializer = keras.initializers.RandomNormal(stddev=start.config.initializer_range)
        model.mlp.kernel.assign(initializer(model.mlp.kernel.shape))
        model.mlp.bias.assign(tf.zeros_like(model.mlp.bias))

    def create_optimizer(self, config, num_train_steps: int, model):
        return optimizers.create_optimizer(config.learning_rate, num_train_steps, config.num_warmup_steps,
                                           weight_decay=self.options.weight_decay, epsilon=1e-8,
                                           loss_scaling=config.precision == "float16")

    def embed(self, model, batch, training):
        """Both views of each example, float32 Tensor of shape [b, 2, D]."""
        return model(batch, training=training)["embeddings"]

    def loss_of_embeddings(self, views, global_batch_size):
        """`simcse_per_anchor_loss`'s mean over every replica's N anchors, and `view_metrics`
        (in float32)."""
        views = tf.cast(views, tf.float32)
        first, _ = losses.gather_across_replicas(views[:, 0])
        second, _ = losses.gather_across_replicas(views[:, 1])
        per_anchor = losses.simcse_per_anchor_loss(first, second, self.options.temperature)
        return losses.replica_share_of_global_loss(tf.reduce_mean(per_anchor)), view_metrics(first, second)

    def sentence_pooling(self) -> str:
        """The pooling the trained pooler serves: mean for avg, pooler (the MLP kept at
        inference) for cls without mlp_only_train, else cls ([CLS] before the MLP)."""
        if self.options.pooler == "avg":
            return "mean"
        if self.options.pooler == "cls" and not self.options.mlp_only_train:
            return "pooler"
        return "cls"

    def metadata(self) -> dict:
        return {**dataclasses.asdict(self.options), "pairing": getattr(self, "_pairing", None)}
