"""The training models, each built around a BERT backbone it is given: DialogueCSE (MGE layer,
turn aggregation), the SiameseBERT baselines, DSE's and SimCSE's pair models and the MLM
pretrainer. Their losses are in `dialoguecse_tf.losses`, applied by the objectives."""

from dialoguecse_tf.models.dialoguecse import DialogueCSEModel
from dialoguecse_tf.models.dse import DSEModel
from dialoguecse_tf.models.layers import (
    AGGREGATIONS,
    DEFAULT_ATTENTION_HIDDEN_SIZE,
    MatchingGuidedEmbedding,
    TurnAggregation,
)
from dialoguecse_tf.models.mlm import BertPretrainer
from dialoguecse_tf.models.siamese import SiameseBertModel
from dialoguecse_tf.models.simcse import SimCSEModel

__all__ = [
    "AGGREGATIONS",
    "DEFAULT_ATTENTION_HIDDEN_SIZE",
    "BertPretrainer",
    "DSEModel",
    "DialogueCSEModel",
    "MatchingGuidedEmbedding",
    "SiameseBertModel",
    "SimCSEModel",
    "TurnAggregation",
]
