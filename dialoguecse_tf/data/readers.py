"""Readers that turn each supported corpus format into `Dialogue` objects.

Every reader is a generator taking `path`, `skip_malformed` and `stats` (a `PrepStats`).
Line formats (all but sgd) are read as bytes and decoded as UTF-8 line by line (a UTF-8
byte-order mark at the start of the file is ignored), so an encoding error names its line.
Lines end at "\\n", "\\r\\n" or a lone "\\r" (old Mac files), as `dialoguecse-embed` reads its
input; each counts as a line for line numbers. Blank (whitespace-only) lines
are skipped and counted as "blank_lines". A malformed line raises `DataFormatError`
("file:line: message", 1-based line numbers); with `skip_malformed=True` it is skipped instead
and counted in `stats.malformed` under its reason. Each yielded dialogue counts one
"dialogues_read". Utterance texts are kept exactly as written. An utterance that is empty or
whitespace-only is skipped and counted as "empty_turns_skipped" where the format names each
turn's speaker (mdc, jddc, sgd, jsonl: dropping the turn changes no other turn; SGD's public
release closes some dialogues with an empty SYSTEM turn whose only act is GOODBYE); a dialogue
left with no turn is malformed. Where speakers or candidates are implied by position (authors,
ecd) an empty utterance is malformed, as dropping it would reassign the turns around it.
Dialogue ids are "<file stem>-<line number>" unless stated otherwise. Intents from dialogue
acts follow `dialogue.turn_intent`: a turn's first act. `MIN_TURNS_BY_FORMAT` holds each
format's default for the min-turns filter.

Formats (`READERS` / `read_corpus` names in brackets):

[authors] the DialogueCSE authors' contrastive training format (`train_data.txt`): 6 tab-
separated fields per line: left context utterances joined by "|" (may be empty); right context
joined by "|" (may be empty); speaker roles 0/1 joined by "|"; an integer label; the candidate
responses joined by "|" (candidate 0 is the true response); one 0/1 label per candidate joined
by "|" (exactly the first is 1). The roles list has one entry per context utterance except
that the last left role, the response role and the first right role share one entry written
"a-b-c", so a line with L left and R right utterances has L + R - 1 entries, e.g. L=2, R=1:
"0|1-0-1". All lines of the authors' released sample have both contexts non-empty; for an
empty context the shared entry loses that side: "b-c" first (no left context), "a-b" last (no
right context), a lone "b" (neither). Turns are left + [candidate 0] + right with speakers
"0"/"1" from the roles; `response_index` = L.

[mdc] Microsoft Dialogue Challenge raw TSV: a header line whose first five columns are
`session.ID, Message.ID, Message.Timestamp, Message.From, Message.Text`, then one row per
message with any number of further dialogue-act columns such as `request(moviename;city=
Seattle)`. One dialogue per session.ID, whose rows must be contiguous; turns are ordered by the
integer Message.ID (file order among equal ids). Speaker is Message.From ("user" or "agent");
the intent is the name (text before "(") of the first non-empty act column, or None without
acts; every act column must be `name(...)`. The dialogue id is "<file stem>-<session.ID>"
(the three MDC domain files each number their sessions from 1) and its line number is that of
the session's first row. A malformed row is skipped alone; a bad header always raises.

[ecd] the full E-commerce Dialogue Corpus release in response-selection format: `label \\t
utt_1 \\t ... \\t utt_k \\t response` with label 0 or 1 and at least one context utterance.
Only label-1 lines become dialogues (turns utt_1..utt_k, response); label-0 lines (sampled
negative responses) are skipped and counted as "skipped_non_positive". Speakers alternate
"0"/"1" and the response is "1". Space-segmented Chinese text is kept as is.

[jddc] the JD Dialogue Corpus release's raw chat log (`chat.txt`): one utterance per line, 7
tab-separated columns `session_id, user_id, waiter_send, is_transfer, is_repeat, sku, content`.
The column order is the one the release's own readers use: JD's baseline for the JD Dialog
Challenge (github.com/SimonJYang/JDDC-Baseline-Seq2Seq; its dataProcessing.py, also copied into
github.com/EndlessLethe/jddc2019-3th-retrieve-model under code/Seq2Seq基线示例/, reads the
session id from column 0, waiter_send from column 2, the text from column 6) and the 4th-place
solution's parser (github.com/zengbin93/jddc_solution_4th, preliminary/data_pre/parser.py,
which names all 7: id, user, waiter_send, transfer, repeat, sku, content). waiter_send is "1"
for an agent (customer-service) message and "0" for the customer's: speaker "agent" or "user";
any other value is malformed. A content with tabs arrives as more than 7 fields; the extra
fields are rejoined with tabs into the text. One dialogue per session_id, whose rows must be
contiguous, turns in file order; the dialogue id is the session_id and its line number that of
the session's first row. A first line whose first field is "session_id" (a header some copies
carry) is skipped and counted as "header_lines". The release has no intent labels (intent
None); user_id, is_transfer, is_repeat and sku are not used.

[sgd] Schema-Guided Dialogue (`dialogues_*.json`): `path` is one such file or a folder, whose
`dialogues_*.json` files are read in name order (SGD's schema.json beside them is not a
dialogue file). A file is a JSON list of dialogues, each with `dialogue_id`, `services` (a
non-empty list of names, kept as `Dialogue.services`) and a non-empty list of `turns`, each
with `speaker` ("USER" or "SYSTEM", kept as is), `utterance` and `frames`: a list of objects
with a list of `actions`, each with a non-empty `act`. The intent is the first act over the
frames in order (None when there is none); other keys are ignored. The dialogue id is SGD's own
(`1_00000`: unique within a split, not across splits). A file that is not a JSON list, or not
UTF-8, always raises; a malformed dialogue raises `DataFormatError` at the line where it starts
(released files may hold the whole list on line 1), its message naming its position in the
list and its dialogue_id, or is skipped and counted with `skip_malformed`.

[jsonl] this project's generic JSON Lines format, for any other corpus. One dialogue per line,
a JSON object:
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

import glob
import itertools
import json
import os
import pathlib
import re
from collections.abc import Callable, Iterable, Iterator

from absl import logging

from dialoguecse_tf.data.dialogue import Dialogue, Turn, turn_intent
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.io_utils import DataFormatError, atomic_open

PathLike = str | os.PathLike


class _LineError(Exception):
    """Raised by line parsers, which do not know the path; turned into DataFormatError."""

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


def _iter_lines(path: PathLike, stats: PrepStats, skip_malformed: bool) -> Iterator[tuple[int, str]]:
    """Yields (1-based line number, decoded line) for every non-blank line."""
    with open(path, "rb") as f:
        for line_number, raw in enumerate(_raw_lines(f), start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                error = _LineError("invalid_utf8", f"invalid UTF-8 ({e.reason} at byte {e.start})")
                _malformed(path, line_number, error, stats, skip_malformed)
                continue
            if line_number == 1 and line.startswith("\ufeff"):
                line = line[1:]
            if not line.strip():
                stats.increment("blank_lines")
                continue
            yield line_number, line


def _malformed(path: PathLike, line_number: int, error: _LineError, stats: PrepStats, skip_malformed: bool) -> None:
    if not skip_malformed:
        raise DataFormatError(path, line_number, error.message, reason=error.reason) from None
    stats.malformed_line(error.reason, path, line_number)


def _read_lines(
    path: PathLike,
    stats: PrepStats | None,
    skip_malformed: bool,
    parse: Callable[[str, int], Dialogue | None],
) -> Iterator[Dialogue]:
    """Runs a one-line-one-record parser over a file; `parse` returns None to skip a line."""
    stats = stats if stats is not None else PrepStats()
    for line_number, line in _iter_lines(path, stats, skip_malformed):
        try:
            dialogue = parse(line, line_number)
        except _LineError as error:
            _malformed(path, line_number, error, stats, skip_malformed)
            continue
        if dialogue is not None:
            stats.increment("dialogues_read")
            yield dialogue


def _utterance(text: str, what: str) -> str:
    if not text.strip():
        raise _LineError("empty_utterance", f"empty {what}")
    return text


def _split_utterances(field: str, what: str) -> list[str]:
    if field == "":
        return []
    return [_utterance(text, f"utterance {i + 1} in {what}") for i, text in enumerate(field.split("|"))]


def _check_candidate_labels(labels: tuple[int, ...], n_candidates: int) -> tuple[int, ...]:
    if len(labels) != n_candidates:
        raise _LineError("label_count", f"{len(labels)} candidate labels for {n_candidates} candidates")
    if any(label not in (0, 1) for label in labels):
        raise _LineError("bad_label", "candidate labels must be 0 or 1")
    if labels[0] != 1 or sum(labels) != 1:
        raise _LineError("bad_label", "exactly the first candidate label must be 1")
    return labels


def _authors_roles(field: str, n_left: int, n_right: int) -> list[str]:
    entries = field.split("|")
    expected_entries = max(n_left, 1) + max(n_right, 1) - 1
    boundary = max(n_left - 1, 0)
    if len(entries) != expected_entries:
        raise _LineError("role_count", f"{len(entries)} role entries for {n_left} left and {n_right} right "
                                       f"utterances (expected {expected_entries})")
    shared = entries[boundary].split("-")
    expected_shared = 1 + (n_left > 0) + (n_right > 0)
    if len(shared) != expected_shared:
        raise _LineError("bad_roles", f"role entry {boundary + 1} is {entries[boundary]!r}; expected "
                                      f"{expected_shared} '-'-joined roles around the response")
    roles = entries[:boundary] + shared + entries[boundary + 1:]
    if any(role not in ("0", "1") for role in roles):
        raise _LineError("bad_roles", f"roles must be 0 or 1, got {field[:80]!r}")
    return roles


def read_authors_contrastive(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads the authors' contrastive training format (see the module docstring)."""
    source = str(path)
    stem = pathlib.Path(path).stem

    def parse(line: str, line_number: int) -> Dialogue:
        fields = line.split("\t")
        if len(fields) != 6:
            raise _LineError("field_count", f"expected 6 tab-separated fields, got {len(fields)}")
        left_field, right_field, roles_field, label_field, candidates_field, labels_field = fields
        left = _split_utterances(left_field, "left context")
        right = _split_utterances(right_field, "right context")
        roles = _authors_roles(roles_field, len(left), len(right))
        try:
            int(label_field)
        except ValueError:
            raise _LineError("bad_label", f"label field is not an integer: {label_field[:40]!r}") from None
        candidates = tuple(_utterance(text, f"candidate {i + 1}") for i, text in enumerate(candidates_field.split("|")))
        try:
            labels = tuple(int(label) for label in labels_field.split("|"))
        except ValueError:
            raise _LineError("bad_label", f"candidate labels are not integers: {labels_field[:80]!r}") from None
        labels = _check_candidate_labels(labels, len(candidates))
        texts = left + [candidates[0]] + right
        return Dialogue(
            dialogue_id=f"{stem}-{line_number}",
            turns=tuple(Turn(speaker=role, text=text) for role, text in zip(roles, texts)),
            response_index=len(left),
            candidates=candidates,
            candidate_labels=labels,
            source=source,
            line_number=line_number,
        )

    return _read_lines(path, stats, skip_malformed, parse)


