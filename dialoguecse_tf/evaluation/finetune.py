"""The fine-tuning behind DSE's fine-tuned evaluations (`tasks/finetune_base.py` states what the
release computes and where this departs): fresh trainable copies of a row's encoder, the
release's inputs, one run's training with validation and early stopping, its test score.

`run_evaluation` hands a fine-tuned task an `EncoderFactory` of each checkpoint row: every run
starts from the checkpoint's weights in a backbone of its own, so neither the other runs nor the
row's other tasks (which embed with the loaded backbone) see what a run trained.
"""

from __future__ import annotations

import dataclasses
import math
import re

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from dialoguecse_tf.encoder.backbone import build_backbone, freeze_pooler, run_backbone
from dialoguecse_tf.encoder.pooling import masked_mean
from dialoguecse_tf.evaluation.tasks.finetune_base import FineTuneSettings, accuracy, multilabel_f1
from dialoguecse_tf.precision import precision_of

# Inference only: the batch changes no number, only the time.
EVAL_BATCH_SIZE = 64
_SEP_MARKER = re.compile(re.escape("[SEP]"))


@dataclasses.dataclass
class TrainableEncoder:
    """A backbone of its own, trainable, and the row's tokenizer (shared: it holds no state)."""

    backbone: object
    tokenizer: object


class EncoderFactory:
    """Fresh trainable copies of one loaded encoder: each call builds a new backbone of the same
    config holding the weights the encoder had when the factory was made.

    Example:
      >>> factory = EncoderFactory(loaded.backbone, loaded.tokenizer)
      >>> encoder = factory()  # encoder.backbone is not loaded.backbone; same weights
    """

    def __init__(self, backbone, tokenizer):
        """Constructor.

        Args:
          backbone: keras_hub.models.BertBackbone made by `build_backbone` (so it carries
            `bert_config`), e.g. a loaded checkpoint's.
          tokenizer: encoder.tokenization.Tokenizer of the backbone's vocabulary.
        """
        self.config = backbone.bert_config
        self.precision = precision_of(backbone)
        self.weights = [np.array(value) for value in backbone.get_weights()]
        self.tokenizer = tokenizer

    def __call__(self) -> TrainableEncoder:
        """A new backbone with the factory's weights, in its backbone's precision, every layer
        trainable but the [CLS] pooler (mean pooling never reaches it), and the tokenizer.

        Returns:
          TrainableEncoder.
        """
        backbone = build_backbone(self.config, precision=self.precision)
        backbone.set_weights(self.weights)
        freeze_pooler(backbone)
        return TrainableEncoder(backbone, self.tokenizer)


