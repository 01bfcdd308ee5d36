"""The Self-dialogue reader: the release in ../shared/data read whole against a plain reading of
its CSVs, a row checked by hand, and small files for every rule, quirk and malformed case."""

import collections
import csv
import glob
import os

import pytest

from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import READERS, read_corpus, read_self_dialogue
from dialoguecse_tf.data.readers.self_dialogue import read_blocked_workers
from dialoguecse_tf.io_utils import DataFormatError

# ---------------------------------------------------------------- the release, read whole


@pytest.fixture(scope="module")
def release(shared_data):
    root = shared_data / "self_dialogue"
    stats = PrepStats()
    return root, list(read_self_dialogue(root, stats=stats)), stats


def _plain_rows(root):
    """(topic, file, row) of every CSV row of the release, read with csv.DictReader as get_data.py reads them."""
    for path in sorted(glob.glob(str(root / "corpus" / "*" / "*.csv"))):
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                yield os.path.basename(os.path.dirname(path)), path, row


def test_release_counts(release):
    _, dialogues, stats = release
    # The data README: 24,249 rows, 63 by blocked workers; 21 rows carry a Reject note. The
    # authors' README: 24,165 conversations, one of which (movies/Batch_2814928 line 173) has
    # only "{}" answers.
    assert len(dialogues) == stats["dialogues_read"] == 24164
    assert stats["blocked_rows_skipped"] == 63
    assert stats["rejected_rows_skipped"] == 21
    assert stats["rows_without_turns_skipped"] == 1
    assert len(dialogues) + 63 + 21 + 1 == 24249
    # 1,116 "{}" answers and the two empty ones of nfl_football/Batch_2862917 line 547.
    assert stats["empty_turns_skipped"] == 1118 and stats["empty_turns_inside"] == 4
    assert stats["status_rejected_rows_kept"] == 29
    assert stats.malformed == {} and stats["blank_lines"] == 0
    assert len({d.dialogue_id for d in dialogues}) == len(dialogues)


def test_release_topics_are_the_labels(release):
    root, dialogues, _ = release
    topics = collections.Counter(d.services for d in dialogues)
    folders = sorted(os.listdir(root / "corpus"))
    assert len(folders) == 23 and sorted(topic for (topic,) in topics) == folders
    assert topics[("music",)] == 4914 and topics[("movies",)] == 4124 and topics[("icehockey",)] == 156
    for dialogue in dialogues:
        assert os.path.basename(os.path.dirname(dialogue.source)) == dialogue.services[0]


def test_release_matches_a_plain_reading_and_excludes_blocked_workers(release):
    root, dialogues, _ = release
    blocked = set((root / "blocked_workers.txt").read_text(encoding="utf-8").split())
    assert len(blocked) == 4
    expected, blocked_ids = [], set()
    for topic, _, row in _plain_rows(root):
        if row["WorkerId"] in blocked:
            blocked_ids.add(row["AssignmentId"])
            continue
        if row["Reject"]:
            continue
        n = sum(1 for key in row if key.startswith("Answer.sentence"))
        texts = [row[f"Answer.sentence{i}"] for i in range(1, n + 1)]
        texts = [text for text in texts if text not in ("{}", "")]
        if texts:
            expected.append((row["AssignmentId"], topic, texts))
    assert len(blocked_ids) == 63
    assert not blocked_ids & {d.dialogue_id for d in dialogues}
    assert [(d.dialogue_id, d.services[0], [t.text for t in d.turns]) for d in dialogues] == expected


def test_release_speakers_alternate(release):
    _, dialogues, _ = release
    for dialogue in dialogues:
        assert [t.speaker for t in dialogue.turns] == [("0", "1")[i % 2] for i in range(len(dialogue.turns))]
    lengths = collections.Counter(len(d.turns) for d in dialogues)
    # 20-sentence and 10-sentence tasks, and transition_music_movies' 2-sentence exchanges.
    assert lengths[20] == 13291 and lengths[10] == 10588 and lengths[2] == 212
    assert sum(len(d.turns) == 2 for d in dialogues if d.services == ("transition_music_movies",)) == 198


def test_release_row_checked_by_hand(release):
    root, dialogues, _ = release
    # movies/Batch_2852491_batch_results.csv, line 109 (opened in an editor): sentence 2 and
    # sentences 14-20 are "{}"; sentence 3 answers sentence 1, so it is the second speaker's.
    (dialogue,) = [d for d in dialogues if d.dialogue_id == "3Z4AIRP3C77BCEDMMT7W023CU3E1X4"]
    assert dialogue.source == str(root / "corpus" / "movies" / "Batch_2852491_batch_results.csv")
    assert dialogue.line_number == 109 and dialogue.services == ("movies",)
    assert len(dialogue.turns) == 12
    assert [(t.speaker, t.text) for t in dialogue.turns[:4]] == [
        ("0", "Have you seen the new movie Wonder Women ?"), ("1", "Is it the old version ?"),
        ("0", "No I am taking about the new remake."), ("1", "The girl who plays wonder women is gal gadot.")]
    assert (dialogue.turns[-1].speaker, dialogue.turns[-1].text) == ("1", "A young girl takes on the world to do "
                                                                          "findherself")
    # The first row of the first file in name order.
    first = dialogues[0]
    assert (first.dialogue_id, first.line_number, first.services) == ("32M8BPYGAUGBQYEU5QSY4FK37QCGIN", 2, ("action",))
    assert first.turns[0].text == "have you heard of the upcoming black panther movie?" and len(first.turns) == 10


