"""Dialogue action prediction sets (DSE, section 4.2.2 and Table 5): system turns in their
dialogue history, each labelled with the system turn's dialogue acts.

DSE's release (`evaluate/run_finetune.py --TASK da`) fine-tunes on DSTC2 and GSIM "processed by
Wu et al. (2020a)", TOD-BERT's `universal_dialog_act/{dstc2,sim_joint}` folders, which are not
available here. Two layouts are read, into the same examples:

* **TOD-BERT's folder** (`train.json`, `test.json`, `labels.txt`; its `valid.json` is not read,
  as DSE draws its validation sets from the training split): each JSON file is a list of
  dialogues, each a list of turns `{"speaker": "[SYS]" | "[USR]", "raw_text": str, "label":
  [act, ...]}` (other keys ignored), and `labels.txt` lists the acts, one a line, in index order
  (TOD-BERT's `utils/utils_universal_act.py` reads exactly these).
* **An SGD folder** (`train/` and `dev/`, each of `dialogues_*.json`, SGD's own schema): the
  substitution for DSTC2 and GSIM. SGD train is the pool the few-shot training and validation
  sets are drawn from, SGD dev the set scored (SGD test is held back). A system turn's acts are
  the `act`s of all its frames' `actions` (INFORM, REQUEST, OFFER, ...; slots are not part of
  the label); the labels are the acts either split holds, in name order.

Examples are made as TOD-BERT's `read_langs_turn` (utils_universal_act.py:7-52) and its
`Dataset_dm` (dataloader_dm.py:29-77) make them: one per user turn that follows a system turn,
labelled with that system turn's acts, its text the dialogue before the system turn (each turn
after `[SYS]` or `[USR]`, by position: TOD-BERT alternates the tags from a system turn, a user
turn opening the dialogue after an empty system one; speakers must alternate, as TOD-BERT's reading by position
assumes), then `[SYS] [SEP]`, the system turn,
`[USR]` and the user turn. So the input holds the system turn whose acts are predicted and the
user's reply, and a closing system turn with no reply makes no example (SGD's closing GOODBYE
is never a label). One departure: TOD-BERT also makes an example of a dialogue's first user
turn when the user opens it, with no system turn and no act; those are left out here (every
SGD dialogue opens with the user: 12,174 such examples of train, 2,098 of dev), since they hold
no system turn whose acts could be predicted. DSTC2, whose dialogues the system opens, has none.

A malformed file raises `DataFormatError` naming the file and the line where the offending
dialogue (or label) starts, and what is wrong with it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

from dialoguecse_tf.data.readers import json_list_items
from dialoguecse_tf.io_utils import DataFormatError, read_strict_lines, read_utf8

SYS_TOKEN, USR_TOKEN, SEP_TOKEN = "[SYS]", "[USR]", "[SEP]"
LAYOUTS = ("tod_bert", "sgd")
_TOD_BERT_FILES = ("train.json", "test.json", "labels.txt")
_SGD_SPLITS = ("train", "dev")
_SGD_SPEAKERS = {"USER": USR_TOKEN, "SYSTEM": SYS_TOKEN}


@dataclasses.dataclass(frozen=True)
class ActExample:
    """One system turn in context: TOD-BERT's input string and the turn's acts (label indices,
    ascending)."""

    text: str
    acts: tuple


@dataclasses.dataclass(frozen=True)
class ActDataset:
    """A dialogue-act set: `labels` (act names, by index), the `train` pool the few-shot sets are
    drawn from and the `test` set scored (SGD: dev), tuples of `ActExample`. `layout` is one of
    `LAYOUTS`."""

    path: str
    layout: str
    labels: tuple
    train: tuple
    test: tuple
    test_split: str  # the file or folder the scored examples come from


def tod_bert_context(history, system: str, user: str) -> str:
    """TOD-BERT's input for a system turn (`Dataset_dm.get_concat_context` and
    `concat_dh_sys_usr`): the turns before it tagged `[SYS]` and `[USR]` alternately from the
    first, then `[SYS] [SEP]` and the system turn, `[USR]` and the user's reply.

    Args:
      history: sequence of str, the dialogue's turns before the system turn, the first a system
        turn (TOD-BERT puts an empty one before a dialogue the user opens).
      system: str, the system turn.
      user: str, the user turn that follows it.

    Returns:
      str, with TOD-BERT's spacing (the release splits it on whitespace).
    """
    tagged = "".join(f"{SYS_TOKEN if i % 2 == 0 else USR_TOKEN} {text} " for i, text in enumerate(history)).strip()
    return f"{tagged} {SYS_TOKEN}  {SEP_TOKEN} {system} {USR_TOKEN} {user}"


def release_input_text(text: str, max_seq_length: int) -> str:
    """The text DSE's release tokenizes for a non-TOD-BERT model (`_tokenize_multiturn_dialogue_
    concatenate` with `data_clean` and `change_usrsys_to_sep_token`, evaluate/utils/data.py:313-
    336): `[USR]` and `[SYS]` become `[SEP]`, and the last int(0.9 * max_seq_length)
    whitespace-separated words are kept, the most recent turns. The release first deletes the
    `[SEP]`s and then rebuilds the text from the raw one (l.315-317), so the `[SEP]` after a
    system tag stays: `[SYS] [SEP]` becomes `[SEP] [SEP]`. That is what is done here.

    Args:
      text: str, a `tod_bert_context` string.
      max_seq_length: int, the model's sequence length (the release's 32).

    Returns:
      str, words joined by single spaces; `[SEP]` stands for BERT's separator token.
    """
    marked = text.replace(USR_TOKEN, SEP_TOKEN).replace(SYS_TOKEN, SEP_TOKEN)
    return " ".join(marked.split()[-int(max_seq_length * 0.9):])


def turn_examples(turns, where) -> list:
    """The examples of one dialogue's turns as TOD-BERT's `read_langs_turn` makes them (but for
    the user turn opening a dialogue: see the module docstring).

    Args:
      turns: sequence of (tag, text, acts): tag `SYS_TOKEN` or `USR_TOKEN`, text str, acts a
        sequence of act names (read on system turns only).
      where: callable, (turn number from 1, message) -> the exception to raise.

    Returns:
      list of (text, acts): the `tod_bert_context` string and the system turn's distinct act
      names, in turn order.
    """
    system_first = bool(turns) and turns[0][0] == SYS_TOKEN
    history, examples = [], []
    for i, (tag, text, _) in enumerate(turns):
        # TOD-BERT reads turns by position: the user's turns are the odd ones of a dialogue the
        # system opens, the even ones of one the user opens.
        expected = USR_TOKEN if (i % 2 == 1) == system_first else SYS_TOKEN
        if tag != expected:
            raise where(i + 1, f"expected a {expected} turn (speakers must alternate), got {tag}")
        if tag != USR_TOKEN:
            continue
        system_text, system_acts = (turns[i - 1][1], turns[i - 1][2]) if i > 0 else ("", ())
        if i > 0:
            examples.append((tod_bert_context(history, system_text, text), tuple(dict.fromkeys(system_acts))))
        history += [system_text, text]
    return examples


def _indexed(examples, label_index: dict, where) -> list:
    """`ActExample`s of `turn_examples`' pairs, acts as ascending label indices."""
    result = []
    for text, acts in examples:
        unknown = [act for act in acts if act not in label_index]
        if unknown:
            raise where(0, f"acts {unknown} are not among the labels")
        result.append(ActExample(text, tuple(sorted(label_index[act] for act in acts))))
    return result


def _locator(path, line_number: int, where: str):
    """(turn number, message) -> `DataFormatError` at the dialogue's line; turn 0: the dialogue."""
    def error(turn: int, message: str) -> DataFormatError:
        return DataFormatError(path, line_number, f"{where}: " + (f"turn {turn}: " if turn else "") + message,
                               reason="bad_dialogue")
    return error


def _acts(value, fail) -> tuple:
    if not isinstance(value, list) or not all(isinstance(act, str) and act for act in value):
        raise fail("label must be a list of non-empty act names")
    return tuple(value)


def _tod_bert_turns(dialogue, fail) -> list:
    if not isinstance(dialogue, list) or not dialogue:
        raise fail(0, "a dialogue must be a non-empty list of turns")
    turns = []
    for number, turn in enumerate(dialogue, start=1):
        if not isinstance(turn, dict):
            raise fail(number, "a turn must be a JSON object")
        speaker, text = turn.get("speaker"), turn.get("raw_text")
        if speaker not in (SYS_TOKEN, USR_TOKEN):
            raise fail(number, f"speaker must be {SYS_TOKEN} or {USR_TOKEN}, got {str(speaker)[:40]!r}")
        if not isinstance(text, str):
            raise fail(number, "raw_text must be a string")
        acts = _acts(turn.get("label"), lambda message: fail(number, message)) if speaker == SYS_TOKEN else ()
        turns.append((speaker, text.strip(), acts))
    return turns


def _read_tod_bert_file(path: str, label_index: dict) -> list:
    examples = []
    for index, (line_number, dialogue) in enumerate(json_list_items(path, read_utf8(path), "dialogues"), start=1):
        fail = _locator(path, line_number, f"dialogue {index}")
        examples += _indexed(turn_examples(_tod_bert_turns(dialogue, fail), fail), label_index, fail)
    return examples


def _read_labels(path: str) -> tuple:
    labels: dict = {}
    for line_number, line in read_strict_lines(path, "no act label: labels.txt lists one act a line"):
        label = line.strip()
        if not label or label in labels:
            problem = "an empty label" if not label else f"label {label!r} again (first on line {labels[label]})"
            raise DataFormatError(path, line_number, problem, reason="bad_label")
        labels[label] = line_number
    return tuple(labels)


def _sgd_turns(dialogue, fail) -> list:
    if not isinstance(dialogue, dict) or not isinstance(dialogue.get("turns"), list) or not dialogue["turns"]:
        raise fail(0, "a dialogue must be an object with a non-empty list of turns")
    turns = []
    for number, turn in enumerate(dialogue["turns"], start=1):
        if not isinstance(turn, dict):
            raise fail(number, "a turn must be a JSON object")
        speaker, text, frames = turn.get("speaker"), turn.get("utterance"), turn.get("frames")
        if speaker not in _SGD_SPEAKERS:
            raise fail(number, f"speaker must be USER or SYSTEM, got {str(speaker)[:40]!r}")
        if not isinstance(text, str):
            raise fail(number, "utterance must be a string")
        if not isinstance(frames, list) or not all(isinstance(frame, dict) and isinstance(frame.get("actions"), list)
                                                   for frame in frames):
            raise fail(number, "frames must be a list of objects, each with a list of actions")
        actions = [action for frame in frames for action in frame["actions"]]
        if not all(isinstance(action, dict) and isinstance(action.get("act"), str) and action["act"]
                   for action in actions):
            raise fail(number, "every action needs a non-empty act")
        turns.append((_SGD_SPEAKERS[speaker], text.strip(), tuple(action["act"] for action in actions)))
    return turns


def _sgd_split(folder: str) -> list:
    """[(its error locator, its turns)] of every dialogue of a split folder, checked."""
    files = sorted(pathlib.Path(folder).glob("dialogues_*.json"))
    if not files:
        raise FileNotFoundError(f"{folder}: no dialogues_*.json file in this folder")
    dialogues = []
    for file in files:
        for index, (line_number, dialogue) in enumerate(json_list_items(file, read_utf8(file)), start=1):
            dialogue_id = dialogue.get("dialogue_id") if isinstance(dialogue, dict) else None
            where = f"dialogue {index}" + (f" ({str(dialogue_id)[:80]!r})" if dialogue_id else "")
            fail = _locator(str(file), line_number, where)
            dialogues.append((fail, _sgd_turns(dialogue, fail)))
    return dialogues


def _read_sgd(path: str) -> ActDataset:
    # The labels are the acts the examples hold: SGD's closing GOODBYE, on system turns no user
    # turn follows, is none of them.
    pairs = {split: [(fail, turn_examples(turns, fail)) for fail, turns in _sgd_split(os.path.join(path, split))]
             for split in _SGD_SPLITS}
    labels = tuple(sorted({act for dialogues in pairs.values() for _, examples in dialogues
                           for _, acts in examples for act in acts}))
    index = {label: i for i, label in enumerate(labels)}
    examples = {split: tuple(example for fail, pairs_of_dialogue in dialogues
                             for example in _indexed(pairs_of_dialogue, index, fail))
                for split, dialogues in pairs.items()}
    return ActDataset(path, "sgd", labels, examples["train"], examples["dev"], scored_split(path))


def _read_tod_bert(path: str) -> ActDataset:
    labels = _read_labels(os.path.join(path, "labels.txt"))
    index = {label: i for i, label in enumerate(labels)}
    train, test = (tuple(_read_tod_bert_file(os.path.join(path, name), index)) for name in ("train.json", "test.json"))
    return ActDataset(path, "tod_bert", labels, train, test, scored_split(path))


def layout_of(path: str) -> str:
    """Which of `LAYOUTS` the folder `path` holds; ValueError naming what each needs otherwise."""
    if os.path.isdir(path):
        if all(os.path.isfile(os.path.join(path, name)) for name in _TOD_BERT_FILES):
            return "tod_bert"
        if all(os.path.isdir(os.path.join(path, split)) for split in _SGD_SPLITS):
            return "sgd"
    raise ValueError(f"{path}: a dialogue-act set is a folder holding {', '.join(_TOD_BERT_FILES)} (TOD-BERT's "
                     f"universal_dialog_act layout) or an SGD folder with {' and '.join(_SGD_SPLITS)}/ subfolders")


def scored_split(path: str) -> str:
    """The file or folder of the folder `path` whose examples are scored (SGD: `dev/`, TOD-BERT's
    layout: `test.json`); the rest of what it reads is the pool training sets are drawn from.

    Args:
      path: str, a folder of either layout.

    Returns:
      str path.
    """
    return os.path.join(path, "test.json" if layout_of(path) == "tod_bert" else "dev")


def dataset_files(path: str) -> list:
    """The files `read_act_dataset` reads from the folder `path`, in reading order (what a
    checksum of the set must cover: an SGD folder's own files are not its dialogues).

    Args:
      path: str, a folder of either layout.

    Returns:
      list of str paths.
    """
    if layout_of(path) == "tod_bert":
        return [os.path.join(path, name) for name in ("labels.txt", "train.json", "test.json")]
    return [str(file) for split in _SGD_SPLITS for file in sorted(pathlib.Path(path, split).glob("dialogues_*.json"))]


def read_act_dataset(path: str) -> ActDataset:
    """Reads a dialogue-act set in either layout (see the module docstring).

    Args:
      path: str, TOD-BERT's `universal_dialog_act/<set>` folder or an SGD folder.

    Returns:
      `ActDataset`; every system turn followed by a user turn is one example.

    Raises:
      DataFormatError: a malformed file, naming file, line and dialogue.
      ValueError: `path` holds neither layout, or a split gives no example.
    """
    dataset = _read_tod_bert(path) if layout_of(path) == "tod_bert" else _read_sgd(path)
    for split in ("train", "test"):
        if not getattr(dataset, split):
            raise ValueError(f"{path}: its {split} split gives no example (a system turn followed by a user turn)")
    if not any(example.acts for example in dataset.train):
        raise ValueError(f"{path}: no training example has an act, so no few-shot set can be drawn")
    return dataset
