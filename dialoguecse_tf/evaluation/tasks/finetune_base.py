"""What DSE's two fine-tuned evaluations share, as the authors' released
`evaluate/run_finetune.py` computes them (`--TASK seq`, intent classification, and `--TASK da`,
dialogue action prediction; their settings are `evaluate/scripts/ft.sh`'s):

* **Few-shot sets** (`few_shot_split`, the release's `_sample_few_shot_from_original_data`,
  evaluate/utils/data.py:395-451; `_generate_few_shot_data_files`, l.464-511, writes run r's
  files with seed r): Python's `random` seeded r; each label (in order of first appearance,
  an item's labels in index order) draws min(2k, n) of its n training items; items an earlier
  label drew are dropped from a later label's; of the m left, the first ceil(m / 2) train and the
  rest are that run's validation set. Both come from the training split; the test split is
  scored whole. For single-label items run r's training set is exactly the support set the
  similarity protocol of `prototypes.sample_support` draws for run r.
* **Training** (run_finetune.py:212-364): the encoder, mean-pooled over the attention mask,
  dropout, then one linear layer (evaluate/utils/model.py: `BertForSequenceClassification`, and
  `BertMultiTurnForDialogueActionPredictionConcat` with a sigmoid), every weight trained with
  AdamW (transformers', no weight decay, epsilon 1e-6: Keras' Adam computes the same update)
  at a learning rate warmed up linearly over 5 % of int(n * epochs / batch) planned steps from 0
  and decayed linearly to 0 at their end (`get_linear_schedule_with_warmup`), batches drawn
  anew each epoch. Validation runs before the update of every step that is a multiple of
  max(eval_steps, steps per epoch), step 0 included (so the untrained head is validated first);
  a score not above the best so far (which starts at 0) counts one, a better one resets the count
  and is kept; at the end of an epoch whose count exceeds the patience, training stops. The run's
  result is the test score of the weights of the best validation; the task's, the mean (and here
  also the sample std) over the runs.

Where this project departs from the release, and why:

* The test set is scored once per run, with the best validation's weights kept in memory; the
  release scores it at every improvement and keeps the last score: the same number, once.
* The batch is the script's `--per_gpu_batch_size` on one device. The release's batch is that
  times the number of GPUs (run_finetune.py:244); the paper's 16 and 32 (Appendix B.1) are two
  GPUs' worth.
* Seeds: run r draws with seed r as the release's files do, and trains with seed r too
  (`keras.utils.set_random_seed`: head initialisation, dropout, batch order); the release seeds
  its training with 24 in every run (l.255), after building the head from whatever state the
  previous runs left.
* A run whose validation never rises above 0 has no selected weights; the release then fails
  (`test_metric_with_best_valid` stays 0 and is indexed). Here its final weights are scored and
  a warning says so.

The settings are `FineTuneSettings`, in named presets: "release" (ft.sh's) and "cpu" (sized
for 2 CPU cores; each task's module says what it cuts).

The module loads without TensorFlow (suites are checked before it loads); the training loop is
`evaluation/finetune.py`.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import ClassVar

import numpy as np

from dialoguecse_tf.config_fields import check_values, field
from dialoguecse_tf.evaluation.tasks.base import Evaluator

PRESET_NAMES = ("release", "cpu")


@dataclasses.dataclass(frozen=True)
class FineTuneSettings:
    """How each run of a fine-tuned evaluation trains and validates (the module docstring)."""

    learning_rate: float = field(3e-5, "Peak learning rate (ft.sh's --bert_lr).", minimum=0.0, exclusive_minimum=True)
    batch_size: int = field(8, "Training examples per step (ft.sh's --per_gpu_batch_size).", minimum=1)
    max_epochs: int = field(50, "At most this many epochs (ft.sh's --epoch); the schedule decays to 0 over them.",
                            minimum=1)
    patience: int = field(5, "Stop at the end of an epoch once more than this many validations in a row have "
                          "not beaten the best (ft.sh's --patience).", minimum=0)
    eval_steps: int = field(10, "Validate every max(eval_steps, steps per epoch) steps (ft.sh's --eval_steps; "
                            "run_finetune.py's default 10 for intents).", minimum=1)
    warmup_fraction: float = field(0.05, "Share of the planned steps the learning rate warms up over "
                                   "(run_finetune.py:235).", minimum=0.0, maximum=1.0)
    dropout: float = field(0.1, "Dropout before the linear layer (model.py: 0.1 for intents, 0.2 for acts).",
                           minimum=0.0, maximum=0.9)
    max_seq_length: int = field(64, "Tokens per input (ft.sh's --max_seq_length).", minimum=3)
    num_runs: int = field(10, "Runs, each with its own few-shot draw (ft.sh's --num_runs); the spread needs two.",
                          minimum=2)
    max_validation_items: int | None = field(
        None, "At most this many of a run's drawn validation items, a sample seeded by the run (unset: all, as the "
        "release).", minimum=1)
    max_test_items: int | None = field(
        None, "Score at most this many test items, the same seeded sample for every run and model (unset: all, "
        "as the release).", minimum=1)

    def __post_init__(self):
        check_values(self)


def few_shot_split(label_sets, shots: int, seed: int) -> tuple[list, list]:
    """The release's few-shot training and validation sets of one run (module docstring).

    Args:
      label_sets: sequence of N sequences, each item's labels (hashable), in the item's order
        (a single label for intents; acts in label-index order for dialogue acts).
      shots: int, k >= 1: items drawn per label for training, as many again for validation.
      seed: int, the run's seed (the release's run index).

    Returns:
      (training indices, validation indices) into `label_sets`, each in drawing order (label
      by label); disjoint.

    Raises:
      ValueError: if `shots` is below 1 or no item has a label.
    """
    if shots < 1:
        raise ValueError(f"shots must be at least 1, got {shots}")
    by_label: dict = {}
    for index, labels in enumerate(label_sets):
        for label in labels:
            by_label.setdefault(label, []).append(index)
    if not by_label:
        raise ValueError("no item has a label to draw few-shot sets from")
    rng = random.Random(seed)
    drawn = {label: rng.sample(indices, min(2 * shots, len(indices))) for label, indices in by_label.items()}
    taken: set = set()
    train, validation = [], []
    for indices in drawn.values():
        kept = [index for index in indices if index not in taken]
        taken.update(kept)
        half = math.ceil(len(kept) / 2)
        train += kept[:half]
        validation += kept[half:]
    return train, validation


def seeded_subset(count: int, limit: int | None, seed: int) -> list:
    """Indices of at most `limit` of `count` items, a sample seeded by `seed`, in index order
    (all of them when `limit` is None or not below `count`)."""
    if limit is None or limit >= count:
        return list(range(count))
    return sorted(random.Random(seed).sample(range(count), limit))


def accuracy(gold, predicted) -> float:
    """Percent of [N] `predicted` class indices equal to `gold` (run_finetune.py:162)."""
    gold, predicted = np.asarray(gold), np.asarray(predicted)
    return 100.0 * float(np.mean(gold == predicted))


def multilabel_f1(gold, predicted) -> tuple[float, float]:
    """(micro F1, macro F1) in percent of [N, C] 0/1 label matrices, as the release's sklearn
    `f1_score(average="micro" | "macro", zero_division=0)` (run_finetune.py:171-172): micro over
    every (item, label) cell, macro the mean over all C labels of each one's F1, a label with no
    gold and no predicted item counting 0.

    Args:
      gold: array-like [N, C] of 0/1.
      predicted: array-like [N, C] of 0/1.

    Returns:
      (micro, macro), floats in [0, 100].
    """
    gold, predicted = np.asarray(gold, bool), np.asarray(predicted, bool)
    if gold.shape != predicted.shape or gold.ndim != 2:
        raise ValueError(f"gold and predicted must be [N, C] of one shape, got {gold.shape} and {predicted.shape}")
    true_positives = np.sum(gold & predicted, axis=0)
    errors = np.sum(gold != predicted, axis=0)  # false positives plus false negatives

    def f1(tp, wrong):
        denominator = 2 * tp + wrong
        return np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0)

    micro = float(f1(true_positives.sum(), errors.sum()))
    macro = float(np.mean(f1(true_positives, errors)))
    return 100.0 * micro, 100.0 * macro


class FineTuneEvaluator(Evaluator):
    """A fine-tuned evaluation: called with `make_encoder`, a function of no argument returning
    a fresh trainable copy of the row's encoder (`finetune.EncoderFactory`), once per run.

    Subclasses set `shots`, `presets` ({name of `PRESET_NAMES`: `FineTuneSettings`}) and
    `read_data`, and implement `run_metrics(make_encoder, shots, run)` -> {test metric: percent}
    of one run; `__call__` averages each over the runs, `metric_key(shots, name)` naming them.
    """

    input_kind = "finetune"
    option_names = ("finetune_preset",)
    shots: ClassVar[tuple]
    presets: ClassVar[dict]
    run_metric_names: ClassVar[tuple]  # what `run_metrics` returns, in table order

    @staticmethod
    def read_data(path: str, **options):
        """The task's input parsed and checked (the other options than the preset)."""
        raise NotImplementedError

    @classmethod
    def read(cls, path: str, finetune_preset: str = "release", **options):
        cls.settings_of(finetune_preset)
        return cls.read_data(path, **options)

    @classmethod
    def settings_of(cls, preset: str) -> FineTuneSettings:
        if preset not in cls.presets:
            raise ValueError(f"{cls.name}: unknown fine-tuning preset {preset!r}; known: {', '.join(cls.presets)}")
        return cls.presets[preset]

    @classmethod
    def metric_key(cls, shots: int, name: str) -> str:
        raise NotImplementedError

    def __init__(self, path: str, data=None, finetune_preset: str = "release", **options):
        super().__init__(path, data, finetune_preset=finetune_preset, **options)
        self.preset = finetune_preset
        self.settings = self.settings_of(finetune_preset)

    def record(self) -> dict:
        return {**super().record(), f"{self.task}_preset": self.preset,
                f"{self.task}_settings": dataclasses.asdict(self.settings)}

    def run_metrics(self, make_encoder, shots: int, run: int) -> dict:
        raise NotImplementedError

    def __call__(self, make_encoder) -> dict:
        metrics = {}
        for shots in self.shots:
            runs = [self.run_metrics(make_encoder, shots, run) for run in range(self.settings.num_runs)]
            for name in self.run_metric_names:
                values = [run[name] for run in runs]
                metrics[self.metric_key(shots, name)] = float(np.mean(values))
                metrics[self.metric_key(shots, name) + "_std"] = float(np.std(values, ddof=1))
        return metrics