def test_release_through_the_registry_and_one_file(release):
    root, dialogues, _ = release
    assert READERS["self_dialogue"].min_turns == 0
    path = root / "corpus" / "action" / "Batch_2840983_batch_results.csv"
    stats = PrepStats()
    one_file = list(read_corpus(path, "self_dialogue", stats=stats))
    assert one_file == dialogues[:len(one_file)] and len(one_file) == 414
    assert stats["repeated_dialogue_ids"] == 0


# ---------------------------------------------------------------- small files

# MTurk orders the answer columns as text: 1, 10, 2, 3, ..., 9.
SENTENCE_NUMBERS = sorted(range(1, 11), key=str)
HEADER = (["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "Input.filler"]
          + [f"Answer.sentence{n}" for n in SENTENCE_NUMBERS] + ["Approve", "Reject"])


def _row(assignment, worker="W1", sentences=("a1", "b2", "a3"), status="Submitted", reject=""):
    """A row of HEADER: sentences 1, 2, ... as given, the others "{}"."""
    answers = list(sentences) + ["{}"] * (10 - len(sentences))
    return ["H", assignment, worker, status, ""] + [answers[n - 1] for n in SENTENCE_NUMBERS] + ["", reject]


def _line(row) -> str:
    return ",".join('"' + field.replace('"', '""') + '"' for field in row)


def _csv_text(rows, header=HEADER, newline="\n"):
    """A CSV file's text: the header, then each row (a list of fields, or a line as it is)."""
    return newline.join(row if isinstance(row, str) else _line(row) for row in [header, *rows]) + newline


def _release(tmp_path, files, blocked=("BLOCKED",)):
    """A release folder: {"<topic>/<name>.csv": text or bytes}, and blocked_workers.txt unless None."""
    for name, content in files.items():
        path = tmp_path / "corpus" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    if blocked is not None:
        (tmp_path / "blocked_workers.txt").write_text("".join(f"{worker}\n" for worker in blocked))
    return tmp_path


def test_rows_rules_and_counts(tmp_path):
    music = _csv_text([
        _row("A1"),
        _row("A2", reject="Duplicate"),
        _row("A3", worker="BLOCKED"),
        _row("A4", sentences=("a1", "{}", " b3 ") + ("{}",) * 6 + ("a10",)),
        _row("A5", sentences=("{}", "", " {} ")),
        _row("A6", status="Rejected"),
    ])
    movies = _csv_text([_row("M1", sentences=("a1", "b2", "a3") + ("{}",) * 6 + ("x",))])
    root = _release(tmp_path, {"music/b.csv": music, "movies/a.csv": movies})
    stats = PrepStats()
    dialogues = list(read_self_dialogue(root, stats=stats))
    # Topics in name order; turns in sentence order 1, 2, ..., 10, not in the columns' order.
    assert [(d.dialogue_id, d.services, d.line_number) for d in dialogues] == [
        ("M1", ("movies",), 2), ("A1", ("music",), 2), ("A4", ("music",), 5), ("A6", ("music",), 7)]
    assert [(t.speaker, t.text) for t in dialogues[0].turns] == [("0", "a1"), ("1", "b2"), ("0", "a3"), ("1", "x")]
    # After a "{}" inside, the next sentence takes the next speaker; texts are kept as written.
    assert [(t.speaker, t.text) for t in dialogues[2].turns] == [("0", "a1"), ("1", " b3 "), ("0", "a10")]
    assert all(d.turns[0].intent is None and d.source.endswith(".csv") for d in dialogues)
    assert stats["dialogues_read"] == 4
    assert stats["rejected_rows_skipped"] == 1 and stats["blocked_rows_skipped"] == 1
    assert stats["rows_without_turns_skipped"] == 1 and stats["status_rejected_rows_kept"] == 1
    # Empty answers of M1, A1, A4, A5 (all ten) and A6; those before a written one in M1 and A4.
    assert stats["empty_turns_skipped"] == 6 + 7 + 7 + 10 + 7
    assert stats["empty_turns_inside"] == 6 + 7


def test_quoted_newlines_blank_lines_bom_and_crlf(tmp_path):
    text = _csv_text([_row("A1", sentences=("line one\nline two", "b", "c")), "", _row("A2")], newline="\r\n")
    root = _release(tmp_path, {"music/a.csv": b"\xef\xbb\xbf" + text.encode("utf-8")})
    stats = PrepStats()
    first, second = read_self_dialogue(root, stats=stats)
    assert first.turns[0].text == "line one\nline two" and first.line_number == 2
    assert second.line_number == 5 and stats["blank_lines"] == 1


def test_one_file_takes_its_folder_as_topic_and_the_release_blocked_list(tmp_path):
    root = _release(tmp_path, {"pop/a.csv": _csv_text([_row("A1"), _row("A2", worker="BLOCKED")])})
    stats = PrepStats()
    (dialogue,) = read_corpus(root / "corpus" / "pop" / "a.csv", "self_dialogue", stats=stats)
    assert dialogue.services == ("pop",) and stats["blocked_rows_skipped"] == 1


def test_without_blocked_workers_file_no_one_is_blocked(tmp_path):
    root = _release(tmp_path, {"pop/a.csv": _csv_text([_row("A1"), _row("A2", worker="BLOCKED")])}, blocked=None)
    assert [d.dialogue_id for d in read_self_dialogue(root)] == ["A1", "A2"]


def test_blocked_workers_file(tmp_path):
    path = tmp_path / "blocked_workers.txt"
    path.write_bytes(b"\xef\xbb\xbfW1\r\n\nW2")
    assert read_blocked_workers(path) == {"W1", "W2"}
    path.write_bytes(b"W1\nW\xe92\n")
    with pytest.raises(DataFormatError, match=f"{path}:2: invalid UTF-8"):
        read_blocked_workers(path)


def test_folder_without_corpus_or_csv(tmp_path):
    with pytest.raises(FileNotFoundError, match="no corpus/ folder"):
        list(read_self_dialogue(tmp_path))
    (tmp_path / "corpus" / "music").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no <topic>/\\*.csv file"):
        list(read_self_dialogue(tmp_path))


MALFORMED = [
    ("field_count", _line(_row("A2")[:-1]).encode()),
    ("bad_dialogue_id", _line(_row(" ")).encode()),
    ("invalid_utf8", _line(_row("A2", sentences=("a@1",))).encode().replace(b"@", b"\xe9")),
]


@pytest.mark.parametrize("reason, bad_line", MALFORMED, ids=[reason for reason, _ in MALFORMED])
def test_malformed_row_raises_or_is_counted(tmp_path, reason, bad_line):
    text = _csv_text([_row("A1"), "@BAD@", _row("A3")]).encode("utf-8").replace(b"@BAD@", bad_line)
    root = _release(tmp_path, {"music/a.csv": text})
    path = root / "corpus" / "music" / "a.csv"
    with pytest.raises(DataFormatError) as info:
        list(read_self_dialogue(root))
    assert str(info.value).startswith(f"{path}:3: ") and info.value.reason == reason
    stats = PrepStats()
    assert [d.dialogue_id for d in read_self_dialogue(root, skip_malformed=True, stats=stats)] == ["A1", "A3"]
    assert stats.malformed == {reason: {"count": 1, "examples": [f"{path}:3"]}}


def test_csv_error_is_located(tmp_path):
    # A field longer than the csv module's limit (131,072 characters).
    root = _release(tmp_path, {"music/a.csv": _csv_text([_row("A1"), '"' + "x" * 200_000 + '"', _row("A3")])})
    stats = PrepStats()
    assert [d.dialogue_id for d in read_self_dialogue(root, skip_malformed=True, stats=stats)] == ["A1", "A3"]
    assert stats.malformed["bad_csv"]["examples"] == [f"{root / 'corpus' / 'music' / 'a.csv'}:3"]


BAD_HEADERS = {
    "no_reject": [name for name in HEADER if name != "Reject"],
    "sentence_gap": [name for name in HEADER if name != "Answer.sentence2"],
    "no_sentence": [name for name in HEADER if not name.startswith("Answer.")],
    "repeated_column": HEADER + ["WorkerId"],
}


@pytest.mark.parametrize("case", sorted(BAD_HEADERS))
def test_bad_header_always_raises(tmp_path, case):
    root = _release(tmp_path, {"music/a.csv": "\n" + _csv_text([_row("A1")], header=BAD_HEADERS[case])})
    path = root / "corpus" / "music" / "a.csv"
    for skip in (False, True):
        with pytest.raises(DataFormatError) as info:
            list(read_self_dialogue(root, skip_malformed=skip))
        assert str(info.value).startswith(f"{path}:2: ") and info.value.reason == "bad_header"


def test_empty_file_yields_nothing(tmp_path):
    root = _release(tmp_path, {"music/a.csv": "", "music/b.csv": _csv_text([_row("B1")])})
    assert [d.dialogue_id for d in read_self_dialogue(root)] == ["B1"]
