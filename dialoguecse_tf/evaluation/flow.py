"""The BERT-flow baseline's normalising flow (Li et al., 2020), in Keras 3.

BERT-flow keeps BERT fixed and fits an invertible map f from its (mean-pooled) sentence
embeddings x to a latent z = f(x) with a standard normal prior, by maximum likelihood on
unlabelled sentences of the target domain:

    log p(x) = log N(f(x); 0, I) + log |det df/dx|.

z, the "Gaussianised" vector, is then the sentence embedding compared by cosine.

The flow here is a RealNVP/Glow-style stack. Each of `num_couplings` blocks is

1. ActNorm: y = (x + b) * exp(s) per dimension, initialised from data (Glow) so every block
   starts with zero-mean unit-variance inputs; log-det = sum(s).
2. A fixed dimension permutation: a seeded random shuffle in even blocks and a reversal in
   odd blocks. The reversal makes the dimensions a block transformed condition the next
   block, so every dimension is transformed (RealNVP's alternating halves); the shuffles mix
   which dimensions interact. Permutations have log-det 0.
3. An affine coupling: the first half x1 passes unchanged and the second becomes
   x2 * exp(log_s) + t with (log_s, t) = MLP(x1) (two ReLU layers of `hidden_units`). The
   last MLP layer starts at zero, so every coupling starts as the identity, and
   log_s = B * tanh(raw / B) keeps scales within exp(+-B) for stable training; log-det =
   sum(log_s).

The log-determinant is exact (triangular Jacobians), so training maximises the true
likelihood. Li et al. used a multi-scale Glow; this is the same family at one scale with fixed
permutations instead of learned 1x1 convolutions, since a sentence vector has no spatial axes
to squeeze. Defaults (`config.FlowConfig`): 8 blocks, MLP width 256, 1000 Adam steps of 64
vectors at learning rate 1e-3.
"""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from dialoguecse_tf.evaluation.config import FlowConfig

_TRANSFORM_CHUNK = 4096


class ActNorm(keras.layers.Layer):
    """Per-dimension affine y = (x + bias) * exp(log_scale) (Glow's activation normalisation)."""

    def build(self, input_shape):
        dim = input_shape[-1]
        self.bias = self.add_weight(shape=(dim,), initializer="zeros", name="bias")
        self.log_scale = self.add_weight(shape=(dim,), initializer="zeros", name="log_scale")

    def initialize(self, x: np.ndarray) -> None:
        """Sets the parameters so that `x` maps to zero mean and unit variance per dimension."""
        self.bias.assign(-x.mean(axis=0))
        self.log_scale.assign(-np.log(x.std(axis=0) + 1e-6))

    def call(self, x):
        logdet = ops.sum(self.log_scale) * ops.ones_like(x[:, 0])
        return (x + self.bias) * ops.exp(self.log_scale), logdet

    def inverse(self, y):
        return y * ops.exp(-self.log_scale) - self.bias


class AffineCoupling(keras.layers.Layer):
    """A fixed permutation, then y2 = x2 * exp(log_s(x1)) + t(x1) with x1 unchanged."""

    def __init__(self, permutation, hidden_units: int, log_scale_bound: float, seed: int, **kwargs):
        super().__init__(**kwargs)
        self.permutation = np.asarray(permutation, dtype=np.int32)
        self.inverse_permutation = np.argsort(self.permutation).astype(np.int32)
        dim = len(self.permutation)
        self.split = dim // 2
        self.log_scale_bound = float(log_scale_bound)
        self.hidden = [
            keras.layers.Dense(
                hidden_units, activation="relu", kernel_initializer=keras.initializers.GlorotUniform(seed + i)
            )
            for i in range(2)
        ]
        self.output_layer = keras.layers.Dense(2 * (dim - self.split), kernel_initializer="zeros")

    def _log_scale_and_shift(self, x1):
        h = x1
        for layer in self.hidden:
            h = layer(h)
        raw_log_scale, shift = ops.split(self.output_layer(h), 2, axis=-1)
        bound = self.log_scale_bound
        return bound * ops.tanh(raw_log_scale / bound), shift

    def call(self, x):
        x = ops.take(x, self.permutation, axis=1)
        x1, x2 = x[:, : self.split], x[:, self.split:]
        log_scale, shift = self._log_scale_and_shift(x1)
        y = ops.concatenate([x1, x2 * ops.exp(log_scale) + shift], axis=1)
        return y, ops.sum(log_scale, axis=1)

    def inverse(self, y):
        y1, y2 = y[:, : self.split], y[:, self.split:]
        log_scale, shift = self._log_scale_and_shift(y1)
        x = ops.concatenate([y1, (y2 - shift) * ops.exp(-log_scale)], axis=1)
        return ops.take(x, self.inverse_permutation, axis=1)


