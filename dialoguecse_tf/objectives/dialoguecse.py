"""DialogueCSE (paper, section 4): MGE + turn aggregation + NT-Xent, as a registered objective."""

import dataclasses

from dialoguecse_tf import losses
from dialoguecse_tf.config_fields import field
from dialoguecse_tf.encoder import freeze_bottom_layers, freeze_pooler
from dialoguecse_tf.models.dialoguecse import DialogueCSEModel
from dialoguecse_tf.models.layers import AGGREGATIONS, DEFAULT_ATTENTION_HIDDEN_SIZE
from dialoguecse_tf.objectives.base import register
from dialoguecse_tf.objectives.contrastive import ContrastiveObjective, ContrastiveOptions, candidate_metrics


@dataclasses.dataclass(frozen=True)
class DialogueCSEOptions(ContrastiveOptions):
    aggregation: str = field("mean", "Turn aggregation: mean (I2, eq. 7) or attention (I1, eq. 5-6).",
                             choices=AGGREGATIONS)
    attention_hidden_size: int = field(DEFAULT_ATTENTION_HIDDEN_SIZE,
                                       "Hidden units of the I1 scoring FFN (not given in the paper).")
    temperature: float = field(0.1, "NT-Xent temperature tau (paper: 0.1).")

    def __post_init__(self):
        if isinstance(self.temperature, bool) or not self.temperature > 0:
            raise ValueError(f"temperature must be a positive number, got {self.temperature!r}")


@register
class DialogueCSEObjective(ContrastiveObjective):
    """Eq. 8: NT-Xent over the cosines of each candidate's context-free and context-aware
    embeddings, the true response the positive and the sampled responses the negatives.

    The embeddings and the bottom `num_frozen_layers` layers are frozen (section 5.3), and
    BERT's [CLS] pooler, which no loss term reaches.
    """

    name = "dialoguecse"
    summary = "DialogueCSE: MGE, turn aggregation (I1/I2), NT-Xent"
    options_class = DialogueCSEOptions

    def build_model(self, backbone, bert_config, tokenizer, num_length_buckets: int):
        freeze_bottom_layers(backbone, self.options.num_frozen_layers)
        freeze_pooler(backbone)
        return DialogueCSEModel(backbone, aggregation=self.options.aggregation,
                                attention_hidden_size=self.options.attention_hidden_size,
                                num_length_buckets=num_length_buckets)

    def compute_loss(self, model, batch, training, global_batch_size):
        outputs = model(batch, training=training)
        similarities = losses.pair_similarities(outputs["context_free"], outputs["context_aware"])
        per_example = losses.nt_xent_per_example_loss(similarities, self.options.temperature)
        return losses.global_mean(per_example, global_batch_size), candidate_metrics(similarities, similarities)
