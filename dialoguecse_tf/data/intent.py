"""Readers of the intent-classification sets DSE is evaluated on (`../shared/data/intent/`).

Three layouts, each item a `[text, label]` pair:

* a folder holding `train.json` and `test.json`, each a JSON list of items (Banking77);
* one JSON object whose `train` and `test` keys hold such lists, and for out-of-scope
  detection `oos_train` and `oos_test` (CLINC150's `data_oos_plus.json`, the "plus" variant
  with 250 out-of-scope training items that DSE's `data/process_evaluate.py` loads (l.15), or
  `data_full.json` with 100; the `val` keys are not read);
* one JSON list with no split (HWU64's `hwu64_64intents.json` or `all.json`): split here, per
  label, into the first 85 % (rounded up) for training and the rest for test.
  `split="seeded"` (the default) shuffles each label's items with `random.Random(HOLDOUT_SEED)`
  first. `split="first"` takes them in file order, as DSE's `process_evaluate.py` does
  (l.166-186); but the release reads the HWU64 CSV through a label map it does not ship, so
  the order of its items, and hence its split, is not known: no file here is in that order,
  and a file-order split would only reproduce whatever order this file's maker chose. The
  split is therefore seeded and says so, and neither reading is the paper's split.

A malformed item is an error naming the file and the item's line (or, inside a JSON object,
the key and item number). A blank text is kept, as the release keeps it (its tokenizer makes
it `[CLS] [SEP]`, `evaluate/utils/data.py:160`, `get_embeddings.py:81`), and counted in `blank_texts`,
which the evaluators report: HWU64's `all.json` has 4,898 of its 25,716 items blank, and 8 of
its 68 labels have no other item; the other sets have none.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random

from dialoguecse_tf.data.readers import json_list_items
from dialoguecse_tf.io_utils import DataFormatError, read_utf8

OOS_LABEL = "oos"
HOLDOUT_SEED = 0
TRAIN_FRACTION = 0.85
SPLITS = ("first", "seeded")


@dataclasses.dataclass(frozen=True)
class IntentDataset:
    """Labelled utterances: `train` (the support pool), `test`, and CLINC150's out-of-scope
    items (`oos_train`, `oos_test`; empty elsewhere). Items are (text, label) tuples."""

    path: str
    train: tuple
    test: tuple
    oos_train: tuple = ()
    oos_test: tuple = ()
    split: str = "given"  # "given", or how `_holdout_split` split one list
    blank_texts: int = 0

    @property
    def labels(self) -> list:
        """The training labels in order of first appearance."""
        return list(dict.fromkeys(label for _, label in self.train))


def _item(value, path: str, line_number: int, where: str) -> tuple:
    if not isinstance(value, list) or len(value) != 2 or not all(isinstance(v, str) for v in value) or not value[1].strip():
        raise DataFormatError(path, line_number, f"{where}expected a [text, label] pair of strings with a non-empty "
                              f"label, got {json.dumps(value, ensure_ascii=False)[:80]}", reason="bad_item")
    return value[0].strip(), value[1].strip()


def _blank_texts(items) -> int:
    return sum(1 for text, _ in items if not text)


def _read_list_file(path: str) -> tuple:
    return tuple(_item(value, path, line, "") for line, value in json_list_items(path, read_utf8(path),
                                                                                 "[text, label] pairs"))


def _read_object_file(path: str, text: str) -> IntentDataset:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise DataFormatError(path, error.lineno, f"invalid JSON: {error.msg}", reason="bad_json") from None
    missing = [key for key in ("train", "test") if key not in data]
    if missing:
        raise DataFormatError(path, 1, f"a JSON object of splits needs the keys 'train' and 'test'; missing {missing}",
                              reason="bad_json")
    splits = {}
    for key in ("train", "test", "oos_train", "oos_test"):
        values = data.get(key, [])
        if not isinstance(values, list):
            raise DataFormatError(path, 1, f"key {key!r} must hold a list of [text, label] pairs", reason="bad_json")
        splits[key] = tuple(_item(value, path, 1, f"{key!r} item {i}: ") for i, value in enumerate(values))
    return IntentDataset(path, **splits, blank_texts=sum(_blank_texts(items) for items in splits.values()))


def _holdout_split(path: str, items: tuple, split: str) -> IntentDataset:
    """Each label's first 85 % (rounded up) for training, taken in file order or after a seeded
    shuffle; both halves keep the items' file order across labels, as the release writes them."""
    by_label: dict[str, list] = {}
    for position, item in enumerate(items):
        by_label.setdefault(item[1], []).append(position)
    rng = random.Random(HOLDOUT_SEED)
    in_train = set()
    for positions in by_label.values():
        if split == "seeded":
            positions = list(positions)
            rng.shuffle(positions)
        in_train.update(positions[:math.ceil(TRAIN_FRACTION * len(positions))])
    train = tuple(item for position, item in enumerate(items) if position in in_train)
    test = tuple(item for position, item in enumerate(items) if position not in in_train)
    how = "in file order" if split == "first" else f"after a shuffle (seed {HOLDOUT_SEED})"
    return IntentDataset(path, train, test, split=f"first {TRAIN_FRACTION:.0%} per label {how}",
                         blank_texts=_blank_texts(items))


def read_intent_dataset(path: str, split: str = "seeded") -> IntentDataset:
    """Reads one intent set in any of the module's layouts, `split` saying how a set without a
    split is split (see the module docstring); raises `DataFormatError` on bad input."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if os.path.isdir(path):
        files = [os.path.join(path, name) for name in ("train.json", "test.json")]
        missing = [file for file in files if not os.path.isfile(file)]
        if missing:
            raise FileNotFoundError(f"intent folder {path} needs train.json and test.json; missing {missing}")
        train, test = _read_list_file(files[0]), _read_list_file(files[1])
        dataset = IntentDataset(path, train, test, blank_texts=_blank_texts(train) + _blank_texts(test))
    else:
        text = read_utf8(path)
        if text.lstrip().startswith("{"):
            dataset = _read_object_file(path, text)
        else:
            dataset = _holdout_split(path, _read_list_file(path), split)
    if not dataset.train or not dataset.test:
        raise ValueError(f"{path}: the intent set needs training and test items "
                         f"({len(dataset.train)} train, {len(dataset.test)} test)")
    return dataset