class NormalizingFlow(keras.layers.Layer):
    """x [N, D] -> (z [N, D], log|det dz/dx| [N]); `inverse(z)` -> x. See the module docstring."""

    def __init__(self, dim: int, config: FlowConfig = FlowConfig(), **kwargs):
        super().__init__(**kwargs)
        if dim < 2:
            raise ValueError(f"a coupling flow needs at least 2 dimensions, got {dim}")
        self.dim = dim
        rng = np.random.default_rng(config.seed)
        self.actnorms = []
        self.couplings = []
        for block in range(config.num_couplings):
            permutation = rng.permutation(dim) if block % 2 == 0 else np.arange(dim)[::-1]
            self.actnorms.append(ActNorm(name=f"actnorm_{block}"))
            self.couplings.append(AffineCoupling(
                permutation, config.hidden_units, config.log_scale_bound,
                seed=config.seed + 2 * block, name=f"coupling_{block}",
            ))

    def call(self, x):
        logdet = ops.zeros_like(x[:, 0])
        for actnorm, coupling in zip(self.actnorms, self.couplings):
            x, block_logdet = actnorm(x)
            logdet += block_logdet
            x, block_logdet = coupling(x)
            logdet += block_logdet
        return x, logdet

    def inverse(self, z):
        for actnorm, coupling in zip(reversed(self.actnorms), reversed(self.couplings)):
            z = actnorm.inverse(coupling.inverse(z))
        return z

    def log_prob(self, x):
        """Exact log-density of each row of x under the flow with a standard normal prior."""
        z, logdet = self(x)
        return -0.5 * ops.sum(ops.square(z), axis=1) - 0.5 * self.dim * math.log(2 * math.pi) + logdet

    def initialize(self, x: np.ndarray) -> None:
        """Data-dependent ActNorm initialisation, block by block on the data as it flows."""
        h = np.asarray(x, dtype=np.float32)
        if not self.built:
            self(h[:1])
        for actnorm, coupling in zip(self.actnorms, self.couplings):
            actnorm.initialize(h)
            h, _ = coupling(actnorm(h)[0])
            h = np.asarray(h)

    def transform(self, x: np.ndarray) -> np.ndarray:
        """z = f(x) as float32 NumPy, in chunks so a large set never sits in one tensor."""
        x = np.asarray(x, dtype=np.float32)
        chunks = [
            np.asarray(self(x[start:start + _TRANSFORM_CHUNK])[0]) for start in range(0, len(x), _TRANSFORM_CHUNK)
        ]
        return np.concatenate(chunks, axis=0) if chunks else np.zeros((0, self.dim), np.float32)

    def nll_per_dim(self, x: np.ndarray) -> float:
        """Mean negative log-likelihood of the rows of x, in nats per dimension."""
        x = np.asarray(x, dtype=np.float32)
        total = sum(
            -float(ops.sum(self.log_prob(x[start:start + _TRANSFORM_CHUNK])))
            for start in range(0, len(x), _TRANSFORM_CHUNK)
        )
        return total / (len(x) * self.dim)


def fit_flow(embeddings: np.ndarray, config: FlowConfig = FlowConfig()) -> tuple[NormalizingFlow, dict]:
    """Fits a `NormalizingFlow` to the rows of `embeddings` by maximum likelihood (Adam).

    Mini-batches are drawn without replacement and reshuffled each epoch, from a NumPy
    generator seeded with `config.seed`, so a fit is reproducible. Returns the flow and
    stats: the training NLL (nats/dim) after the data-dependent initialisation and after the
    last step, the number of steps and of training vectors.
    """
    x = np.asarray(embeddings, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"fitting a flow needs at least 2 training vectors [N, D], got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("flow training vectors contain NaN or infinity")
    flow = NormalizingFlow(x.shape[1], config)
    flow.initialize(x)
    optimizer = keras.optimizers.Adam(learning_rate=config.learning_rate)
    variables = flow.trainable_variables
    # Keras optimizers create their slots on first use; inside a tf.function that must not happen.
    optimizer.build(variables)

    @tf.function
    def train_step(batch):
        with tf.GradientTape() as tape:
            loss = -tf.reduce_mean(flow.log_prob(batch)) / flow.dim
        optimizer.apply(tape.gradient(loss, variables), variables)
        return loss

    nll_before = flow.nll_per_dim(x)
    rng = np.random.default_rng(config.seed)
    batch_size = min(config.batch_size, len(x))
    order, position = rng.permutation(len(x)), 0
    for _ in range(config.steps):
        if position + batch_size > len(order):
            order, position = rng.permutation(len(x)), 0
        train_step(tf.constant(x[order[position:position + batch_size]]))
        position += batch_size
    nll_after = flow.nll_per_dim(x)
    if not math.isfinite(nll_after):
        raise FloatingPointError(
            f"flow training diverged (NLL {nll_after}); lower the flow learning rate ({config.learning_rate})"
        )
    return flow, {
        "nll_per_dim_before": nll_before,
        "nll_per_dim_after": nll_after,
        "steps": config.steps,
        "training_vectors": len(x),
    }
