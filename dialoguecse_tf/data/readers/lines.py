"""What the line formats share: lines read as bytes and decoded one by one, malformed lines
raised or counted, one-row-per-utterance files grouped into sessions, and JSON lists decoded
item by item so that an error names its line (the package docstring states the conventions)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.io_utils import DataFormatError

PathLike = str | os.PathLike

_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")


class LineError(Exception):
    """Raised by line parsers, which do not know the path; turned into DataFormatError.

    Attributes:
      reason: the key the line is counted under in `PrepStats.malformed` (and the
        `DataFormatError`'s reason).
      message: what is wrong, without the file and line.
    """

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def _raw_lines(f) -> Iterator[bytes]:
    """The lines of a binary file without their ends: "\\n", "\\r\\n" or a lone "\\r"."""
    for raw in f:
        if raw.endswith(b"\n"):
            raw = raw[:-1]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        yield from raw.split(b"\r") if b"\r" in raw else (raw,)


def iter_lines(path: PathLike, stats: PrepStats, skip_malformed: bool) -> Iterator[tuple[int, str]]:
    """The non-blank lines of a UTF-8 file, decoded one by one.

    Args:
      path: the file.
      stats: counts "blank_lines" and, with `skip_malformed`, lines that are not UTF-8.
      skip_malformed: skip a line that is not UTF-8 (counted) instead of raising.

    Returns:
      An iterator of (1-based line number, line without its end); a byte-order mark at the
      start of the file is dropped.
    """
    with open(path, "rb") as f:
        for line_number, raw in enumerate(_raw_lines(f), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                error = LineError("invalid_utf8", f"invalid UTF-8 ({e.reason} at byte {e.start})")
                malformed(path, line_number, error, stats, skip_malformed)
                continue
            if line_number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            if not line.strip():
                stats.increment("blank_lines")
                continue
            yield line_number, line


def malformed(path: PathLike, line_number: int, error: LineError, stats: PrepStats, skip_malformed: bool) -> None:
    """Raises `error` as a `DataFormatError` at `path:line_number`, or counts it in `stats`.

    Args:
      path: the file read.
      line_number: 1-based line of the malformed record.
      error: what is wrong.
      stats: where a skipped line is counted (`PrepStats.malformed_line`).
      skip_malformed: count instead of raising.
    """
    if not skip_malformed:
        raise DataFormatError(path, line_number, error.message, reason=error.reason) from None
    stats.malformed_line(error.reason, path, line_number)


def read_lines(
    path: PathLike,
    stats: PrepStats | None,
    skip_malformed: bool,
    parse: Callable[[str, int], Dialogue | None],
) -> Iterator[Dialogue]:
    """Runs a one-line-one-record parser over a file.

    Args:
      path: the file.
      stats: counts "dialogues_read", blank and malformed lines (a new `PrepStats` when None).
      skip_malformed: skip (and count) a line whose `parse` raises `LineError`.
      parse: (line, line number) -> its dialogue, or None to skip the line.

    Returns:
      An iterator of the dialogues `parse` returned, in file order.
    """
    stats = stats if stats is not None else PrepStats()
    for line_number, line in iter_lines(path, stats, skip_malformed):
        try:
            dialogue = parse(line, line_number)
        except LineError as error:
            malformed(path, line_number, error, stats, skip_malformed)
            continue
        if dialogue is not None:
            stats.increment("dialogues_read")
            yield dialogue


def read_sessions(
    path: PathLike,
    lines: Iterator[tuple[int, str]],
    stats: PrepStats,
    skip_malformed: bool,
    parse_row: Callable[[str], tuple[str, int, Turn | None]],
    dialogue_id: Callable[[str], str],
) -> Iterator[Dialogue]:
    """Groups one-row-per-utterance lines into one dialogue per session.

    A session's rows must be contiguous; its turns are sorted by order key, file order among
    equal keys, and the dialogue's line number is that of its first row. A session whose every
    row is empty yields no dialogue.

    Args:
      path: the file, for messages and `Dialogue.source`.
      lines: (line number, line) pairs, as `iter_lines` yields them (past any header).
      stats: counts "dialogues_read", "empty_turns_skipped" and skipped malformed rows.
      skip_malformed: skip (and count) a malformed row instead of raising.
      parse_row: line -> (session id, order key, turn), or raises `LineError`; turn None is an
        empty utterance, skipped and counted.
      dialogue_id: session id -> the dialogue's id.

    Returns:
      An iterator of one dialogue per session, in file order.
    """
    source = str(path)
    finished: set[str] = set()
    session: str | None = None
    first_line = 0
    rows: list[tuple[int, int, Turn]] = []

    def dialogue() -> Dialogue:
        rows.sort(key=lambda row: (row[0], row[1]))
        stats.increment("dialogues_read")
        return Dialogue(dialogue_id=dialogue_id(session), turns=tuple(turn for _, _, turn in rows),
                        source=source, line_number=first_line)

    for line_number, line in lines:
        try:
            session_id, order, turn = parse_row(line)
            if session_id != session and session_id in finished:
                raise LineError("non_contiguous_session", f"rows of session {session_id!r} are not contiguous")
        except LineError as error:
            malformed(path, line_number, error, stats, skip_malformed)
            continue
        if session_id != session:
            if rows:
                yield dialogue()
            if session is not None:
                finished.add(session)
            session, first_line, rows = session_id, line_number, []
        if turn is None:
            stats.increment("empty_turns_skipped")
            continue
        rows.append((order, line_number, turn))
    if rows:
        yield dialogue()


def json_list_items(path: PathLike, text: str, what: str = "SGD dialogues") -> Iterator[tuple[int, object]]:
    """The items of a JSON list, each with the line where it starts.

    Decoding item by item is what lets an error in one item name its line.

    Args:
      path: the file `text` was read from, for messages.
      text: the whole file, decoded.
      what: what the list holds, for messages.

    Returns:
      An iterator of (1-based line where the item starts, decoded item). Anything that is not a
      well-formed list raises `DataFormatError` (reason "bad_json") when reached.
    """
    decoder = json.JSONDecoder()
    position, line_number = 0, 1
    # An error at the very end of a file that ends in "\n" names its last line, not the next.
    last_line = text.count("\n", 0, len(text) - 1) + 1

    def skip_whitespace():
        nonlocal position, line_number
        end = _JSON_WHITESPACE.match(text, position).end()
        line_number += text.count("\n", position, end)
        position = end

    def fail(message: str, line: int | None = None) -> DataFormatError:
        return DataFormatError(path, min(line or line_number, last_line), message, reason="bad_json")

    skip_whitespace()
    if not text.startswith("[", position):
        raise fail(f"expected a JSON list of {what}")
    position += 1
    skip_whitespace()
    if text.startswith("]", position):
        position += 1
    else:
        while True:
            try:
                value, end = decoder.raw_decode(text, position)
            except json.JSONDecodeError as e:
                raise fail(f"invalid JSON: {e.msg}", e.lineno) from None
            except RecursionError:
                raise fail("invalid JSON: nested too deeply") from None
            # The ValueError of an integer too long to convert.
            except ValueError as e:
                raise fail(f"invalid JSON: {e}") from None
            yield line_number, value
            line_number += text.count("\n", position, end)
            position = end
            skip_whitespace()
            if text.startswith("]", position):
                position += 1
                break
            if not text.startswith(",", position):
                raise fail("expected ',' or ']' after an item")
            position += 1
            skip_whitespace()
    skip_whitespace()
    if position != len(text):
        raise fail(f"unexpected text after the list of {what}")
