"""The self-supervised baselines of Table 2 (paper section 5.2.1) as `embed_fn` factories.

Every baseline embeds through `SentenceEncoder.encode` (the one inference path) on one loaded
checkpoint; whitening and flow then transform those vectors. Registered names:

| name | Table 2 row | sentence vector |
|---|---|---|
| `cls` | BERT-CLS | last layer's [CLS] output |
| `avg` | BERT-avg | masked mean of the last layer's outputs (the paper's pooling) |
| `whitening` | BERT-whitening | `avg` vectors whitened (Su et al., 2021), fitted on training sentences |
| `flow` | BERT-flow | `avg` vectors mapped to the latent of a flow (Li et al., 2020), fitted on training sentences |
| `avg_token_embeddings` | Avg. GloVe (stand-in) | mean of BERT's input word-piece embedding rows |

GloVe vectors are not available here, so `avg_token_embeddings` is the closest context-free
analogue: it averages rows of the checkpoint's own input embedding table
(`token_embedding`, before position/segment embeddings and LayerNorm) over the sentence's word
pieces, [CLS], [SEP] and padding excluded; results tables name it as such.

The names and Table 2 row names live in `registry.py` (free of TensorFlow). The "adapt" rows of
Table 2 (BERT(adapt)-CLS, -avg, -flow, -whitening) are these same baselines applied to the
checkpoint written by the MLM continued-pretraining stage: evaluate that checkpoint with the
model name "BERT(adapt)" and the rows come out as "BERT(adapt)-flow" etc.
(`registry.display_name`). Nothing else differs.

Whitening and flow are fitted on the mean-pooled vectors of unlabelled training sentences of
the target domain (never on the evaluation files); BERT stays frozen, as in both papers. Both
work in the span of those vectors, which BERT's last LayerNorm makes one dimension smaller
than the hidden size (`fit_principal_axes`): whitening cannot divide by a zero variance, and a
flow's likelihood is unbounded on a flat direction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from dialoguecse_tf.encoder.checkpoints import load_checkpoint, sentence_pooling
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.evaluation.config import FitOptions
from dialoguecse_tf.evaluation.evaluate import CachedEmbedder, EmbedFn
from dialoguecse_tf.evaluation.flow import fit_flow
from dialoguecse_tf.evaluation.registry import get_baseline


class TokenEmbeddingAverager(SentenceEncoder):
    """`SentenceEncoder` whose vector is the mean input word-piece embedding of a sentence.

    Only the token-to-vector step differs from BERT: tokenization, batching and `encode` are
    inherited, so this baseline sees exactly the word pieces the models see. A sentence with no
    word piece (empty text) gets the zero vector.
    """

    def __init__(self, backbone, tokenizer, name: str = "token_embedding_averager"):
        super().__init__(backbone, tokenizer, pooling="mean", name=name)

    def _embed_tokens(self, token_ids, padding_mask, normalize=False):
        table = self.backbone.get_layer("token_embedding").embeddings
        word_pieces = (
            padding_mask
            * tf.cast(token_ids != self.tokenizer.cls_id, padding_mask.dtype)
            * tf.cast(token_ids != self.tokenizer.sep_id, padding_mask.dtype)
        )
        vectors = masked_mean(tf.gather(table, token_ids), word_pieces)
        if normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1)
        return vectors


class CheckpointEmbedders:
    """Cached `embed_fn`s over one loaded checkpoint (backbone + tokenizer).

    Baselines that share an encoder share its cache: avg, whitening and flow all start from
    mean pooling, so BERT runs once per distinct sentence for all three.
    """

    def __init__(self, backbone, tokenizer, batch_size: int = 64, metadata: dict | None = None,
                 own_pooling: str = "mean"):
        self.backbone = backbone
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.metadata = metadata or {}  # the checkpoint's record of its training (`checkpoints.save_checkpoint`)
        # The pooling the checkpoint was trained for (`checkpoints.sentence_pooling`).
        self.own_pooling = own_pooling
        self._cache: dict[str, CachedEmbedder] = {}

    @classmethod
    def from_checkpoint(cls, path: str, max_seq_length: int = 128, batch_size: int = 64,
                        precision: str = "float32") -> "CheckpointEmbedders":
        """The embedders of a checkpoint loaded in `precision` (`load_checkpoint`; its vectors are
        float32 in every precision, and the fitted baselines fit them in float64)."""
        loaded = load_checkpoint(path, max_seq_length=max_seq_length, precision=precision)
        return cls(loaded.backbone, loaded.tokenizer, batch_size, loaded.metadata, sentence_pooling(loaded))

    def _cached(self, key: str, make_encoder: Callable[[], SentenceEncoder]) -> CachedEmbedder:
        if key not in self._cache:
            encoder = make_encoder()
            self._cache[key] = CachedEmbedder(lambda texts: encoder.encode(texts, batch_size=self.batch_size))
        return self._cache[key]

    def pooled(self, pooling: str) -> CachedEmbedder:
        """BERT's last layer pooled by `pooling` ("mean", "cls" or "pooler")."""
        return self._cached(f"pooled:{pooling}", lambda: SentenceEncoder(self.backbone, self.tokenizer, pooling))

    def token_average(self) -> CachedEmbedder:
        return self._cached("token_average", lambda: TokenEmbeddingAverager(self.backbone, self.tokenizer))

    def dialogues(self, protocol: str, max_seq_length: int, sentence_pooling: str | None = None) -> "BuiltModel":
        """Whole dialogues embedded by a `dialogue_protocols` protocol: `max_seq_length` tokens per
        packed dialogue, or each utterance through `pooled(sentence_pooling)` (default: the
        checkpoint's own pooling, as its sentence columns)."""
        from dialoguecse_tf.evaluation.dialogue_protocols import average_utterances, packed_dialogue_encoder

        sentence_pooling = sentence_pooling or self.own_pooling
        if protocol == "utterance_mean":
            # Through the sentence columns' cache: an utterance is embedded once for both.
            sentences = self.pooled(sentence_pooling)
            key = f"dialogues:utterance_mean:{sentence_pooling}"

            def embed_dialogues(dialogues):
                return average_utterances(sentences, dialogues)

            description = (f"each utterance embedded alone as the sentence columns are "
                           f"({_POOLING_DESCRIPTIONS[sentence_pooling]}, at most {self.tokenizer.max_seq_length} "
                           "tokens), the dialogue's utterance vectors averaged")
        elif protocol == "utterance_token_mean":
            encoder = packed_dialogue_encoder(protocol, self.backbone, self.tokenizer, self.metadata, max_seq_length)
            key = f"dialogues:{protocol}:{max_seq_length}"

            def embed_dialogues(dialogues):
                return average_utterances(lambda texts: encoder.encode_utterances(texts, self.batch_size), dialogues)

            description = (f"each utterance alone as [CLS] and its word pieces, no [SEP], at most {max_seq_length} "
                           "tokens, the mean of all its token outputs; the dialogue's utterance vectors averaged")
        else:
            encoder = packed_dialogue_encoder(protocol, self.backbone, self.tokenizer, self.metadata, max_seq_length)
            key = f"dialogues:{protocol}:{max_seq_length}"
            embed_dialogues, description = encoder.encode_dialogues, encoder.describe()
        if key not in self._cache:
            self._cache[key] = CachedEmbedder(embed_dialogues)
        return BuiltModel(self._cache[key], f"dialogues by the {protocol} protocol: {description}")