def pack_texts(tokenizer, texts, max_seq_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and mask of texts as the release's HuggingFace tokenizer makes them: "[SEP]"
    written in a text is the separator token (the dialogue-act inputs are built with it), the
    word pieces are cut at the end to fit, and each row is `[CLS] pieces [SEP]`.

    Args:
      tokenizer: encoder.tokenization.Tokenizer.
      texts: sequence of N str.
      max_seq_length: int >= 3, L.

    Returns:
      (token_ids, padding_mask), int32 arrays of shape [N, L], padded with the pad id and 0.
    """
    segments = [_SEP_MARKER.split(text) for text in texts]
    flat = [segment for parts in segments for segment in parts]
    pieces = tokenizer.tokenize(tf.constant(flat, dtype=tf.string)).to_list() if flat else []
    token_ids = np.full((len(texts), max_seq_length), tokenizer.pad_id, np.int32)
    padding_mask = np.zeros((len(texts), max_seq_length), np.int32)
    position = 0
    for row, parts in enumerate(segments):
        ids = []
        for i in range(len(parts)):
            ids += ([tokenizer.sep_id] if i else []) + pieces[position + i]
        position += len(parts)
        ids = [tokenizer.cls_id] + ids[:max_seq_length - 2] + [tokenizer.sep_id]
        token_ids[row, :len(ids)] = ids
        padding_mask[row, :len(ids)] = 1
    return token_ids, padding_mask


@dataclasses.dataclass(frozen=True)
class Examples:
    """Texts and their labels: [N] class indices (single-label) or [N, C] 0/1 (multi-label)."""

    texts: list
    labels: np.ndarray

    def __post_init__(self):
        if len(self.texts) != len(self.labels):
            raise ValueError(f"{len(self.texts)} texts but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.texts)


@dataclasses.dataclass(frozen=True)
class Split:
    """`Examples` packed: token ids and mask [N, L] and the labels."""

    token_ids: np.ndarray
    padding_mask: np.ndarray
    labels: np.ndarray

    @classmethod
    def packed(cls, examples: Examples, tokenizer, max_seq_length: int) -> "Split":
        # int32, as the training step's signature takes them.
        return cls(*pack_texts(tokenizer, examples.texts, max_seq_length), np.asarray(examples.labels, np.int32))

    def __len__(self) -> int:
        return len(self.labels)

    def rows(self, indices) -> "Split":
        return Split(self.token_ids[indices], self.padding_mask[indices], self.labels[indices])


@dataclasses.dataclass(frozen=True)
class RunResult:
    """One run: its test metrics (percent), the best validation score and the step it was
    taken before, the steps and epochs trained, and whether early stopping ended it."""

    test: dict
    best_validation: float
    best_step: int | None  # None: no validation beat 0, the final weights were scored
    steps: int
    epochs: int
    stopped_early: bool


class LinearWarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    """transformers' `get_linear_schedule_with_warmup`: the rate at update s (from 0) is
    `learning_rate * s / warmup` below `warmup`, then `learning_rate * max(0, (total - s) /
    max(1, total - warmup))`; so the first update has rate 0 when there is a warmup. (BERT's
    `training.optimizers.WarmupLinearDecay` warms up from the first update instead.) Not
    registered with Keras: a fine-tuning run's optimizer is never saved."""

    def __init__(self, learning_rate: float, num_warmup_steps: int, num_train_steps: int):
        self.learning_rate = learning_rate
        self.num_warmup_steps = num_warmup_steps
        self.num_train_steps = num_train_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warm = step / max(1, self.num_warmup_steps)
        decayed = tf.maximum(0.0, (self.num_train_steps - step) / max(1, self.num_train_steps - self.num_warmup_steps))
        return self.learning_rate * tf.where(step < self.num_warmup_steps, warm, decayed)

    def get_config(self):
        return {"learning_rate": self.learning_rate, "num_warmup_steps": self.num_warmup_steps,
                "num_train_steps": self.num_train_steps}


class ReleaseAdamW:
    """transformers' AdamW as the release builds it (run_finetune.py:230-236): betas 0.9 and 0.999,
    epsilon 1e-6 added to sqrt(v), bias corrections folded into the step size, no weight decay;
    the rate of update t (from 0) is `schedule(t)`. Each variable is updated by TensorFlow's fused
    `ResourceApplyAdam`, whose update is exactly this one (lr_t = lr * sqrt(1 - beta2^t) /
    (1 - beta1^t), var -= lr_t * m / (sqrt(v) + epsilon)): Keras' Adam computes the same in
    separate passes over every weight, and on MiniLM on CPU took about 40 % longer a step.
    """

    def __init__(self, variables, schedule, beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6):
        """Constructor.

        Args:
          variables: list of tf.Variable, the weights it updates.
          schedule: callable, update index (int64 Tensor, from 0) -> learning rate (float32).
          beta_1, beta_2, epsilon: float, Adam's constants.
        """
        self.variables = list(variables)
        self.schedule = schedule
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon
        self.first_moments = [tf.Variable(tf.zeros_like(variable), trainable=False) for variable in self.variables]
        self.second_moments = [tf.Variable(tf.zeros_like(variable), trainable=False) for variable in self.variables]
        self.iterations = tf.Variable(0, dtype=tf.int64, trainable=False)

    def apply(self, gradients) -> None:
        """One update of every variable by its gradient (in `variables` order; an embedding
        table's sparse gradient is made dense, as PyTorch's dense embedding gradient is).

        Args:
          gradients: list of Tensor or tf.IndexedSlices, one per variable, its shape.
        """
        rate = tf.cast(self.schedule(self.iterations), tf.float32)
        self.iterations.assign_add(1)
        step = tf.cast(self.iterations, tf.float32)
        beta_1_power, beta_2_power = tf.pow(self.beta_1, step), tf.pow(self.beta_2, step)
        for variable, first, second, gradient in zip(self.variables, self.first_moments, self.second_moments,
                                                     gradients):
            tf.raw_ops.ResourceApplyAdam(
                var=variable.handle, m=first.handle, v=second.handle, beta1_power=beta_1_power,
                beta2_power=beta_2_power, lr=rate, beta1=tf.constant(self.beta_1, tf.float32),
                beta2=tf.constant(self.beta_2, tf.float32), epsilon=tf.constant(self.epsilon, tf.float32),
                grad=tf.convert_to_tensor(gradient))


def release_optimizer(variables, settings: FineTuneSettings, num_train_steps: int) -> ReleaseAdamW:
    """The release's optimizer for `variables`: `ReleaseAdamW` at the rate of `LinearWarmupDecay`
    warming up over `settings.warmup_fraction` of `num_train_steps` (int(n * epochs / batch) in
    the release).

    Args:
      variables: list of tf.Variable.
      settings: FineTuneSettings (learning_rate, warmup_fraction).
      num_train_steps: int, the planned updates.

    Returns:
      ReleaseAdamW.
    """
    schedule = LinearWarmupDecay(settings.learning_rate, int(num_train_steps * settings.warmup_fraction),
                                 num_train_steps)
    return ReleaseAdamW(variables, schedule)


class _Classifier:
    """Encoder, masked mean, dropout and a linear layer (the release's two heads), its training
    step and its inference."""

    def __init__(self, encoder: TrainableEncoder, num_labels: int, multi_label: bool, settings: FineTuneSettings,
                 num_train_steps: int, seed: int):
        self.backbone = encoder.backbone
        self.multi_label = multi_label
        self.dropout = keras.layers.Dropout(settings.dropout, seed=seed)
        # BertPreTrainedModel's init_weights: N(0, initializer_range) kernel, zero bias.
        self.head = keras.layers.Dense(
            num_labels, kernel_initializer=keras.initializers.RandomNormal(
                stddev=self.backbone.bert_config.initializer_range, seed=seed))
        self.head.build((None, self.backbone.hidden_dim))
        self.variables = self.backbone.trainable_variables + self.head.trainable_variables
        self.optimizer = release_optimizer(self.variables, settings, num_train_steps)
        # One trace per function for every batch shape (batches are cut to their longest row): a
        # trace of the encoder costs seconds, and a run retraced once more without the signatures.
        ids = tf.TensorSpec([None, None], tf.int32)
        labels = tf.TensorSpec([None, num_labels] if multi_label else [None], tf.int32)
        self._train_step = tf.function(self._train, input_signature=[ids, ids, labels])
        self._logits = tf.function(self._forward, input_signature=[ids, ids])

    def _forward(self, token_ids, padding_mask, training=False):
        sequence = run_backbone(self.backbone, token_ids, padding_mask, training=training)["sequence_output"]
        # Pooled, and the head and loss computed, in float32 whatever the backbone computes in.
        sequence = tf.cast(sequence, tf.float32)
        return self.head(self.dropout(masked_mean(sequence, padding_mask), training=training))

    def _train(self, token_ids, padding_mask, labels):
        with tf.GradientTape() as tape:
            logits = self._forward(token_ids, padding_mask, training=True)
            if self.multi_label:
                # The release's BCELoss on sigmoid outputs, from the logits (the same function
                # where the sigmoid does not saturate in float32).
                loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(tf.cast(labels, tf.float32), logits))
            else:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        self.optimizer.apply(tape.gradient(loss, self.variables))
        return loss

    def train_step(self, batch: Split) -> float:
        token_ids, padding_mask = _trimmed(batch.token_ids, batch.padding_mask)
        return float(self._train_step(token_ids, padding_mask, batch.labels))

    def predict(self, split: Split) -> np.ndarray:
        """[N] class indices, or [N, C] 0/1 (sigmoid above 0.5, i.e. a positive logit)."""
        order = np.argsort(-split.padding_mask.sum(axis=1), kind="stable")
        logits = np.zeros((len(split), self.head.units), np.float32)
        for start in range(0, len(split), EVAL_BATCH_SIZE):
            rows = order[start:start + EVAL_BATCH_SIZE]
            logits[rows] = self._logits(*_trimmed(split.token_ids[rows], split.padding_mask[rows])).numpy()
        return (logits > 0).astype(np.int32) if self.multi_label else logits.argmax(axis=1)

    def score(self, split: Split) -> dict:
        """Test metrics in percent: {"acc"} or {"micro_f1", "macro_f1"}."""
        predicted = self.predict(split)
        if self.multi_label:
            micro, macro = multilabel_f1(split.labels, predicted)
            return {"micro_f1": micro, "macro_f1": macro}
        return {"acc": accuracy(split.labels, predicted)}

    def validation_score(self, split: Split) -> float:
        """The release's early-stopping metric: accuracy, or the mean of micro and macro F1."""
        scores = self.score(split)
        return scores["acc"] if not self.multi_label else (scores["micro_f1"] + scores["macro_f1"]) / 2

    def snapshot(self) -> list:
        return [variable.numpy() for variable in self.variables]

    def restore(self, values: list) -> None:
        for variable, value in zip(self.variables, values):
            variable.assign(value)


