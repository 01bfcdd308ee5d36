"""[self_dialogue] the Self-dialogue Corpus (Fainberg et al., 2018) as its authors publish it.

The release (github.com/jfainberg/self_dialogue_corpus, BSD 3-Clause) is a folder holding
`corpus/<topic>/*.csv`, the Mechanical Turk batch results of each topic's task, and
`blocked_workers.txt`, one WorkerId a line. `path` is that folder (every topic folder of
`corpus/` and every `.csv` in it, both in name order) or one of its CSV files (its topic is its
folder's name, its blocked workers those of the release's `blocked_workers.txt`, two folders
above, when that file exists).

A CSV file is comma-separated with double quotes (RFC 4180, as MTurk writes it), UTF-8, its
first non-blank row a header naming at least `AssignmentId`, `WorkerId`, `Reject` and the answer
columns `Answer.sentence1` .. `Answer.sentenceN`, numbered from 1 without a gap (N is 10 or 20 in
most batches, 2 in `transition_music_movies`, whose task was a two-sentence exchange); other
columns (`HITId`, `AssignmentStatus`, `Input.filler`, ...) are ignored. Each further row is one
dialogue: the worker wrote both sides, sentence 1, 2, 3, ... alternating between two speakers.

What the corpus's own `get_data.py` leaves out is skipped and counted, as it does:
- a row whose `Reject` field is not empty ("rejected_rows_skipped": 21 in the release, 13 of
  them "Duplicate"), and a row by a worker of `blocked_workers.txt` ("blocked_rows_skipped": 63);
  a folder without that file blocks no one, as `get_data.py` does, and says so in the log;
- an answer that is "{}", which MTurk writes for a field left empty, or empty or whitespace-only
  ("empty_turns_skipped"; "empty_turns_inside" counts those followed by a written sentence);
- a row left with no sentence ("rows_without_turns_skipped").
Rows whose `AssignmentStatus` is "Rejected" but whose `Reject` field is empty are kept, as
`get_data.py` keeps them (it tests `Reject` only) and the authors' count of 24,165 conversations
includes them; they are counted as "status_rejected_rows_kept" (29 in the release: of its 74
such rows, 44 are by blocked workers and 1 has no sentence).

A dialogue's turns are the row's remaining sentences in column order; speakers are "0" for the
first, "1" for the second, alternating by position among them, as the lines `get_data.py` writes
alternate. Where a worker left a field empty mid-dialogue the next sentence answers the one
before it (movies/Batch_2852491 line 109: sentence 1 "Have you seen the new movie Wonder Women
?", 2 "{}", 3 "Is it the old version ?", 4 "No I am taking about the new remake."), so the
position, not the column, tells whose turn it is; 3 rows of the release have such gaps. The
dialogue id is the AssignmentId, as `get_data.py --output-naming=assignment_id` names its files;
`services` is the topic, `(topic,)`, the dialogue's label; intents are None. Texts are kept as
written.

Malformed, raised as `DataFormatError` at the row's first line (or skipped and counted with
`skip_malformed`): a row with another number of fields than the header ("field_count"), an
empty AssignmentId ("bad_dialogue_id"), bytes that are not UTF-8 ("invalid_utf8"), an error of
the CSV parser, e.g. a field over its limit of 131,072 characters ("bad_csv"). A header without
the columns above, or not UTF-8, always raises ("bad_header"), as the MDC reader's does: no row
of the file can be read without it. Blank lines are skipped and counted, a byte-order mark
dropped.

Where this reader differs from `get_data.py` (none of it changes a dialogue of the release but
the empty answers): `get_data.py` keeps the last of two rows with one AssignmentId (a dict keyed
by it), this reader keeps both and `registry.read_corpus` counts the repeat (the release repeats
none); it writes an empty answer ("", 2 in the release) as an empty line, here it is skipped, as
dial2vec's `data/generate_clustering.py` drops empty texts; it compares "{}" exactly, here
surrounding whitespace is ignored; it writes a row of only "{}" as an empty file, here it is no
dialogue (1 in the release); it reads topics and files in `os.listdir` and `glob` order, here in
name order.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterator

from absl import logging

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers.lines import LineError, PathLike, malformed
from dialoguecse_tf.data.readers.reader import Reader
from dialoguecse_tf.io_utils import DataFormatError, read_utf8

BLOCKED_WORKERS_FILE = "blocked_workers.txt"
CORPUS_FOLDER = "corpus"
# What MTurk writes for an answer field the worker left empty (get_data.py's comment).
EMPTY_ANSWER = "{}"
SPEAKERS = ("0", "1")
_REQUIRED_COLUMNS = ("AssignmentId", "WorkerId", "Reject")
_SENTENCE_COLUMN = re.compile(r"Answer\.sentence([0-9]+)")
# The characters surrogateescape decoding gives undecodable bytes.
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def read_blocked_workers(path: PathLike) -> frozenset[str]:
    """The WorkerIds of a `blocked_workers.txt`.

    Args:
      path: the file, one WorkerId a line.

    Returns:
      Its non-blank lines, as written (`get_data.py` reads them with `splitlines`);
      `DataFormatError` at the line of a byte that is not UTF-8.
    """
    return frozenset(line for line in read_utf8(path).splitlines() if line.strip())


def _header(path: PathLike, line_number: int, row: list[str]) -> tuple[dict[str, int], list[int]]:
    """({required column: index}, [index of Answer.sentence1, 2, ...]) of a header row."""
    if any(_UNDECODABLE.search(name) for name in row):
        raise DataFormatError(path, line_number, "invalid UTF-8 in the header", reason="bad_header")
    if len(set(row)) != len(row):
        raise DataFormatError(path, line_number, "a column name repeats in the header", reason="bad_header")
    index = {name: i for i, name in enumerate(row)}
    missing = [name for name in _REQUIRED_COLUMNS if name not in index]
    sentences = {int(match.group(1)): i for name, i in index.items() if (match := _SENTENCE_COLUMN.fullmatch(name))}
    if missing or not sentences or sorted(sentences) != list(range(1, len(sentences) + 1)):
        raise DataFormatError(path, line_number, "header must name AssignmentId, WorkerId, Reject and "
                                                 "Answer.sentence1 .. Answer.sentenceN without a gap",
                              reason="bad_header")
    return {name: index[name] for name in _REQUIRED_COLUMNS}, [sentences[n] for n in sorted(sentences)]


def _records(text: str) -> Iterator[tuple[int, list[str] | None, str]]:
    """(first line, fields or None, CSV error) of each record of a CSV text."""
    reader = csv.reader(io.StringIO(text, newline=""))
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            yield start, None, str(error)
            continue
        yield start, row, ""


def read_self_dialogue_csv(
    path: PathLike, topic: str, blocked_workers: frozenset[str] = frozenset(), skip_malformed: bool = False,
    stats: PrepStats | None = None,
) -> Iterator[Dialogue]:
    """Reads one MTurk batch CSV of the release (see the module docstring).

    Args:
      path: the CSV file.
      topic: its topic, the label of its dialogues (`Dialogue.services`).
      blocked_workers: WorkerIds whose rows are skipped (and counted).
      skip_malformed: skip (and count) a malformed row instead of raising `DataFormatError`.
      stats: counts dialogues read, the rows and answers skipped, blank and malformed lines (a new
        `PrepStats` when None).

    Returns:
      An iterator of one dialogue per row kept, in file order.
    """
    stats = stats if stats is not None else PrepStats()
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text, undecodable = raw.decode("utf-8"), False
    except UnicodeDecodeError:
        # Decoded anyway, so that the rows holding the bad bytes alone are malformed.
        text, undecodable = raw.decode("utf-8", errors="surrogateescape"), True
    if text.startswith("\ufeff"):
        text = text[1:]
    columns = sentence_columns = None
    status_column = None
    for line_number, row, csv_error in _records(text):
        if row is not None and len(row) <= 1 and not "".join(row).strip():
            stats.increment("blank_lines")
            continue
        if columns is None:
            if row is None:
                raise DataFormatError(path, line_number, f"unreadable header: {csv_error}", reason="bad_header")
            columns, sentence_columns = _header(path, line_number, row)
            status_column = row.index("AssignmentStatus") if "AssignmentStatus" in row else None
            width = len(row)
            continue
        try:
            if row is None:
                raise LineError("bad_csv", f"CSV error: {csv_error}")
            if len(row) != width:
                raise LineError("field_count", f"expected {width} fields as in the header, got {len(row)}")
            if undecodable and any(_UNDECODABLE.search(value) for value in row):
                raise LineError("invalid_utf8", "invalid UTF-8")
            dialogue_id = row[columns["AssignmentId"]]
            if not dialogue_id.strip():
                raise LineError("bad_dialogue_id", "empty AssignmentId")
        except LineError as error:
            malformed(path, line_number, error, stats, skip_malformed)
            continue
        if row[columns["Reject"]]:
            stats.increment("rejected_rows_skipped")
            continue
        if row[columns["WorkerId"]] in blocked_workers:
            stats.increment("blocked_rows_skipped")
            continue
        answers = [row[i] for i in sentence_columns]
        written = [i for i, answer in enumerate(answers) if answer.strip() not in ("", EMPTY_ANSWER)]
        stats.increment("empty_turns_skipped", len(answers) - len(written))
        if not written:
            stats.increment("rows_without_turns_skipped")
            continue
        stats.increment("empty_turns_inside", written[-1] + 1 - len(written))
        if status_column is not None and row[status_column] == "Rejected":
            stats.increment("status_rejected_rows_kept")
        turns = tuple(Turn(speaker=SPEAKERS[position % 2], text=answers[i]) for position, i in enumerate(written))
        stats.increment("dialogues_read")
        yield Dialogue(dialogue_id=dialogue_id, turns=turns, source=str(path), line_number=line_number,
                       services=(topic,))


def read_self_dialogue(
    path: PathLike, skip_malformed: bool = False, stats: PrepStats | None = None
) -> Iterator[Dialogue]:
    """Reads the Self-dialogue Corpus release, or one of its CSV files (see the module docstring).

    Args:
      path: the release's folder (holding `corpus/` and `blocked_workers.txt`) or one CSV file of
        its `corpus/<topic>/`.
      skip_malformed: skip (and count) a malformed row instead of raising `DataFormatError`.
      stats: counts dialogues read, the rows and answers skipped, blank and malformed lines (a new
        `PrepStats` when None).

    Returns:
      An iterator of one dialogue per row kept, topics and files in name order, each labelled by
      its topic; FileNotFoundError when a folder has no `corpus/` folder or no CSV file.
    """
    stats = stats if stats is not None else PrepStats()
    path = os.fspath(path)
    if os.path.isdir(path):
        root = path
        corpus = os.path.join(root, CORPUS_FOLDER)
        if not os.path.isdir(corpus):
            raise FileNotFoundError(f"{path}: no {CORPUS_FOLDER}/ folder (the Self-dialogue release's layout: "
                                    f"{CORPUS_FOLDER}/<topic>/*.csv)")
        files = [(os.path.join(corpus, topic, name), topic) for topic in sorted(os.listdir(corpus))
                 if os.path.isdir(os.path.join(corpus, topic))
                 for name in sorted(os.listdir(os.path.join(corpus, topic))) if name.endswith(".csv")]
        if not files:
            raise FileNotFoundError(f"{corpus}: no <topic>/*.csv file")
    else:
        folder = os.path.dirname(os.path.abspath(path))
        # corpus/<topic>/file.csv: the release's folder is two above the topic's.
        root = os.path.dirname(os.path.dirname(folder))
        files = [(path, os.path.basename(folder))]
    blocked_file = os.path.join(root, BLOCKED_WORKERS_FILE)
    if os.path.isfile(blocked_file):
        blocked = read_blocked_workers(blocked_file)
    else:
        blocked = frozenset()
        if os.path.isdir(path):
            logging.warning("%s: no %s; no worker is blocked (as get_data.py does)", path, BLOCKED_WORKERS_FILE)
    for file, topic in files:
        if not topic:
            raise FileNotFoundError(f"{file}: a Self-dialogue CSV's folder names its topic; this one has none")
        yield from read_self_dialogue_csv(file, topic, blocked, skip_malformed, stats)


# get_data.py drops no dialogue by length, and the corpus's short tasks are complete as asked:
# transition_music_movies' dialogues are two sentences by design. Its dialogues also serve as
# dial2vec's evaluation sets, which must not lose any.
READER = Reader(name="self_dialogue", read=read_self_dialogue, min_turns=0,
                help="the Self-dialogue Corpus release (its folder or one corpus/<topic>/*.csv)")