@dataclasses.dataclass(frozen=True)
class CentredLinearMap:
    """x -> (x - mean) @ kernel, computed in float64, returned as float32."""

    mean: np.ndarray  # [D]
    kernel: np.ndarray  # [D, k]

    def __call__(self, vectors) -> np.ndarray:
        return ((np.asarray(vectors, dtype=np.float64) - self.mean) @ self.kernel).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class PrincipalAxes:
    """Mean, covariance eigenvectors and standard deviations along them (descending) of a
    set of vectors, limited to the directions in which the set varies (its span)."""

    mean: np.ndarray  # [D]
    axes: np.ndarray  # [D, r], orthonormal columns
    stds: np.ndarray  # [r], from the unbiased (`np.cov`) covariance


def fit_principal_axes(embeddings) -> PrincipalAxes:
    """SVD U S U^T of the covariance of `embeddings` [N, D], as Su et al. (2021) compute it.

    Directions whose standard deviation is at rounding-noise level are left out: BERT's last
    LayerNorm makes every token vector, and so every mean-pooled vector, satisfy one linear
    equation (sum_i (x_i - beta_i) / gamma_i = 0), so pooled embeddings never vary along one
    direction; dividing by its ~0 standard deviation would only amplify rounding noise.
    """
    x = np.asarray(embeddings)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"fitting needs at least 2 training vectors [N, D], got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("training vectors contain NaN or infinity")
    resolution = np.finfo(x.dtype if np.issubdtype(x.dtype, np.floating) else np.float64).eps
    x = x.astype(np.float64)
    u, s, _ = np.linalg.svd(np.cov(x, rowvar=False))
    stds = np.sqrt(np.maximum(s, 0.0))
    # The inputs' own rounding error per entry is about resolution * |x|; a direction must vary
    # well beyond that (x100) to carry information.
    noise_floor = 100.0 * resolution * np.sqrt(np.mean(np.square(x)))
    rank = int(np.sum(stds > noise_floor))
    return PrincipalAxes(x.mean(axis=0), u[:, :rank], stds[:rank])


