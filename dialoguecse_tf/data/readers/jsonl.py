"""[jsonl] this project's generic JSON Lines format, for any other corpus.

One dialogue per line, a JSON object:
    {"dialogue_id": "d1",                                  optional
     "services": ["Restaurants_2"],                        optional
     "turns": [{"speaker": "user", "text": "hi", "intent": "greet"}, ...],
     "response_index": 3,                                  optional
     "candidates": ["true response", "negative", ...],    optional
     "candidate_labels": [1, 0, ...]}                      optional
- "dialogue_id": non-empty string; default "<file stem>-<line number>".
- "services": the dialogue's task domains, a non-empty list of non-empty strings (`Dialogue.
  services`; None when absent).
- "turns": non-empty list of objects; "speaker" a non-empty string, "text" a string (a turn whose
  text is empty or whitespace-only is skipped and counted; "response_index" counts turns as
  written and is moved with them), "intent" a string or null (optional; null when absent).
- "response_index", "candidates", "candidate_labels" carry the authors' contrastive samples and
  come together or not at all: an index into "turns", a non-empty list of non-empty strings whose
  first item equals the text of turns[response_index], and one 0/1 label per candidate with
  exactly the first equal to 1.
- Other keys are ignored. Files are UTF-8; `write_jsonl` writes non-ASCII characters unescaped.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Iterable, Iterator

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers.fields import check_candidate_labels, check_services, check_utterance
from dialoguecse_tf.data.readers.lines import LineError, PathLike, read_lines
from dialoguecse_tf.data.readers.reader import Reader
from dialoguecse_tf.io_utils import atomic_open


def _jsonl_dialogue(obj: object, default_id: str, source: str, line_number: int) -> tuple[Dialogue, int]:
    """The line's dialogue and how many empty turns it skipped."""
    if not isinstance(obj, dict):
        raise LineError("bad_json", "a line must hold a JSON object")
    dialogue_id = obj.get("dialogue_id", default_id)
    if not isinstance(dialogue_id, str) or not dialogue_id:
        raise LineError("bad_dialogue_id", "dialogue_id must be a non-empty string")
    services = obj.get("services")
    if services is not None:
        services = check_services(services)
    raw_turns = obj.get("turns")
    if not isinstance(raw_turns, list) or not raw_turns:
        raise LineError("missing_turns", "turns must be a non-empty list")
    turns = []
    # new_index[i]: where written turn i is after the empty turns before it are dropped.
    new_index = []
    for i, raw in enumerate(raw_turns, start=1):
        if not isinstance(raw, dict):
            raise LineError("bad_turn", f"turn {i} is not an object")
        speaker, text, intent = raw.get("speaker"), raw.get("text"), raw.get("intent")
        if not isinstance(speaker, str) or not speaker:
            raise LineError("bad_turn", f"turn {i}: speaker must be a non-empty string")
        if not isinstance(text, str):
            raise LineError("bad_turn", f"turn {i}: text must be a string")
        if intent is not None and not isinstance(intent, str):
            raise LineError("bad_turn", f"turn {i}: intent must be a string or null")
        new_index.append(len(turns))
        if text.strip():
            turns.append(Turn(speaker=speaker, text=text, intent=intent))
    if not turns:
        raise LineError("empty_utterance", "every turn has an empty text")
    skipped = len(raw_turns) - len(turns)

    contrastive = [obj.get(key) for key in ("response_index", "candidates", "candidate_labels")]
    if all(value is None for value in contrastive):
        return Dialogue(dialogue_id=dialogue_id, turns=tuple(turns), source=source, line_number=line_number,
                        services=services), skipped
    response_index, candidates, labels = contrastive
    if any(value is None for value in contrastive):
        raise LineError("bad_candidates", "response_index, candidates and candidate_labels come together")
    if type(response_index) is not int or not 0 <= response_index < len(raw_turns):
        raise LineError("bad_candidates", f"response_index must index turns, got {response_index!r}")
    if not isinstance(candidates, list) or not candidates or not all(isinstance(c, str) for c in candidates):
        raise LineError("bad_candidates", "candidates must be a non-empty list of strings")
    candidates = tuple(check_utterance(c, f"candidate {i + 1}") for i, c in enumerate(candidates))
    # Checked against the turn as written: an empty response turn was dropped and fails here.
    if candidates[0] != raw_turns[response_index]["text"]:
        raise LineError("bad_candidates", "candidates[0] must equal the text of turns[response_index]")
    if not isinstance(labels, list) or not all(type(label) is int for label in labels):
        raise LineError("bad_label", "candidate_labels must be a list of integers")
    labels = check_candidate_labels(tuple(labels), len(candidates))
    return Dialogue(dialogue_id=dialogue_id, turns=tuple(turns), response_index=new_index[response_index],
                    candidates=candidates, candidate_labels=labels, source=source, line_number=line_number,
                    services=services), skipped


def read_jsonl(path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None) -> Iterator[Dialogue]:
    """Reads the project's generic JSON Lines format (see the module docstring).

    Args:
      path: a `.jsonl` file.
      skip_malformed: skip (and count) a malformed line instead of raising `DataFormatError`.
      stats: counts dialogues read, empty turns, blank and malformed lines (a new `PrepStats`
        when None).

    Returns:
      An iterator of one dialogue per line.
    """
    source = str(path)
    stem = pathlib.Path(path).stem
    stats = stats if stats is not None else PrepStats()

    def parse(line: str, line_number: int) -> Dialogue:
        try:
            obj = json.loads(line)
        except RecursionError:
            raise LineError("bad_json", "invalid JSON: nested too deeply") from None
        # JSONDecodeError, and the ValueError of an integer too long to convert.
        except ValueError as e:
            raise LineError("bad_json", f"invalid JSON: {e}") from None
        dialogue, skipped = _jsonl_dialogue(obj, f"{stem}-{line_number}", source, line_number)
        stats.increment("empty_turns_skipped", skipped)
        return dialogue

    return read_lines(path, stats, skip_malformed, parse)


def _jsonl_object(dialogue: Dialogue) -> dict:
    turns = []
    for turn in dialogue.turns:
        item = {"speaker": turn.speaker, "text": turn.text}
        if turn.intent is not None:
            item["intent"] = turn.intent
        turns.append(item)
    obj: dict = {"dialogue_id": dialogue.dialogue_id, "turns": turns}
    if dialogue.services is not None:
        obj["services"] = list(dialogue.services)
    if dialogue.response_index is not None:
        obj["response_index"] = dialogue.response_index
        obj["candidates"] = list(dialogue.candidates or ())
        obj["candidate_labels"] = list(dialogue.candidate_labels or ())
    return obj


def write_jsonl(dialogues: Iterable[Dialogue], path: PathLike) -> int:
    """Writes dialogues in the generic JSON Lines format.

    The file appears atomically (temporary file + rename), so an interrupted run never
    leaves a truncated corpus behind. `source` and `line_number` are not written: they
    describe where a dialogue was read, which the new file replaces.

    Args:
      dialogues: the dialogues, written in order.
      path: the file to write.

    Returns:
      How many dialogues were written.
    """
    count = 0
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for dialogue in dialogues:
            f.write(json.dumps(_jsonl_object(dialogue), ensure_ascii=False))
            f.write("\n")
            count += 1
    return count


# The paper's filter (section 5.1.1: fewer than 4 turns dropped), as this format always had.
READER = Reader(name="jsonl", read=read_jsonl, min_turns=4, help="this project's JSON Lines format (docs/usage.md)")