def read_ecd_release(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads the full ECD release (response-selection format; see the module docstring)."""
    source = str(path)
    stem = pathlib.Path(path).stem
    counted = stats if stats is not None else PrepStats()

    def parse(line: str, line_number: int) -> Dialogue | None:
        fields = line.split("\t")
        if len(fields) < 3:
            raise _LineError("field_count", f"expected a label, context utterances and a response, "
                                            f"got {len(fields)} field(s)")
        label = fields[0].strip()
        if label not in ("0", "1"):
            raise _LineError("bad_label", f"label must be 0 or 1, got {fields[0][:40]!r}")
        if label == "0":
            counted.increment("skipped_non_positive")
            return None
        texts = [_utterance(text, f"utterance {i + 1}") for i, text in enumerate(fields[1:])]
        n = len(texts)
        return Dialogue(
            dialogue_id=f"{stem}-{line_number}",
            turns=tuple(Turn(speaker="1" if (n - 1 - i) % 2 == 0 else "0", text=text) for i, text in enumerate(texts)),
            source=source,
            line_number=line_number,
        )

    return _read_lines(path, counted, skip_malformed, parse)


_MDC_COLUMNS = ("session.id", "message.id", "message.timestamp", "message.from", "message.text")
_DIALOGUE_ACT = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*\(.*\)\s*")


def _mdc_act_names(act_columns: list[str]) -> list[str]:
    names: list[str] = []
    for column in act_columns:
        if not column.strip():
            continue
        match = _DIALOGUE_ACT.fullmatch(column)
        if match is None:
            raise _LineError("bad_dialogue_act", f"dialogue act is not 'name(...)': {column[:80]!r}")
        names.append(match.group(1))
    return names


def _read_sessions(
    path: PathLike,
    lines: Iterator[tuple[int, str]],
    stats: PrepStats,
    skip_malformed: bool,
    parse_row: Callable[[str], tuple[str, int, Turn | None]],
    dialogue_id: Callable[[str], str],
) -> Iterator[Dialogue]:
    """Groups one-row-per-utterance lines into one dialogue per session.

    `parse_row` returns (session id, order key, turn) or raises `_LineError`; turn None is an
    empty utterance, skipped and counted. A session's rows must be contiguous; its turns are
    sorted by order key, file order among equal keys, and the dialogue's line number is that of
    its first row. A session whose every row is empty yields no dialogue.
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
                raise _LineError("non_contiguous_session", f"rows of session {session_id!r} are not contiguous")
        except _LineError as error:
            _malformed(path, line_number, error, stats, skip_malformed)
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


def read_mdc_tsv(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads a Microsoft Dialogue Challenge raw TSV file (see the module docstring)."""
    stats = stats if stats is not None else PrepStats()
    stem = pathlib.Path(path).stem

    def parse_row(line: str) -> tuple[str, int, Turn | None]:
        fields = line.split("\t")
        if len(fields) < 5:
            raise _LineError("field_count", f"expected at least 5 tab-separated fields, got {len(fields)}")
        session_id, message_id, _timestamp, speaker, text = fields[:5]
        session_id = session_id.strip()
        if not session_id:
            raise _LineError("bad_session_id", "empty session.ID")
        try:
            order = int(message_id)
        except ValueError:
            raise _LineError("bad_message_id", f"Message.ID is not an integer: {message_id[:40]!r}") from None
        speaker = speaker.strip().lower()
        if speaker not in ("user", "agent"):
            raise _LineError("bad_speaker", f"Message.From must be user or agent, got {fields[3][:40]!r}")
        intent = turn_intent(_mdc_act_names(fields[5:]))
        return session_id, order, Turn(speaker=speaker, text=text, intent=intent) if text.strip() else None

    lines = _iter_lines(path, stats, skip_malformed)
    header = next(lines, None)
    if header is None:
        return
    header_line, header_text = header
    columns = tuple(c.strip().lower() for c in header_text.split("\t")[:5])
    if columns != _MDC_COLUMNS:
        raise DataFormatError(path, header_line, "MDC header must start with session.ID, Message.ID, "
                                                 "Message.Timestamp, Message.From, Message.Text",
                              reason="bad_header")
    yield from _read_sessions(path, lines, stats, skip_malformed, parse_row, lambda session: f"{stem}-{session}")


_JDDC_SPEAKERS = {"0": "user", "1": "agent"}


def read_jddc_chat(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads the JDDC release's raw chat log, `chat.txt` (see the module docstring)."""
    stats = stats if stats is not None else PrepStats()

    def parse_row(line: str) -> tuple[str, int, Turn | None]:
        fields = line.split("\t")
        if len(fields) < 7:
            raise _LineError("field_count", f"expected 7 tab-separated fields, got {len(fields)}")
        session_id = fields[0].strip()
        if not session_id:
            raise _LineError("bad_session_id", "empty session_id")
        speaker = _JDDC_SPEAKERS.get(fields[2].strip())
        if speaker is None:
            raise _LineError("bad_speaker", f"waiter_send must be 0 or 1, got {fields[2][:40]!r}")
        # Tabs inside the content split it into further fields; they belong to the text.
        text = "\t".join(fields[6:])
        return session_id, 0, Turn(speaker=speaker, text=text) if text.strip() else None

    lines = _iter_lines(path, stats, skip_malformed)
    first = next(lines, None)
    if first is None:
        return
    if first[1].split("\t", 1)[0].strip().lower() == "session_id":
        stats.increment("header_lines")
    else:
        lines = itertools.chain([first], lines)
    yield from _read_sessions(path, lines, stats, skip_malformed, parse_row, lambda session: session)


def _jsonl_dialogue(obj: object, default_id: str, source: str, line_number: int) -> tuple[Dialogue, int]:
    """The line's dialogue and how many empty turns it skipped."""
    if not isinstance(obj, dict):
        raise _LineError("bad_json", "a line must hold a JSON object")
    dialogue_id = obj.get("dialogue_id", default_id)
    if not isinstance(dialogue_id, str) or not dialogue_id:
        raise _LineError("bad_dialogue_id", "dialogue_id must be a non-empty string")
    services = obj.get("services")
    if services is not None:
        services = _services(services)
    raw_turns = obj.get("turns")
    if not isinstance(raw_turns, list) or not raw_turns:
        raise _LineError("missing_turns", "turns must be a non-empty list")
    turns = []
    # new_index[i]: where written turn i is after the empty turns before it are dropped.
    new_index = []
    for i, raw in enumerate(raw_turns, start=1):
        if not isinstance(raw, dict):
            raise _LineError("bad_turn", f"turn {i} is not an object")
        speaker, text, intent = raw.get("speaker"), raw.get("text"), raw.get("intent")
        if not isinstance(speaker, str) or not speaker:
            raise _LineError("bad_turn", f"turn {i}: speaker must be a non-empty string")
        if not isinstance(text, str):
            raise _LineError("bad_turn", f"turn {i}: text must be a string")
        if intent is not None and not isinstance(intent, str):
            raise _LineError("bad_turn", f"turn {i}: intent must be a string or null")
        new_index.append(len(turns))
        if text.strip():
            turns.append(Turn(speaker=speaker, text=text, intent=intent))
    if not turns:
        raise _LineError("empty_utterance", "every turn has an empty text")
    skipped = len(raw_turns) - len(turns)

    contrastive = [obj.get(key) for key in ("response_index", "candidates", "candidate_labels")]
    if all(value is None for value in contrastive):
        return Dialogue(dialogue_id=dialogue_id, turns=tuple(turns), source=source, line_number=line_number,
                        services=services), skipped
    response_index, candidates, labels = contrastive
    if any(value is None for value in contrastive):
        raise _LineError("bad_candidates", "response_index, candidates and candidate_labels come together")
    if type(response_index) is not int or not 0 <= response_index < len(raw_turns):
        raise _LineError("bad_candidates", f"response_index must index turns, got {response_index!r}")
    if not isinstance(candidates, list) or not candidates or not all(isinstance(c, str) for c in candidates):
        raise _LineError("bad_candidates", "candidates must be a non-empty list of strings")
    candidates = tuple(_utterance(c, f"candidate {i + 1}") for i, c in enumerate(candidates))
    # Checked against the turn as written: an empty response turn was dropped and fails here.
    if candidates[0] != raw_turns[response_index]["text"]:
        raise _LineError("bad_candidates", "candidates[0] must equal the text of turns[response_index]")
    if not isinstance(labels, list) or not all(type(label) is int for label in labels):
        raise _LineError("bad_label", "candidate_labels must be a list of integers")
    labels = _check_candidate_labels(tuple(labels), len(candidates))
    return Dialogue(dialogue_id=dialogue_id, turns=tuple(turns), response_index=new_index[response_index],
                    candidates=candidates, candidate_labels=labels, source=source, line_number=line_number,
                    services=services), skipped


def _services(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _LineError("bad_services", "services must be a non-empty list of non-empty strings")
    return tuple(value)


def read_jsonl(path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None) -> Iterator[Dialogue]:
    """Reads the project's generic JSON Lines format (see the module docstring)."""
    source = str(path)
    stem = pathlib.Path(path).stem
    stats = stats if stats is not None else PrepStats()

    def parse(line: str, line_number: int) -> Dialogue:
        try:
            obj = json.loads(line)
        except RecursionError:
            raise _LineError("bad_json", "invalid JSON: nested too deeply") from None
        # JSONDecodeError, and the ValueError of an integer too long to convert.
        except ValueError as e:
            raise _LineError("bad_json", f"invalid JSON: {e}") from None
        dialogue, skipped = _jsonl_dialogue(obj, f"{stem}-{line_number}", source, line_number)
        stats.increment("empty_turns_skipped", skipped)
        return dialogue

    return _read_lines(path, stats, skip_malformed, parse)


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
    """Writes dialogues in the generic JSON Lines format; returns how many were written.

    The file appears atomically (temporary file + rename), so an interrupted run never
    leaves a truncated corpus behind. `source` and `line_number` are not written: they
    describe where a dialogue was read, which the new file replaces.
    """
    count = 0
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for dialogue in dialogues:
            f.write(json.dumps(_jsonl_object(dialogue), ensure_ascii=False))
            f.write("\n")
            count += 1
    return count


_SGD_SPEAKERS = ("USER", "SYSTEM")
_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _sgd_dialogue(obj: object, index: int, source: str, line_number: int) -> tuple[Dialogue, int]:
    """The dialogue and how many empty turns it skipped."""
    # Released SGD files may hold the whole list on one line: the id and the position in the
    # list are what locate a dialogue there.
    where = f"dialogue {index}"
    if not isinstance(obj, dict):
        raise _LineError("bad_dialogue", f"{where}: a dialogue must be a JSON object")
    dialogue_id = obj.get("dialogue_id")
    if not isinstance(dialogue_id, str) or not dialogue_id:
        raise _LineError("bad_dialogue_id", f"{where}: dialogue_id must be a non-empty string")
    where = f"dialogue {index} ({dialogue_id[:80]!r})"
    try:
        services = _services(obj.get("services"))
    except _LineError as error:
        raise _LineError(error.reason, f"{where}: {error.message}") from None
    raw_turns = obj.get("turns")
    if not isinstance(raw_turns, list) or not raw_turns:
        raise _LineError("missing_turns", f"{where}: turns must be a non-empty list")
    turns = []
    for i, raw in enumerate(raw_turns, start=1):
        if not isinstance(raw, dict):
            raise _LineError("bad_turn", f"{where}: turn {i} is not an object")
        speaker, text, frames = raw.get("speaker"), raw.get("utterance"), raw.get("frames")
        if speaker not in _SGD_SPEAKERS:
            raise _LineError("bad_speaker", f"{where}: turn {i}: speaker must be USER or SYSTEM, "
                                            f"got {str(speaker)[:40]!r}")
        if not isinstance(text, str):
            raise _LineError("bad_turn", f"{where}: turn {i}: utterance must be a string")
        if not isinstance(frames, list):
            raise _LineError("bad_frames", f"{where}: turn {i}: frames must be a list")
        acts = []
        for frame in frames:
            actions = frame.get("actions") if isinstance(frame, dict) else None
            if not isinstance(actions, list):
                raise _LineError("bad_frames", f"{where}: turn {i}: every frame needs a list of actions")
            for action in actions:
                act = action.get("act") if isinstance(action, dict) else None
                if not isinstance(act, str) or not act:
                    raise _LineError("bad_frames", f"{where}: turn {i}: every action needs a non-empty act")
                acts.append(act)
        if text.strip():
            turns.append(Turn(speaker=speaker, text=text, intent=turn_intent(acts)))
    if not turns:
        raise _LineError("empty_utterance", f"{where}: every utterance is empty")
    return Dialogue(dialogue_id=dialogue_id, turns=tuple(turns), source=source, line_number=line_number,
                    services=services), len(raw_turns) - len(turns)


def json_list_items(path: PathLike, text: str, what: str = "SGD dialogues") -> Iterator[tuple[int, object]]:
    """Yields (1-based line where it starts, value) for each item of the JSON list `text`.

    Decoding item by item is what lets an error in one item name its line. Anything that
    is not a well-formed list (of `what`, for the messages) raises `DataFormatError` (reason
    "bad_json").
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


def _read_sgd_file(path: PathLike, skip_malformed: bool, stats: PrepStats) -> Iterator[Dialogue]:
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(path, raw.count(b"\n", 0, e.start) + 1, f"invalid UTF-8 ({e.reason} at byte {e.start})",
                              reason="invalid_utf8") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    for index, (line_number, obj) in enumerate(json_list_items(path, text), start=1):
        try:
            dialogue, skipped = _sgd_dialogue(obj, index, str(path), line_number)
        except _LineError as error:
            _malformed(path, line_number, error, stats, skip_malformed)
            continue
        stats.increment("empty_turns_skipped", skipped)
        stats.increment("dialogues_read")
        yield dialogue


def read_sgd(path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None) -> Iterator[Dialogue]:
    """Reads Schema-Guided Dialogue files: one `dialogues_*.json`, every one in a folder, or the
    files a glob matches (a split's files apart, e.g. those held out for model selection)."""
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


READERS: dict[str, Callable[..., Iterator[Dialogue]]] = {
    "authors": read_authors_contrastive,
    "mdc": read_mdc_tsv,
    "ecd": read_ecd_release,
    "jddc": read_jddc_chat,
    "sgd": read_sgd,
    "jsonl": read_jsonl,
}

# The paper (section 5.1.1) drops dialogues with fewer than 4 turns in JDDC and ECD ("usually
# incomplete in practice") and keeps MDC whole. The authors' format holds their ECD (and JDDC)
# training samples, so it follows those; SGD, task-oriented and complete by construction like
# MDC, is kept whole (its dialogues also serve as dial2vec's evaluation set, which must not
# lose any); the generic JSON Lines format keeps the paper's filter, as it always has.
MIN_TURNS_BY_FORMAT = {"authors": 4, "ecd": 4, "jddc": 4, "mdc": 0, "sgd": 0, "jsonl": 4}


def _check_format(input_format: str) -> None:
    if input_format not in READERS:
        raise ValueError(f"unknown input format {input_format!r}; valid formats: {', '.join(sorted(READERS))}")


def default_min_turns(input_format: str) -> int:
    """The least number of turns a dialogue of `input_format` needs by default (0 keeps all)."""
    _check_format(input_format)
    return MIN_TURNS_BY_FORMAT[input_format]


def read_corpus(
    path: PathLike, input_format: str, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads `path` with the reader registered under `input_format` in `READERS`.

    A dialogue whose id repeats an earlier one's is kept, and counted as "repeated_dialogue_ids"
    (the first repeat warned about, naming both places), as `dialoguecse-embed` does: corpora
    are read as published, and ids are labels, not keys."""
    _check_format(input_format)
    stats = stats if stats is not None else PrepStats()
    return _counting_repeated_ids(READERS[input_format](path, skip_malformed=skip_malformed, stats=stats), stats)


def _counting_repeated_ids(dialogues: Iterable[Dialogue], stats: PrepStats) -> Iterator[Dialogue]:
    first: dict = {}
    for dialogue in dialogues:
        where = f"{dialogue.source}:{dialogue.line_number}" if dialogue.line_number else str(dialogue.source)
        if dialogue.dialogue_id in first:
            if not stats["repeated_dialogue_ids"]:
                logging.warning("%s: dialogue id %r repeats the dialogue at %s; both are kept (repeated ids are "
                                "counted in the stats as repeated_dialogue_ids)", where, dialogue.dialogue_id,
                                first[dialogue.dialogue_id])
            stats.increment("repeated_dialogue_ids")
        else:
            first[dialogue.dialogue_id] = where
        yield dialogue
