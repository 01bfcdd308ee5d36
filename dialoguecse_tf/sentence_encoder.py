"""The one inference path: raw texts -> tokenizer -> BERT -> pooling -> vectors.

Evaluation, export and every baseline embed sentences through `SentenceEncoder`, so a
number in a results table and a vector served from a SavedModel come from the same code.
"""

import math

import keras
import numpy as np
import tensorflow as tf

from dialoguecse_tf.pooling import POOLING_MODES, SentencePooling


class SentenceEncoder(tf.Module):
    """A tokenizer and a BERT backbone that embed raw strings in-graph.

    `embed_tokens` and `embed_texts` are graph functions, so the export stage can put
    them into a SavedModel as they are.
    """

    def __init__(self, backbone, tokenizer, pooling: str = "mean", name: str = "sentence_encoder"):
        super().__init__(name=name)
        if pooling not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = pooling
        self._pool = SentencePooling(pooling)
        # One traced graph per (batch, length) pattern is enough: both are left unknown.
        self._embed_tokens_fn = tf.function(self._embed_tokens, reduce_retracing=True)

    @classmethod
    def from_checkpoint(cls, path: str, max_seq_length: int = 128, pooling: str = "mean", **kwargs):
        from dialoguecse_tf.checkpoints import load_checkpoint

        loaded = load_checkpoint(path, max_seq_length=max_seq_length, **kwargs)
        return cls(loaded.backbone, loaded.tokenizer, pooling=pooling)

    @property
    def max_seq_length(self) -> int:
        return self.tokenizer.max_seq_length

    @property
    def dimension(self) -> int:
        return self.backbone.hidden_dim

    def _embed_tokens(self, token_ids, padding_mask, normalize=False):
        outputs = self.backbone(
            {
                "token_ids": token_ids,
                "segment_ids": tf.zeros_like(token_ids),
                "padding_mask": padding_mask,
            },
            training=False,
        )
        vectors = self._pool(outputs["sequence_output"], padding_mask)
        if normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1)
        return vectors

    def embed_tokens(self, token_ids, padding_mask, normalize: bool = False):
        """[B, L] int32 ids and mask -> [B, D] float32 vectors (a graph function)."""
        return self._embed_tokens_fn(
            tf.cast(token_ids, tf.int32), tf.cast(padding_mask, tf.int32), normalize
        )

    def embed_texts(self, texts, normalize: bool = False):
        """[B] UTF-8 strings -> [B, D] vectors; tokenization runs in the graph."""
        inputs = self.tokenizer(tf.convert_to_tensor(texts, dtype=tf.string))
        return self.embed_tokens(inputs["token_ids"], inputs["padding_mask"], normalize)

    def encode(self, texts, batch_size: int = 64, normalize: bool = False, verbose: bool = False) -> np.ndarray:
        """Embeds a list of strings; returns float32 [len(texts), D] in input order."""
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        num_batches = math.ceil(len(texts) / batch_size)
        progress = keras.utils.Progbar(num_batches, unit_name="batch") if verbose else None
        chunks = []
        for start in range(0, len(texts), batch_size):
            chunks.append(self.embed_texts(texts[start:start + batch_size], normalize).numpy())
            if progress is not None:
                progress.add(1)
        return np.concatenate(chunks, axis=0)
