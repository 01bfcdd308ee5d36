"""MLM continued pretraining (paper, section 5.3) as an objective of the one training stage."""

import dataclasses

import tensorflow as tf
from absl import logging

from dialoguecse_tf import losses
from dialoguecse_tf.config_fields import field
from dialoguecse_tf.models.mlm import BertPretrainer
from dialoguecse_tf.objectives.base import Objective, register
from dialoguecse_tf.records.mlm import MASKED_LM_IDS, MASKED_LM_WEIGHTS, RECORD_TYPE_MLM


@dataclasses.dataclass(frozen=True)
class MlmOptions:
    max_predictions_per_seq: int = field(10, "Masked positions per sequence; must match the records (paper: 10).")
    head_only: bool = field(False, "Train the MLM head alone, the whole encoder frozen (the output projection, "
                            "tied to the token embeddings, too). A first run of this warms up the fresh head of a "
                            "start checkpoint that has none (e.g. a sentence-embedding model), so continued "
                            "pretraining from it does not move the encoder by a random head's gradients.",
                            added_as=False)


@register
class MlmObjective(Objective):
    """Token-level mean cross-entropy over the masked positions of the global batch.

    Each replica divides its sum by the masked-token count of the whole global batch, so the
    replicas' losses (and gradients) add up to the global mean, as on one device (each
    sequence's terms are sums over its masked positions, its weight their count). The whole
    encoder trains; the MLM head is initialised from the start checkpoint when it has one and
    is written with the encoder, so pretraining can continue from it.
    """

    name = "mlm"
    paper = ("masked-language-model continued pretraining, as BERT's",
             'Devlin et al., NAACL 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language '
             'Understanding"',
             "https://arxiv.org/abs/1810.04805")
    summary = "masked-LM continued pretraining"
    record_type = RECORD_TYPE_MLM
    options_class = MlmOptions
    training_defaults = {"train_batch_size": 50, "learning_rate": 2e-5}
    stage_name = "pretrain"

    def record_requirements(self) -> dict:
        return {"max_predictions_per_seq": self.options.max_predictions_per_seq}

    def build_model(self, backbone, bert_config, tokenizer, num_length_buckets: int):
        if self.options.head_only:
            backbone.trainable = False
        return BertPretrainer(backbone, bert_config)

    def initialize_from(self, model, start) -> None:
        """Copies the start checkpoint's MLM head; a start without one keeps a fresh head."""
        if start.backbone is None:
            return
        if start.mlm_head:
            model.assign_head(start.mlm_head, start.path)
        else:
            logging.warning("%s has no MLM head: a fresh one is initialised", start.path)

    def example_losses(self, model, batch, training):
        """Each sequence's summed cross-entropy over its masked positions, and its count of
        correctly predicted masked tokens (`mlm_accuracy`)."""
        # float32 for the softmax even when the model computes in float16 (mixed precision).
        logits = tf.cast(model(batch, training=training), tf.float32)
        labels = batch[MASKED_LM_IDS]
        weights = tf.cast(batch[MASKED_LM_WEIGHTS], tf.float32)
        token_losses = losses.masked_lm_per_token_loss(labels, logits)
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=labels.dtype), labels), tf.float32)
        return (tf.reduce_sum(token_losses * weights, axis=-1),
                {"mlm_accuracy": tf.reduce_sum(correct * weights, axis=-1)})

    def example_weights(self, batch):
        """Each sequence's count of masked positions, float32 [b]."""
        # Each sequence weighs its masked positions: the loss is the mean over masked tokens.
        return tf.reduce_sum(tf.cast(batch[MASKED_LM_WEIGHTS], tf.float32), axis=-1)

    def trains_encoder(self) -> bool:
        return not self.options.head_only

    def encoder_extras(self, model) -> dict:
        return {"mlm_head": model.head_variables()}