def fit_whitening(embeddings, whitening_dim: int | None = None) -> CentredLinearMap:
    """Su et al. (2021): x -> (x - mu) W[:, :k] with W = U diag(1/sqrt(S)) (`fit_principal_axes`).

    k = `whitening_dim`, by default every direction the embeddings vary in. The whitened
    training embeddings have zero mean and identity (unbiased) covariance.
    """
    axes = fit_principal_axes(embeddings)
    rank = axes.stds.size
    keep = rank if whitening_dim is None else whitening_dim
    if not 1 <= keep <= rank:
        raise ValueError(
            f"whitening_dim must be in 1..{rank}: the {len(embeddings)} training vectors vary in only {rank} "
            f"directions (of {axes.mean.size}); got {whitening_dim}"
        )
    return CentredLinearMap(axes.mean, axes.axes[:, :keep] / axes.stds[:keep])


@dataclasses.dataclass
class BuiltModel:
    """A ready `embed_fn`, a sentence saying what its vectors are, and its fitting stats."""

    embed_fn: EmbedFn
    description: str
    fit: dict | None = None


def _fitted(embedders: CheckpointEmbedders, train_texts: Sequence[str] | None, name: str) -> np.ndarray:
    if not train_texts:
        raise ValueError(f"the {name} baseline is fitted on unlabelled training sentences, but none were given")
    return embedders.pooled("mean")(list(train_texts))


_POOLING_DESCRIPTIONS = {
    "cls": "[CLS] output of the last layer",
    "mean": "mean of the last layer's outputs over the non-padding tokens ([CLS]/[SEP] included)",
    "pooler": "BERT's pooler output (dense + tanh) on the last layer's [CLS] output",
}


def _build_cls(embedders, train_texts, options) -> BuiltModel:
    return build_checkpoint_model(embedders, "cls")


def _build_avg(embedders, train_texts, options) -> BuiltModel:
    return build_checkpoint_model(embedders, "mean")


def _build_whitening(embedders, train_texts, options) -> BuiltModel:
    base = embedders.pooled("mean")
    whitening = fit_whitening(_fitted(embedders, train_texts, "whitening"), options.whitening_dim)
    kept = whitening.kernel.shape[1]
    return BuiltModel(
        lambda texts: whitening(base(texts)),
        f"avg vectors whitened (Su et al. 2021): (x - mu) W[:, :{kept}], mu and W from the covariance "
        f"of the avg vectors of {len(train_texts)} training sentences",
        {"training_vectors": len(train_texts), "whitening_dim": kept},
    )


def _build_flow(embedders, train_texts, options) -> BuiltModel:
    base = embedders.pooled("mean")
    vectors = _fitted(embedders, train_texts, "flow")
    # Only the span: along the direction the embeddings never vary in, the likelihood is
    # unbounded and maximising it would spend the flow on collapsing rounding noise.
    axes = fit_principal_axes(vectors)
    to_span = CentredLinearMap(axes.mean, axes.axes)
    flow, stats = fit_flow(to_span(vectors), options.flow)
    config = options.flow
    return BuiltModel(
        lambda texts: flow.transform(to_span(base(texts))),
        f"latent z of a normalising flow (Li et al. 2020; {config.num_couplings} ActNorm + affine-coupling "
        f"blocks, width {config.hidden_units}) fitted by maximum likelihood ({config.steps} Adam steps) to "
        f"the avg vectors of {len(train_texts)} training sentences, centred and rotated onto the "
        f"{axes.stds.size} directions they vary in; BERT frozen",
        {"flow_dim": int(axes.stds.size), **stats, "flow": dataclasses.asdict(config)},
    )


def _build_token_average(embedders, train_texts, options) -> BuiltModel:
    return BuiltModel(
        embedders.token_average(),
        "mean of the checkpoint's input word-piece embedding rows (token_embedding table, before "
        "position/segment embeddings and LayerNorm) over the sentence's word pieces, [CLS]/[SEP]/padding "
        "excluded; stands in for Avg. GloVe, which is not available",
    )


_BUILDERS: dict[str, Callable[[CheckpointEmbedders, Sequence[str] | None, FitOptions], BuiltModel]] = {
    "cls": _build_cls,
    "avg": _build_avg,
    "whitening": _build_whitening,
    "flow": _build_flow,
    "avg_token_embeddings": _build_token_average,
}


def build_baseline(
    name: str,
    embedders: CheckpointEmbedders,
    train_texts: Sequence[str] | None = None,
    options: FitOptions = FitOptions(),
) -> BuiltModel:
    """Builds (and for whitening/flow, fits) the baseline `name` on a checkpoint's encoders."""
    get_baseline(name)  # raises the registry's clear error for an unknown name
    return _BUILDERS[name](embedders, train_texts, options)


def build_checkpoint_model(embedders: CheckpointEmbedders, pooling: str | None = None) -> BuiltModel:
    """A trained checkpoint (e.g. DialogueCSE) evaluated as is, with `pooling` (None: its own)."""
    pooling = pooling or embedders.own_pooling
    return BuiltModel(embedders.pooled(pooling), _POOLING_DESCRIPTIONS[pooling])
