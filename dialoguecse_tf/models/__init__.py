"""The DialogueCSE contrastive model, its head layers and its loss."""

from dialoguecse_tf.models.dialoguecse import DialogueCSEModel
from dialoguecse_tf.models.layers import (
    AGGREGATIONS,
    DEFAULT_ATTENTION_HIDDEN_SIZE,
    MatchingGuidedEmbedding,
    TurnAggregation,
)
from dialoguecse_tf.models.losses import nt_xent_loss, nt_xent_per_example_loss, pair_similarities

__all__ = [
    "AGGREGATIONS",
    "DEFAULT_ATTENTION_HIDDEN_SIZE",
    "DialogueCSEModel",
    "MatchingGuidedEmbedding",
    "TurnAggregation",
    "nt_xent_loss",
    "nt_xent_per_example_loss",
    "pair_similarities",
]
