"""A tiny DialogueCSE setting: the batch shapes, a random contrastive batch of them and the model
around a frozen tiny backbone, shared by the model tests (DialogueCSE's, the siamese baseline's)
and the training loop's."""

import numpy as np

from dialoguecse_tf.encoder.backbone import build_backbone, freeze_bottom_layers, freeze_pooler
from dialoguecse_tf.models import DialogueCSEModel

# Batch size, context turns, candidates (the positive and its negatives), tokens per turn.
B, T, K, L = 3, 3, 4, 8


def contrastive_batch(vocab_size, seed=0):
    """A contrastive batch with padded tokens, a missing turn and a context with none."""
    rng = np.random.default_rng(seed)
    context_lengths = rng.integers(2, L + 1, size=(B, T))
    candidate_lengths = rng.integers(2, L + 1, size=(B, K))
    turn_mask = np.array([[1, 1, 1], [1, 1, 0], [0, 0, 0]], np.int32)
    context_lengths[turn_mask == 0] = 0
    context_mask = (np.arange(L) < context_lengths[..., None]).astype(np.int32)
    candidate_mask = (np.arange(L) < candidate_lengths[..., None]).astype(np.int32)
    context_ids = rng.integers(5, vocab_size, size=(B, T, L)).astype(np.int32) * context_mask
    candidate_ids = rng.integers(5, vocab_size, size=(B, K, L)).astype(np.int32) * candidate_mask
    return {
        "context_input_ids": context_ids,
        "context_input_mask": context_mask,
        "context_turn_mask": turn_mask,
        "candidate_input_ids": candidate_ids,
        "candidate_input_mask": candidate_mask,
    }


def dialoguecse_model(config, num_frozen_layers=1, **kwargs):
    """The model around a backbone frozen as the DialogueCSE objective freezes it."""
    backbone = build_backbone(config)
    freeze_bottom_layers(backbone, num_frozen_layers)
    freeze_pooler(backbone)
    return DialogueCSEModel(backbone, **kwargs)
