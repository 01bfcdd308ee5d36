"""A seeded train / dev / test split of a corpus by dialogue, written as three JSON Lines files.

For corpora published without a split, as dial2vec's benchmark splits its Self-dialogue set
80/10/10 (its datasets come ready-made from the authors; the code that split them is not in
their release). The rule is the Self-dialogue release's own, from the first version of its
`get_data.py` (commit f1eea73, `select_keys` with `--order random`; the authors removed the
split later that month): the dialogues of the whole corpus, not topic by topic, shuffled with
a seed, the first `N * train_percent // 100` to train, the next `N * dev_percent // 100` to dev,
the rest to test. Python 2's shuffle of a dict's keys, in an order no later run reproduces, is
here a seeded `random.Random` shuffle of the dialogues in reading order; the default seed is
that script's, 123. Each file keeps the corpus's reading order, so a split reads like the
corpus it came from.

Dialogues are written as read: no speaker merging and no turn filter, since the evaluation sets
must keep every dialogue and each training-record writer applies its own filters (dial2vec's:
two interlocutors and at least 5 turns). The files are the project's JSON Lines (`readers.jsonl`)
with each dialogue's `services`, which a Self-dialogue dialogue holds as its topic: the
dialogue evaluators read a split with `dialogue_label=service` (`evaluation/dialogue_sets.py`),
and every data-prep entry point with `--input_format=jsonl`.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import random
from collections.abc import Sequence

from absl import logging

from dialoguecse_tf.config_fields import check_values, field
from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.data.dialogue import Dialogue
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import READERS, read_corpus, write_jsonl
from dialoguecse_tf.io_utils import check_output_dir, write_json
from dialoguecse_tf.records.source import expand_input_files

SPLITS = ("train", "dev", "test")
STATS_FILE = "prep_stats.json"
LABELS_FILE = "labels.json"


@dataclasses.dataclass(frozen=True)
class SplitConfig:
    """One split of a corpus; `data_prep/split_corpus.py` generates its flags from these fields."""

    input_file: tuple[str, ...] = dataclasses.field(metadata={"help": "Corpus file, folder or glob (as its format "
                                                                      "reads it); repeat the flag for several."})
    output_dir: str = dataclasses.field(metadata={"help": "Folder for train.jsonl, dev.jsonl, test.jsonl, labels.json, "
                                                          "config.json and prep_stats.json."})
    input_format: str = field("jsonl", "The corpus's format (see data_prep/build_vocab.py --helpfull).",
                              choices=tuple(sorted(READERS)))
    skip_malformed: bool = field(False, "Skip malformed records and count them instead of stopping.")
    train_percent: int = field(80, "Share of the dialogues in train, in percent, rounded down (dial2vec: 80).",
                               minimum=1, maximum=98)
    dev_percent: int = field(10, "Share in dev, in percent, rounded down (dial2vec: 10); test takes the rest.",
                             minimum=1, maximum=98)
    random_seed: int = field(123, "Seed of the shuffle (123: the default of the Self-dialogue release's split).")
    max_eval_dialogues: int = field(0, "Keep at most this many dialogues in dev and in test each, the first of "
                                    "their part of the shuffle (a seeded sample; train is unchanged): a CPU cut for "
                                    "evaluations. 0 keeps them all.", minimum=0, added_as=0)


def check_shares(train_percent: int, dev_percent: int) -> None:
    """Raises ValueError unless both shares are positive and leave test one.

    Args:
      train_percent: train's share, in percent.
      dev_percent: dev's share, in percent.
    """
    if train_percent < 1 or dev_percent < 1 or train_percent + dev_percent > 99:
        raise ValueError(f"train_percent and dev_percent must be positive and leave test a share, got "
                         f"{train_percent} and {dev_percent}")


def split_dialogues(dialogues: Sequence[Dialogue], train_percent: int = 80, dev_percent: int = 10,
                    seed: int = 123, max_eval_dialogues: int = 0) -> dict[str, list[Dialogue]]:
    """Splits dialogues at random, whole, into train, dev and test.

    Args:
      dialogues: the corpus, in reading order.
      train_percent: train's share in percent: the first `N * train_percent // 100` of the shuffle.
      dev_percent: dev's share: the next `N * dev_percent // 100`; test takes the rest.
      seed: seed of the shuffle.
      max_eval_dialogues: > 0 keeps only the first this many of dev's and of test's part of
        the shuffle; train, and which dialogues may fall in dev or test, stay as without it.

    Returns:
      {"train": [...], "dev": [...], "test": [...]}, each in reading order; ValueError from
      `check_shares` or for a negative `max_eval_dialogues`.
    """
    check_shares(train_percent, dev_percent)
    if max_eval_dialogues < 0:
        raise ValueError(f"max_eval_dialogues must be 0 (keep all) or positive, got {max_eval_dialogues}")
    order = list(range(len(dialogues)))
    random.Random(seed).shuffle(order)
    n_train = len(order) * train_percent // 100
    n_dev = len(order) * dev_percent // 100
    cut = max_eval_dialogues or len(order)
    parts = (order[:n_train], order[n_train:n_train + n_dev][:cut], order[n_train + n_dev:][:cut])
    return {name: [dialogues[i] for i in sorted(part)] for name, part in zip(SPLITS, parts)}


def label_counts(dialogues: Sequence[Dialogue]) -> dict[str, int]:
    """{label: dialogues} with a dialogue's label its services joined by "|" ("" without any)."""
    counts = collections.Counter("|".join(dialogue.services or ()) for dialogue in dialogues)
    return dict(sorted(counts.items()))


def run_split_corpus(config: SplitConfig) -> dict[str, int]:
    """Reads a corpus and writes its seeded split (see the module docstring).

    Args:
      config: the corpus, the output folder, the shares and the seed.

    Returns:
      {split: dialogues written}. The folder gets `<split>.jsonl` for each split, `labels.json`
      ({split: {label: dialogues}}), `config.json` and `prep_stats.json` (the reader's counts and
      `<split>_dialogues`); ValueError when a split would be empty.
    """
    check_values(config)
    check_shares(config.train_percent, config.dev_percent)
    check_output_dir(config.output_dir)
    stats = PrepStats()
    dialogues = [dialogue for path in expand_input_files(config.input_file)
                 for dialogue in read_corpus(path, config.input_format, config.skip_malformed, stats)]
    splits = split_dialogues(dialogues, config.train_percent, config.dev_percent, config.random_seed,
                             config.max_eval_dialogues)
    stats.increment("cut_eval_dialogues", len(dialogues) - sum(len(part) for part in splits.values()))
    empty = [name for name, part in splits.items() if not part]
    if empty:
        raise ValueError(f"{len(dialogues)} dialogues read from {list(config.input_file)} leave {', '.join(empty)} "
                         f"empty at {config.train_percent}/{config.dev_percent}/"
                         f"{100 - config.train_percent - config.dev_percent}")
    os.makedirs(config.output_dir, exist_ok=True)
    sizes = {}
    for name, part in splits.items():
        sizes[name] = write_jsonl(part, os.path.join(config.output_dir, f"{name}.jsonl"))
        stats.increment(f"{name}_dialogues", sizes[name])
    write_json(os.path.join(config.output_dir, LABELS_FILE), {name: label_counts(part) for name, part in splits.items()})
    write_config(config, config.output_dir)
    stats.write_json(os.path.join(config.output_dir, STATS_FILE))
    logging.info("[split] %s -> %s: %s", list(config.input_file), config.output_dir, sizes)
    return sizes
