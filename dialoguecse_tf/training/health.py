"""A collapsed or exploding encoder stops a training run, as a non-finite loss does.

A far too large learning rate can leave every loss finite while the encoder maps every input to
one vector whose norm grows by orders of magnitude (`--learning_rate=1e6`: norm 3.3e7, one
vector for every text). `EncoderHealth` embeds a fixed probe of random word-piece sequences
with the backbone when training starts and at every logging and checkpoint step, and stops the
run when the probe's vectors have collapsed onto one point (their spread around their mean, over
their mean norm, fell `COLLAPSE_FACTOR` times) or their norm grew `GROWTH_FACTOR` times. Normal
training moves both by small factors; the thresholds sit orders of magnitude away.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dialoguecse_tf.encoder.backbone import run_backbone
from dialoguecse_tf.encoder.pooling import masked_mean

COLLAPSE_FACTOR = 100.0
GROWTH_FACTOR = 100.0
PROBE_SEQUENCES = 16
PROBE_LENGTH = 16


class EncoderCollapseError(ArithmeticError):
    """The encoder's vectors collapsed or exploded during training."""


def spread_and_norm(vectors: np.ndarray) -> tuple[float, float]:
    """(mean distance of the [N, D] vectors to their mean over their mean norm, mean norm)."""
    vectors = np.asarray(vectors, np.float64)
    norm = float(np.linalg.norm(vectors, axis=1).mean())
    spread = float(np.linalg.norm(vectors - vectors.mean(axis=0), axis=1).mean())
    return spread / max(norm, 1e-30), norm


class EncoderHealth:
    """The probe of one backbone, measured against itself at the first `check`."""

    def __init__(self, backbone, tokenizer, seed: int = 0):
        words = [i for i, token in enumerate(tokenizer.vocab) if not (token.startswith("[") and token.endswith("]"))]
        if not words:
            raise ValueError("the vocabulary has no word piece to probe the encoder with")
        rng = np.random.default_rng(seed)
        length = min(PROBE_LENGTH, backbone.max_sequence_length)
        body = rng.choice(words, size=(PROBE_SEQUENCES, length - 2))
        ids = np.concatenate([np.full((PROBE_SEQUENCES, 1), tokenizer.cls_id), body,
                              np.full((PROBE_SEQUENCES, 1), tokenizer.sep_id)], axis=1)
        self.backbone = backbone
        self.token_ids = tf.constant(ids, tf.int32)
        self.padding_mask = tf.ones_like(self.token_ids)
        self.start = None  # (spread, norm) when training started or resumed
        # Traced once: a check comes at every logging step, and an eager pass of the backbone
        # costs more than a tiny model's training step (0.08 s against 0.01 s on 2 CPU cores).
        self._embed = tf.function(self._probe_vectors)

    def _probe_vectors(self) -> tf.Tensor:
        outputs = run_backbone(self.backbone, self.token_ids, self.padding_mask)["sequence_output"]
        return masked_mean(tf.cast(outputs, tf.float32), self.padding_mask)

    def measure(self) -> tuple[float, float]:
        """(spread, mean norm) of the probe's mean-pooled vectors now."""
        return spread_and_norm(self._embed().numpy())

    def check(self, step: int, learning_rate: float | None = None) -> None:
        """Records the start at the first call; raises EncoderCollapseError when the probe has
        collapsed or exploded since."""
        spread, norm = self.measure()
        if self.start is None:
            self.start = (spread, norm)
            return
        start_spread, start_norm = self.start
        rate = f" (learning rate {learning_rate:.3g})" if learning_rate is not None else ""
        problem = None
        if not (np.isfinite(spread) and np.isfinite(norm)):
            problem = "the encoder's vectors are no longer finite"
        elif norm > GROWTH_FACTOR * start_norm:
            problem = (f"the encoder's vectors grew from norm {start_norm:.3g} to {norm:.3g} "
                       f"({norm / start_norm:.3g} times)")
        elif spread * COLLAPSE_FACTOR < start_spread:
            problem = (f"the encoder maps different texts to nearly one vector (spread {start_spread:.3g} -> "
                       f"{spread:.3g})")
        if problem:
            raise EncoderCollapseError(f"{problem} by step {step}{rate}; stopped without saving this step: lower "
                                       f"the learning rate")
