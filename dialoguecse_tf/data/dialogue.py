"""The corpus-independent dialogue representation every reader produces."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable


@dataclasses.dataclass(frozen=True)
class Turn:
    """One utterance. `speaker` is an opaque label ("0"/"1", "user"/"agent", ...)."""

    speaker: str
    text: str
    intent: str | None = None


@dataclasses.dataclass(frozen=True)
class Dialogue:
    """A dialogue session, or one contrastive training sample of the authors' format.

    `response_index`, `candidates` and `candidate_labels` are set only for the authors'
    contrastive format: there a line is one response (turns[response_index]) with a fixed
    candidate list whose entry 0 is that response. `source` and `line_number` locate the
    record in its input file so later stages can report problems precisely. `services` names
    the task domains of the dialogue where the corpus annotates them (SGD's "services", e.g.
    ("Restaurants_2",)), so dialogues can later be labelled by domain; None elsewhere.
    """

    dialogue_id: str
    turns: tuple[Turn, ...]
    response_index: int | None = None
    candidates: tuple[str, ...] | None = None
    candidate_labels: tuple[int, ...] | None = None
    source: str = ""
    line_number: int = 0
    services: tuple[str, ...] | None = None


def turn_intent(act_names: Iterable[str]) -> str | None:
    """The one intent label of a turn annotated with dialogue acts: its first act, or None.

    The paper (section 5.1.1) gives MDC "11 identical intents" per domain, as MDC's release
    does (github.com/xiul-msr/e2e_dialog_challenge: 11 intents per domain): its 11 dialogue
    acts, listed in TC-Bot's src/deep_dialog/data/dia_acts.txt (github.com/MiuLab/TC-Bot):
    request, inform, confirm_question, confirm_answer, greeting, closing, multiple_choice,
    thanks, welcome, deny, not_sure. A message often carries several acts
    ("greeting() request(taxi)"); labelling it with all of them would turn every combination
    into an SR class of its own, so one act is chosen, and the first in annotation order is
    the rule that needs no ranking of acts. The readers of act-annotated corpora label turns
    with it, and merging a speaker's consecutive utterances keeps the first intent by the same
    rule.
    """
    return next(iter(act_names), None)


class DataFormatError(ValueError):
    """A corpus line that does not follow its format.

    `reason` is a short stable key (e.g. "field_count") under which skipped lines are counted.
    """

    def __init__(self, path: str | os.PathLike, line_number: int, message: str, reason: str = "malformed"):
        super().__init__(str(path), line_number, message)
        self.path = str(path)
        self.line_number = line_number
        self.message = message
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}:{self.line_number}: {self.message}"

    # The default pickling re-calls __init__ with self.args only, which would lose `reason`;
    # errors must survive being sent back from worker processes.
    def __reduce__(self):
        return (type(self), (self.path, self.line_number, self.message, self.reason))


def read_strict_lines(path, empty_message: str) -> list:
    """(1-based line number, text) of every line of a UTF-8 file, for formats with no blanks.

    A trailing "\\r" and a leading byte-order mark are dropped; invalid UTF-8 or an empty file
    raises `DataFormatError` naming the file and line.
    """
    with open(path, "rb") as f:
        raw_lines = f.read().split(b"\n")
    if raw_lines[-1] == b"":
        raw_lines.pop()
    if not raw_lines:
        raise DataFormatError(path, 1, empty_message, reason="empty_file")
    lines = []
    for line_number, raw in enumerate(raw_lines, start=1):
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataFormatError(
                path, line_number, f"invalid UTF-8 ({e.reason} at byte {e.start})", reason="invalid_utf8"
            ) from None
        if line_number == 1 and line.startswith("\ufeff"):
            line = line[1:]
        lines.append((line_number, line))
    return lines
