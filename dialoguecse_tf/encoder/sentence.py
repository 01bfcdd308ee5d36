"""The one inference path: raw texts -> tokenizer -> BERT -> pooling -> vectors.

Evaluation, export and every baseline embed sentences through `SentenceEncoder`, so a
number in a results table and a vector served from a SavedModel come from the same code.
"""

import math

import numpy as np
import tensorflow as tf

from dialoguecse_tf.encoder.backbone import run_backbone, trim_padding, with_precision
from dialoguecse_tf.encoder.pooling import POOLING_MODES, SentencePooling
from dialoguecse_tf.precision import DEFAULT_PRECISION, check_precision, precision_of
from dialoguecse_tf.progress import Progress


def encode_in_batches(texts, embed_batch, dimension: int, batch_size: int = 64,
                      sort_by_length: bool = True, verbose: bool = False) -> np.ndarray:
    """Embeds `texts` batch by batch, in input order.

    Sorting by length first (as sentence-transformers does) groups sentences of similar
    length, so a trimmed batch carries little padding; the order is restored at the end.

    Args:
      texts: iterable of str, N texts.
      embed_batch: callable, a list of n str -> array of shape [n, D].
      dimension: int, D; gives the shape of the result when `texts` is empty.
      batch_size: int, texts per `embed_batch` call, positive.
      sort_by_length: bool, whether batches group texts of similar length (longest first).
      verbose: bool, whether progress is reported per batch (`progress.Progress`).

    Returns:
      np.ndarray of shape [N, D], row i the vector of `texts[i]`, in `embed_batch`'s dtype
      (float32 for no texts).

    Raises:
      ValueError: if `batch_size` is not positive.
    """
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    texts = list(texts)
    if not texts:
        return np.zeros((0, dimension), dtype=np.float32)
    order = np.argsort([-len(text) for text in texts], kind="stable") if sort_by_length else np.arange(len(texts))
    num_batches = math.ceil(len(texts) / batch_size)
    progress = Progress(num_batches, "batch") if verbose else None
    vectors = None
    for start in range(0, len(texts), batch_size):
        indices = order[start:start + batch_size]
        chunk = np.asarray(embed_batch([texts[i] for i in indices]))
        if vectors is None:
            vectors = np.zeros((len(texts), chunk.shape[1]), dtype=chunk.dtype)
        vectors[indices] = chunk
        if progress is not None:
            progress.update(start // batch_size + 1)
    return vectors


class SentenceEncoder(tf.Module):
    """A tokenizer and a BERT backbone that embed raw strings in-graph.

    `embed_tokens` and `embed_texts` are graph functions, so the export stage can put
    them into a SavedModel as they are. `trim_padding` (the fast path, on by default)
    runs each batch at the length of its longest sentence instead of `max_seq_length`;
    `jit_compile` compiles the backbone and pooling with XLA. In every precision the vectors
    are float32: BERT's outputs are cast to float32 before pooling (`precision`).

    Example:
      >>> encoder = SentenceEncoder.from_checkpoint("runs/dialoguecse/encoder")
      >>> vectors = encoder.encode(["how much is shipping", "is it in stock"], normalize=True)
      >>> vectors.shape  # (2, encoder.dimension), float32
    """

    def __init__(self, backbone, tokenizer, pooling: str = "mean", trim_padding: bool = True,
                 jit_compile: bool = False, name: str = "sentence_encoder", precision: str | None = None):
        """Constructor for SentenceEncoder.

        Args:
          backbone: keras_hub.models.BertBackbone, e.g. `load_checkpoint(...).backbone`.
          tokenizer: encoder.tokenization.Tokenizer matching the backbone's vocabulary; its
            `max_seq_length` is the length texts are cut to.
          pooling: str, one of `POOLING_MODES` ("mean", "cls", "pooler").
          trim_padding: bool, whether each batch runs at its longest sentence's length
            (same vectors, less work).
          jit_compile: bool, whether the backbone and pooling are compiled with XLA.
          name: str, the tf.Module's name.
          precision: None, the backbone's own; or one of `precision.PRECISIONS`, checked
            against this machine, the backbone then copied into it unless it computes in it
            already (`backbone.with_precision`: the same float32 weights).

        Raises:
          ValueError: if `pooling` is not one of `POOLING_MODES`, or this machine does not run
            `precision`.
        """
        super().__init__(name=name)
        if pooling not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {POOLING_MODES}, got {pooling!r}")
        if precision is not None:
            check_precision(precision)
            backbone = with_precision(backbone, precision)
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.trim_padding = trim_padding
        self.jit_compile = jit_compile
        self._pool = SentencePooling(pooling)
        # One traced graph per (batch, length) pattern is enough: both are left unknown.
        self._embed_tokens_fn = tf.function(self._embed_tokens, reduce_retracing=True)
        self._forward = tf.function(self._pooled_output, jit_compile=True) if jit_compile else self._pooled_output

    @classmethod
    def from_checkpoint(cls, path: str, max_seq_length: int = 128, pooling: str | None = None,
                        precision: str = DEFAULT_PRECISION, **kwargs):
        """Builds an encoder from a checkpoint folder of any form `load_checkpoint` reads.

        Args:
          path: str, a checkpoint folder (this project's, Google's TF1, HuggingFace's or a
            keras-hub preset) or a TF1 checkpoint prefix.
          max_seq_length: int, the length texts are cut to.
          pooling: str or None; None takes the pooling the checkpoint records
            (`checkpoints.sentence_pooling`), else mean.
          precision: one of `precision.PRECISIONS`: "bfloat16" computes in bfloat16 (float32
            vectors still), where this machine has bfloat16 arithmetic.
          **kwargs: `load_checkpoint`'s `do_lower_case` and `vocab_file`.

        Returns:
          SentenceEncoder with the checkpoint's backbone and tokenizer (trim_padding on,
          jit_compile off).

        Raises:
          FileNotFoundError: if `path` does not exist.
          ValueError: if `path` is no checkpoint, does not match its config, the pooling
            is not one of `POOLING_MODES`, or this machine does not run `precision`.

        Example:
          >>> encoder = SentenceEncoder.from_checkpoint("runs/dialoguecse/encoder", max_seq_length=64)
        """
        from dialoguecse_tf.encoder.checkpoints import load_checkpoint, sentence_pooling

        loaded = load_checkpoint(path, max_seq_length=max_seq_length, precision=precision, **kwargs)
        return cls(loaded.backbone, loaded.tokenizer, pooling=sentence_pooling(loaded, pooling))

    @property
    def max_seq_length(self) -> int:
        return self.tokenizer.max_seq_length

    @property
    def dimension(self) -> int:
        return self.backbone.hidden_dim

    @property
    def precision(self) -> str:
        """The precision the backbone computes in (`precision.PRECISIONS`)."""
        return precision_of(self.backbone)

    def _embed_tokens(self, token_ids, padding_mask, normalize=False):
        if self.trim_padding:
            token_ids, padding_mask = trim_padding(token_ids, padding_mask)
        vectors = self._forward(token_ids, padding_mask)
        if normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1)
        return vectors

    def _pooled_output(self, token_ids, padding_mask):
        outputs = run_backbone(self.backbone, token_ids, padding_mask)
        # Pooled (and normalised) in float32 whatever the backbone computes in.
        return self._pool(tf.cast(outputs["sequence_output"], tf.float32), padding_mask,
                          tf.cast(outputs["pooled_output"], tf.float32))

    def embed_tokens(self, token_ids, padding_mask, normalize: bool = False):
        """Embeds token ids (a graph function).

        Args:
          token_ids: int Tensor of shape [B, L], cast to int32.
          padding_mask: int Tensor of shape [B, L], 1 for a real token, cast to int32.
          normalize: bool, whether the vectors are scaled to unit length.

        Returns:
          float32 Tensor of shape [B, D].
        """
        return self._embed_tokens_fn(
            tf.cast(token_ids, tf.int32), tf.cast(padding_mask, tf.int32), normalize
        )

    def embed_texts(self, texts, normalize: bool = False):
        """Embeds strings; tokenization runs in the graph.

        Args:
          texts: str Tensor of shape [B] (or a list of B str), UTF-8.
          normalize: bool, whether the vectors are scaled to unit length.

        Returns:
          float32 Tensor of shape [B, D].

        Raises:
          tf.errors.InvalidArgumentError: if a text is not valid UTF-8.
        """
        inputs = self.tokenizer(tf.convert_to_tensor(texts, dtype=tf.string))
        return self.embed_tokens(inputs["token_ids"], inputs["padding_mask"], normalize)

    def encode(self, texts, batch_size: int = 64, normalize: bool = False, verbose: bool = False,
               sort_by_length: bool = True) -> np.ndarray:
        """Embeds a list of strings in batches (sentence-transformers' `encode`).

        Args:
          texts: iterable of N str.
          batch_size: int, texts per forward pass, positive.
          normalize: bool, whether the vectors are scaled to unit length.
          verbose: bool, whether progress is reported per batch.
          sort_by_length: bool, whether batches group texts of similar length (the result's
            order is the input's either way).

        Returns:
          np.ndarray of float32, shape [N, D], row i the vector of `texts[i]`.

        Raises:
          ValueError: if `batch_size` is not positive.
          tf.errors.InvalidArgumentError: if a text is not valid UTF-8.

        Example:
          >>> encoder.encode(["hello", "is it in stock"], batch_size=32).shape
          (2, 768)
        """
        return encode_in_batches(
            texts, lambda batch: self.embed_texts(batch, normalize).numpy(), self.dimension,
            batch_size, sort_by_length, verbose,
        )
