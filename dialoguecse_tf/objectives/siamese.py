"""SiameseBERT_S / SiameseBERT_M (paper, section 5.2.2) as registered objectives.

The authors' released code has no siamese baseline (its `model/` holds only the DialogueCSE
model, and `wrapper_bert.py:296-300` accepts no other model type), so these follow the paper's
text; where the text is silent (the matching layer's features and width) the choices are ours,
stated in `models/siamese.py`.
"""

import dataclasses

from dialoguecse_tf import losses
from dialoguecse_tf.config_fields import field
from dialoguecse_tf.encoder.backbone import freeze_bottom_layers, freeze_pooler
from dialoguecse_tf.models.siamese import SiameseBertModel
from dialoguecse_tf.objectives.base import register
from dialoguecse_tf.objectives.contrastive import ContrastiveObjective, ContrastiveOptions, candidate_metrics


@dataclasses.dataclass(frozen=True)
class SiameseOptions(ContrastiveOptions):
    matching_hidden_size: int = field(256, "Hidden units of the SiameseBERT matching MLP.")


class _SiameseObjective(ContrastiveObjective):
    """Softmax cross-entropy ranking the true response first by the matching layer's scores."""

    options_class = SiameseOptions

    def build_model(self, backbone, bert_config, tokenizer, num_length_buckets: int):
        freeze_bottom_layers(backbone, self.options.num_frozen_layers)
        freeze_pooler(backbone)
        return SiameseBertModel(backbone, matching_hidden_size=self.options.matching_hidden_size,
                                cls_id=tokenizer.cls_id, num_length_buckets=num_length_buckets)

    def example_losses(self, model, batch, training):
        """The ranking loss of the matching scores; the metrics' cosines compare the context's
        and each response's mean-pooled embeddings."""
        outputs = model(batch, training=training)
        per_example = losses.ranking_per_example_loss(outputs["scores"])
        cosines = losses.pair_similarities(outputs["context"], outputs["responses"])
        return per_example, candidate_metrics(outputs["scores"], cosines)


@register
class SiameseSObjective(_SiameseObjective):
    """SiameseBERT_S: the context is the single utterance nearest the response."""

    name = "siamese_s"
    paper = ("the SiameseBERT_S baseline of DialogueCSE",
             "Liu et al., EMNLP 2021, section 5.2.2",
             "https://arxiv.org/abs/2109.12599")
    summary = "SiameseBERT_S baseline: the nearest context utterance"

    def context_turns(self) -> int:
        return 1


@register
class SiameseMObjective(_SiameseObjective):
    """SiameseBERT_M: the `num_context_turns` nearest utterances, flattened into one sequence."""

    name = "siamese_m"
    paper = ("the SiameseBERT_M baseline of DialogueCSE",
             "Liu et al., EMNLP 2021, section 5.2.2",
             "https://arxiv.org/abs/2109.12599")
    summary = "SiameseBERT_M baseline: the flattened multi-turn context"