def _trimmed(token_ids, padding_mask):
    """The batch cut to its longest row: padding changes no masked mean, only the time."""
    length = max(int(padding_mask.sum(axis=1).max()), 1)
    return token_ids[:, :length], padding_mask[:, :length]


def fine_tune(make_encoder, train: Examples, validation: Examples, test: Examples, num_labels: int,
              multi_label: bool, settings: FineTuneSettings, seed: int, name: str = "run") -> RunResult:
    """One run of the release's fine-tuning (`tasks/finetune_base.py`): trains a fresh copy of
    the encoder with a linear head on `train`, validating on `validation`, and scores `test`
    with the weights of the best validation.

    Args:
      make_encoder: callable of no argument returning a `TrainableEncoder` (an
        `EncoderFactory`); called once, after seeding, so the backbone's dropout is seeded too.
      train: Examples, N training examples (N >= 1).
      validation: Examples, the examples early stopping watches (at least 1).
      test: Examples, the examples scored. Each is packed by `pack_texts` with the encoder's
        tokenizer at `settings.max_seq_length` tokens.
      num_labels: int, C, the head's outputs.
      multi_label: bool, True for a sigmoid head on [N, C] 0/1 labels (dialogue acts), False for
        a softmax one on [N] class indices (intents).
      settings: FineTuneSettings (learning rate, batch, epochs, patience, validation interval,
        warmup, dropout).
      seed: int, seeds Keras, NumPy and Python (`keras.utils.set_random_seed`): head, dropout and
        batch order; the same seed and inputs give the same result.
      name: str, how log lines name the run.

    Returns:
      RunResult: test metrics {"acc"} or {"micro_f1", "macro_f1"} (percent), the best
      validation score and its step, steps and epochs trained, whether it stopped early.

    Raises:
      ValueError: if a split is empty or `settings.max_seq_length` exceeds the encoder's positions.
    """
    if not len(train) or not len(validation) or not len(test):
        raise ValueError(f"{name}: fine-tuning needs training, validation and test examples "
                         f"({len(train)}, {len(validation)}, {len(test)})")
    keras.utils.set_random_seed(seed)
    encoder = make_encoder()
    positions = encoder.backbone.bert_config.max_position_embeddings
    if settings.max_seq_length > positions:
        raise ValueError(f"{name}: inputs of {settings.max_seq_length} tokens, but the encoder has {positions} "
                         "positions")
    train, validation, test = (Split.packed(examples, encoder.tokenizer, settings.max_seq_length)
                               for examples in (train, validation, test))
    batches_per_epoch = math.ceil(len(train) / settings.batch_size)
    num_train_steps = int(len(train) * settings.max_epochs / settings.batch_size)
    classifier = _Classifier(encoder, num_labels, multi_label, settings, num_train_steps, seed)
    validate_every = max(settings.eval_steps, batches_per_epoch)
    rng = np.random.default_rng(seed)
    best, best_step, best_weights, not_better = 0.0, None, None, 0
    step, epoch, stopped_early = 0, 0, False
    while epoch < settings.max_epochs and not stopped_early:
        order = rng.permutation(len(train))
        for start in range(0, len(train), settings.batch_size):
            if step % validate_every == 0:
                score = classifier.validation_score(validation)
                logging.debug("%s: validation %.2f before step %d (epoch %d)", name, score, step, epoch)
                if score <= best:
                    not_better += 1
                else:
                    best, best_step, best_weights, not_better = score, step, classifier.snapshot(), 0
            classifier.train_step(train.rows(order[start:start + settings.batch_size]))
            step += 1
        epoch += 1
        stopped_early = not_better > settings.patience
    if best_weights is None:
        logging.warning("%s: no validation scored above 0 in %d steps; its final weights are scored (the release "
                        "would fail here)", name, step)
    else:
        classifier.restore(best_weights)
    result = RunResult(classifier.score(test), best, best_step, step, epoch, stopped_early)
    logging.info("%s: best validation %.2f before step %s, %d steps in %d epochs%s; test %s", name, best, best_step,
                 step, epoch, " (stopped early)" if stopped_early else "",
                 ", ".join(f"{key} {value:.2f}" for key, value in result.test.items()))
    return result
