"""[mdc] Microsoft Dialogue Challenge raw TSV.

A header line whose first five columns are `session.ID, Message.ID, Message.Timestamp,
Message.From, Message.Text`, then one row per message with any number of further dialogue-act
columns such as `request(moviename;city=Seattle)`. One dialogue per session.ID, whose rows must
be contiguous; turns are ordered by the integer Message.ID (file order among equal ids). Speaker
is Message.From ("user" or "agent"); the intent is the name (text before "(") of the first
non-empty act column, or None without acts; every act column must be `name(...)`. The dialogue
id is "<file stem>-<session.ID>" (the three MDC domain files each number their sessions from 1)
and its line number is that of the session's first row. A malformed row is skipped alone; a bad
header always raises. An empty message is skipped and counted.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterator

from dialoguecse_tf.data.dialogue import Dialogue, Turn, turn_intent
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers.lines import LineError, PathLike, iter_lines, read_sessions
from dialoguecse_tf.data.readers.reader import Reader
from dialoguecse_tf.io_utils import DataFormatError

_MDC_COLUMNS = ("session.id", "message.id", "message.timestamp", "message.from", "message.text")
_DIALOGUE_ACT = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*\(.*\)\s*")


def _mdc_act_names(act_columns: list[str]) -> list[str]:
    names: list[str] = []
    for column in act_columns:
        if not column.strip():
            continue
        match = _DIALOGUE_ACT.fullmatch(column)
        if match is None:
            raise LineError("bad_dialogue_act", f"dialogue act is not 'name(...)': {column[:80]!r}")
        names.append(match.group(1))
    return names


def read_mdc_tsv(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads a Microsoft Dialogue Challenge raw TSV file (see the module docstring).

    Args:
      path: a domain file (`movie_all.tsv`, ...).
      skip_malformed: skip (and count) a malformed row instead of raising `DataFormatError`.
      stats: counts dialogues read, empty turns, blank and malformed lines (a new `PrepStats`
        when None).

    Returns:
      An iterator of one dialogue per session, with each turn's intent.
    """
    stats = stats if stats is not None else PrepStats()
    stem = pathlib.Path(path).stem

    def parse_row(line: str) -> tuple[str, int, Turn | None]:
        fields = line.split("\t")
        if len(fields) < 5:
            raise LineError("field_count", f"expected at least 5 tab-separated fields, got {len(fields)}")
        session_id, message_id, _timestamp, speaker, text = fields[:5]
        session_id = session_id.strip()
        if not session_id:
            raise LineError("bad_session_id", "empty session.ID")
        try:
            order = int(message_id)
        except ValueError:
            raise LineError("bad_message_id", f"Message.ID is not an integer: {message_id[:40]!r}") from None
        speaker = speaker.strip().lower()
        if speaker not in ("user", "agent"):
            raise LineError("bad_speaker", f"Message.From must be user or agent, got {fields[3][:40]!r}")
        intent = turn_intent(_mdc_act_names(fields[5:]))
        return session_id, order, Turn(speaker=speaker, text=text, intent=intent) if text.strip() else None

    lines = iter_lines(path, stats, skip_malformed)
    header = next(lines, None)
    if header is None:
        return
    header_line, header_text = header
    columns = tuple(c.strip().lower() for c in header_text.split("\t")[:5])
    if columns != _MDC_COLUMNS:
        raise DataFormatError(path, header_line, "MDC header must start with session.ID, Message.ID, "
                                                 "Message.Timestamp, Message.From, Message.Text",
                              reason="bad_header")
    yield from read_sessions(path, lines, stats, skip_malformed, parse_row, lambda session: f"{stem}-{session}")


# The paper (section 5.1.1) keeps MDC whole: its task-oriented dialogues are complete.
READER = Reader(name="mdc", read=read_mdc_tsv, min_turns=0, help="Microsoft Dialogue Challenge TSV")
