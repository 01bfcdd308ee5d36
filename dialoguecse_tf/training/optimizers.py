"""Learning-rate schedules and optimizers: BERT's AdamW and the DialogueCSE authors' Adam,
both clipping the global batch's gradient."""

import math

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's schedule: linear warmup to `learning_rate`, then linear decay to 0."""

    def __init__(self, learning_rate: float, num_warmup_steps: int, num_train_steps: int):
        self.learning_rate = learning_rate
        self.num_warmup_steps = num_warmup_steps
        self.num_train_steps = num_train_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        peak = tf.constant(self.learning_rate, tf.float32)
        decay_steps = max(self.num_train_steps - self.num_warmup_steps, 1)
        decayed = peak * tf.maximum(0.0, 1.0 - (step - self.num_warmup_steps) / decay_steps)
        if self.num_warmup_steps <= 0:
            return decayed
        warm = peak * (step + 1.0) / self.num_warmup_steps
        return tf.where(step < self.num_warmup_steps, warm, decayed)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_warmup_steps": self.num_warmup_steps,
            "num_train_steps": self.num_train_steps,
        }


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class ExponentialDecayFloor(keras.optimizers.schedules.LearningRateSchedule):
    """`max(learning_rate * decay_rate ** (step / decay_steps), min_learning_rate)`, continuous,
    no warmup: the DialogueCSE authors' schedule (wrapper_bert.py:217-219)."""

    def __init__(self, learning_rate: float, decay_rate: float, decay_steps: int, min_learning_rate: float):
        self.learning_rate = learning_rate
        self.decay_rate = decay_rate
        self.decay_steps = decay_steps
        self.min_learning_rate = min_learning_rate

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        decayed = self.learning_rate * tf.pow(tf.constant(self.decay_rate, tf.float32), step / self.decay_steps)
        return tf.maximum(decayed, self.min_learning_rate)

    def get_config(self):
        return {"learning_rate": self.learning_rate, "decay_rate": self.decay_rate,
                "decay_steps": self.decay_steps, "min_learning_rate": self.min_learning_rate}


class _GlobalBatchClipping:
    """Makes an optimizer's `global_clipnorm` apply to the global batch's gradient.

    Keras clips in `apply`, before the TensorFlow backend sums the replicas' gradients, so
    with several replicas each replica's share is clipped on its own and training departs
    from one device's as soon as clipping acts. Here each replica scales its share by the
    factor the summed gradient calls for, which makes the sum the clipped global gradient,
    at the cost of one more all-reduce of the gradients per step.
    """

    def _clip_gradients(self, grads):
        context = tf.distribute.get_replica_context()
        if not self.global_clipnorm or context is None or context.num_replicas_in_sync == 1:
            return super()._clip_gradients(grads)
        norm = tf.linalg.global_norm(context.all_reduce(tf.distribute.ReduceOp.SUM, grads))
        # Keras's own formula, including the NaN scale for a non-finite norm.
        scale = self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm) + (norm - norm)
        return [g * scale for g in grads]


class GlobalBatchClippingAdamW(_GlobalBatchClipping, keras.optimizers.AdamW):
    """AdamW with `_GlobalBatchClipping`."""


class GlobalBatchClippingAdam(_GlobalBatchClipping, keras.optimizers.Adam):
    """Adam with `_GlobalBatchClipping`."""


def create_optimizer(learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                     weight_decay: float = 0.01, loss_scaling: bool = False,
                     epsilon: float = 1e-6) -> keras.optimizers.Optimizer:
    """AdamW as in BERT: no decay on LayerNorm and biases, epsilon 1e-6, clip norm 1.

    `weight_decay` and `epsilon` differ for objectives trained with HuggingFace's Trainer
    defaults (0.0 and 1e-8, e.g. SimCSE).

    `loss_scaling` (for mixed precision) wraps it in dynamic loss scaling, so small float16
    gradients do not flush to zero; steps with non-finite gradients are skipped.
    """
    optimizer = GlobalBatchClippingAdamW(
        learning_rate=WarmupLinearDecay(learning_rate, num_warmup_steps, num_train_steps),
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=epsilon,
        global_clipnorm=1.0,
    )
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scaling else optimizer


def create_released_optimizer(learning_rate: float, decay_rate: float, decay_steps: int,
                              min_learning_rate: float, clip_norm: float,
                              loss_scaling: bool = False) -> keras.optimizers.Optimizer:
    """The DialogueCSE authors' optimizer: plain Adam (beta 0.9 / 0.999, epsilon 1e-8, no
    weight decay, wrapper_bert.py:222), `ExponentialDecayFloor`, global-norm clipping
    (3.0 in the release, l.360)."""
    optimizer = GlobalBatchClippingAdam(
        learning_rate=ExponentialDecayFloor(learning_rate, decay_rate, decay_steps, min_learning_rate),
        beta_1=0.9, beta_2=0.999, epsilon=1e-8, global_clipnorm=clip_norm,
    )
    return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scaling else optimizer


def resolve_num_train_steps(num_train_steps: int | None, num_train_epochs: float | None,
                            num_examples: int, train_batch_size: int) -> int:
    """Steps from either flag; epochs may be fractional (the paper pretrains ~0.5 epoch)."""
    if (num_train_steps is None) == (num_train_epochs is None):
        raise ValueError("set exactly one of num_train_steps and num_train_epochs")
    if num_train_steps is None:
        num_train_steps = math.ceil(num_train_epochs * num_examples / train_batch_size)
    if num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
    return num_train_steps
