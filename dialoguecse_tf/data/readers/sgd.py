"""[sgd] Schema-Guided Dialogue (`dialogues_*.json`).

`path` is one such file, a folder, whose `dialogues_*.json` files are read in name order (SGD's
schema.json beside them is not a dialogue file), or a glob. A file is a JSON list of dialogues,
each with `dialogue_id`, `services` (a non-empty list of names, kept as `Dialogue.services`) and
a non-empty list of `turns`, each with `speaker` ("USER" or "SYSTEM", kept as is), `utterance`
and `frames`: a list of objects with a list of `actions`, each with a non-empty `act`. The
intent is the first act over the frames in order (None when there is none); other keys are
ignored. An empty utterance is skipped and counted (SGD's public release closes some dialogues
with an empty SYSTEM turn whose only act is GOODBYE). The dialogue id is SGD's own (`1_00000`:
unique within a split, not across splits). A file that is not a JSON list, or not UTF-8, always
raises; a malformed dialogue raises `DataFormatError` at the line where it starts (released
files may hold the whole list on line 1), its message naming its position in the list and its
dialogue_id, or is skipped and counted with `skip_malformed`.
"""

from __future__ import annotations

import glob
import os
import pathlib
from collections.abc import Iterator

from dialoguecse_tf.data.dialogue import Dialogue, Turn, turn_intent
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers.fields import check_services
from dialoguecse_tf.data.readers.lines import LineError, PathLike, json_list_items, malformed
from dialoguecse_tf.data.readers.reader import Reader
from dialoguecse_tf.io_utils import read_utf8

_SGD_SPEAKERS = ("USER", "SYSTEM")


def _sgd_dialogue(obj: object, index: int, source: str, line_number: int) -> tuple[Dialogue, int]:
    """The dialogue and how many empty turns it skipped."""
    # Released SGD files may hold the whole list on one line: the id and the position in the
    # list are what locate a dialogue there.
    where = f"dialogue {index}"
    if not isinstance(obj, dict):
        raise LineError("bad_dialogue", f"{where}: a dialogue must be a JSON object")
    dialogue_id = obj.get("dialogue_id")
    if not isinstance(dialogue_id, str) or not dialogue_id:
        raise LineError("bad_dialogue_id", f"{where}: dialogue_id must be a non-empty string")
    where = f"dialogue {index} ({dialogue_id[:80]!r})"
    try:
        services = check_services(obj.get("services"))
    except LineError as error:
        raise LineError(error.reason, f"{where}: {error.message}") from None
    raw_turns = obj.get("turns")
    if not isinstance(raw_turns, list) or not raw_turns:
        raise LineError("missing_turns", f"{where}: turns must be a non-empty list")
    turns = []
    for i, raw in enumerate(raw_turns, start=1):
        if not isinstance(raw, dict):
            raise LineError("bad_turn", f"{where}: turn {i} is not an object")
        speaker, text, frames = raw.get("speaker"), raw.get("utterance"), raw.get("frames")
        if speaker not in _SGD_SPEAKERS:
            raise LineError("bad_speaker", f"{where}: turn {i}: speaker must be USER or SYSTEM, "
                                           f"got {str(speaker)[:40]!r}")
        if not isinstance(text, str):
            raise LineError("bad_turn", f"{where}: turn {i}: utterance must be a string")
        if not isinstance(frames, list):
            raise LineError("bad_frames", f"{where}: turn {i}: frames must be a list")
        acts = []
        for frame in frames:
            actions = frame.get("actions") if isinstance(frame, dict) else None
            if not isinstance(actions, list):
                raise LineError("bad_frames", f"{where}: turn {i}: every frame needs a list of actions")
            for action in actions:
                act = action.get("act") if isinstance(action, dict) else None
                if not isinstance(act, str) or not act:
                    raise LineError("bad_frames", f"{where}: turn {i}: every action needs a non-empty act")
                acts.append(act)
        if text.strip():
            turns.append(Turn(speaker=speaker, text=text, intent=turn_intent(acts)))
    if not turns:
        raise LineError("empty_utterance", f"{where}: every utterance is empty")
    return Dialogue(dialogue_id=dialogue_id, turns=tuple(turns), source=source, line_number=line_number,
                    services=services), len(raw_turns) - len(turns)


def _read_sgd_file(path: PathLike, skip_malformed: bool, stats: PrepStats) -> Iterator[Dialogue]:
    text = read_utf8(path)
    for index, (line_number, obj) in enumerate(json_list_items(path, text), start=1):
        try:
            dialogue, skipped = _sgd_dialogue(obj, index, str(path), line_number)
        except LineError as error:
            malformed(path, line_number, error, stats, skip_malformed)
            continue
        stats.increment("empty_turns_skipped", skipped)
        stats.increment("dialogues_read")
        yield dialogue


def read_sgd(path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None) -> Iterator[Dialogue]:
    """Reads Schema-Guided Dialogue files: one `dialogues_*.json`, every one in a folder, or the
    files a glob matches (a split's files apart, e.g. those held out for model selection).

    Args:
      path: a file, a folder or a glob.
      skip_malformed: skip (and count) a malformed dialogue instead of raising `DataFormatError`.
      stats: counts dialogues read, empty turns and malformed dialogues (a new `PrepStats` when
        None).

    Returns:
      An iterator of the files' dialogues, files in name order; FileNotFoundError when a folder
      or glob holds no file.
    """
    stats = stats if stats is not None else PrepStats()
    if os.path.isdir(path):
        files = sorted(pathlib.Path(path).glob("dialogues_*.json"))
        if not files:
            raise FileNotFoundError(f"{path}: no dialogues_*.json file in this folder")
    elif glob.has_magic(os.fspath(path)):
        files = sorted(glob.glob(os.fspath(path)))
        if not files:
            raise FileNotFoundError(f"{path}: no file matches this pattern")
    else:
        files = [path]
    for file in files:
        yield from _read_sgd_file(file, skip_malformed, stats)


# Task-oriented and complete by construction, like MDC, SGD is kept whole; its dialogues also
# serve as dial2vec's evaluation set, which must not lose any.
READER = Reader(name="sgd", read=read_sgd, min_turns=0, help="Schema-Guided Dialogue dialogues_*.json")
