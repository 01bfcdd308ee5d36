"""The corpus-independent dialogue representation every reader produces."""

from __future__ import annotations

import dataclasses
import os


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
    record in its input file so later stages can report problems precisely.
    """

    dialogue_id: str
    turns: tuple[Turn, ...]
    response_index: int | None = None
    candidates: tuple[str, ...] | None = None
    candidate_labels: tuple[int, ...] | None = None
    source: str = ""
    line_number: int = 0


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
