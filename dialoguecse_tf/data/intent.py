"""Readers of the intent-classification sets DSE is evaluated on (`../shared/data/intent/`).

Three layouts, each item a `[text, label]` pair:

* a folder holding `train.json` and `test.json`, each a JSON list of items (Banking77);
* one JSON object whose `train` and `test` keys hold such lists, and for out-of-scope
  detection `oos_train` and `oos_test` (CLINC150's `data_full.json`; its `val` keys are
  not read);
* one JSON list with no split (HWU64's `all.json`): split here, per label, by shuffling the
  label's items with `random.Random(HOLDOUT_SEED)` and keeping the first 85 % (rounded up)
  for training, the rest for test. DSE's `data/process_evaluate.py` (l.149-181) also keeps
  85 % per class, but takes the first ones in file order and needs a label map it does not
  release; the seeded shuffle is ours, so our HWU64 numbers are not the paper's split.

A malformed item is an error naming the file and the item's line (or, inside a JSON object,
the key and item number). An item whose text is blank (HWU64's `all.json` has one) is skipped
and counted in `skipped_blank`, which the evaluators report.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random

from dialoguecse_tf.data.dialogue import DataFormatError
from dialoguecse_tf.data.readers import json_list_items

OOS_LABEL = "oos"
HOLDOUT_SEED = 0
TRAIN_FRACTION = 0.85


@dataclasses.dataclass(frozen=True)
class IntentDataset:
    """Labelled utterances: `train` (the support pool), `test`, and CLINC150's out-of-scope
    items (`oos_train`, `oos_test`; empty elsewhere). Items are (text, label) tuples."""

    path: str
    train: tuple
    test: tuple
    oos_train: tuple = ()
    oos_test: tuple = ()
    split: str = "given"  # "given" or "seeded 85% per label (seed 0)"
    skipped_blank: int = 0

    @property
    def labels(self) -> list:
        """The training labels in order of first appearance."""
        return list(dict.fromkeys(label for _, label in self.train))


def _decode(path: str) -> str:
    with open(path, "rb") as reader:
        raw = reader.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataFormatError(path, raw.count(b"\n", 0, error.start) + 1,
                              f"invalid UTF-8 ({error.reason} at byte {error.start})", reason="invalid_utf8") from None
    return text[1:] if text.startswith("\ufeff") else text


def _item(value, path: str, line_number: int, where: str) -> tuple | None:
    """(text, label), or None for a blank text."""
    if not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, str) for v in value) or not value[1].strip():
        raise DataFormatError(path, line_number, f"{where}expected a [text, label] pair of strings with a non-empty "
                              f"label, got {json.dumps(value, ensure_ascii=False)[:80]}", reason="bad_item")
    return (value[0].strip(), value[1].strip()) if value[0].strip() else None


def _kept(items) -> tuple[tuple, int]:
    items = list(items)
    kept = tuple(item for item in items if item is not None)
    return kept, len(items) - len(kept)


def _read_list_file(path: str) -> tuple[tuple, int]:
    return _kept(_item(value, path, line, "") for line, value in json_list_items(path, _decode(path), "[text, label] pairs"))


def _read_object_file(path: str, text: str) -> IntentDataset:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataFormatError(path, error.lineno, f"invalid JSON: {error.msg}", reason="bad_json") from None
    missing = [key for key in ("train", "test") if key not in data]
    if missing:
        raise DataFormatError(path, 1, f"a JSON object of splits needs the keys 'train' and 'test'; missing {missing}",
                              reason="bad_json")
    splits, skipped = {}, 0
    for key in ("train", "test", "oos_train", "oos_test"):
        values = data.get(key, [])
        if not isinstance(values, list):
            raise DataFormatError(path, 1, f"key {key!r} must hold a list of [text, label] pairs", reason="bad_json")
        splits[key], blank = _kept(_item(value, path, 1, f"{key!r} item {i}: ") for i, value in enumerate(values))
        skipped += blank
    return IntentDataset(path, **splits, skipped_blank=skipped)


def _holdout_split(path: str, items: tuple, skipped: int) -> IntentDataset:
    by_label: dict[str, list] = {}
    for item in items:
        by_label.setdefault(item[1], []).append(item)
    rng = random.Random(HOLDOUT_SEED)
    train, test = [], []
    for label_items in by_label.values():
        shuffled = list(label_items)
        rng.shuffle(shuffled)
        cut = math.ceil(TRAIN_FRACTION * len(shuffled))
        train.extend(shuffled[:cut])
        test.extend(shuffled[cut:])
    return IntentDataset(path, tuple(train), tuple(test), split=f"seeded {TRAIN_FRACTION:.0%} per label "
                         f"(seed {HOLDOUT_SEED})", skipped_blank=skipped)


def read_intent_dataset(path: str) -> IntentDataset:
    """Reads one intent set in any of the module's layouts; raises `DataFormatError` on bad input."""
    if os.path.isdir(path):
        files = [os.path.join(path, name) for name in ("train.json", "test.json")]
        missing = [file for file in files if not os.path.isfile(file)]
        if missing:
            raise FileNotFoundError(f"intent folder {path} needs train.json and test.json; missing {missing}")
        (train, blank_train), (test, blank_test) = _read_list_file(files[0]), _read_list_file(files[1])
        dataset = IntentDataset(path, train, test, skipped_blank=blank_train + blank_test)
    else:
        text = _decode(path)
        if text.lstrip().startswith("{"):
            dataset = _read_object_file(path, text)
        else:
            dataset = _holdout_split(path, *_read_list_file(path))
    if not dataset.train or not dataset.test:
        raise ValueError(f"{path}: the intent set needs training and test items "
                         f"({len(dataset.train)} train, {len(dataset.test)} test)")
    return dataset
