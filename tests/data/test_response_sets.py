"""dialoguecse_tf/data/response_sets.py: the release's two response-selection files read and
written, and their stand-ins built from SGD dev (counts, seeds, candidates, no leakage)."""

import csv
import random

import numpy as np
import pytest

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.readers import read_sgd
from dialoguecse_tf.data.response_sets import (NUM_CANDIDATES, build_dialogue_rs_rows, build_utterance_rs_rows,
                                               context_text, read_dialogue_rs_file, read_utterance_rs_file,
                                               write_dialogue_rs_file, write_utterance_rs_file)
from dialoguecse_tf.io_utils import DataFormatError


@pytest.fixture(scope="module")
def sgd_dev(shared_data):
    return list(read_sgd(shared_data / "sgd" / "dev"))


@pytest.fixture(scope="module")
def sgd_dev_dialogue_rows(sgd_dev):
    """The dialogue-level rows and stats of all of SGD dev (seed 12345, 4 context turns)."""
    return build_dialogue_rs_rows(sgd_dev, 12345, "SYSTEM", 4)


def _adjacent_pairs(dialogues):
    return {(a.text, b.text) for d in dialogues for a, b in zip(d.turns, d.turns[1:])
            if a.speaker == "USER" and b.speaker == "SYSTEM"}


def test_utterance_rows_of_sgd_dev_are_whole_blocks_of_true_pairs_with_distinct_texts(sgd_dev):
    rows, stats = build_utterance_rs_rows(sgd_dev, 12345, "SYSTEM")
    assert stats == {"pairs": 19384, "repeated_response": 3301, "repeated_query": 2058, "rows": 14000,
                     "blocks": 140, "left_over": 25, "cut_blocks": 0}
    assert len(rows) == 14000
    # Every row is a user turn and the system turn right after it in one SGD dev dialogue.
    assert set(rows) <= _adjacent_pairs(sgd_dev)
    # No text twice: a query's 99 competitors in its block never hold its own answer's text.
    assert len({query for query, _ in rows}) == len({response for _, response in rows}) == len(rows)
    for start in range(0, len(rows), 100):
        block = rows[start:start + 100]
        assert all(response not in {other for j, (_, other) in enumerate(block) if j != i}
                   for i, (_, response) in enumerate(block))


def test_a_block_cut_keeps_the_first_blocks_of_the_whole_set(sgd_dev):
    every, _ = build_utterance_rs_rows(sgd_dev, 12345, "SYSTEM")
    rows, stats = build_utterance_rs_rows(sgd_dev, 12345, "SYSTEM", max_blocks=40)
    assert rows == every[:4000]
    assert (stats["rows"], stats["blocks"], stats["cut_blocks"], stats["left_over"]) == (4000, 40, 100, 25)
    assert build_utterance_rs_rows(sgd_dev, 12345, "SYSTEM", max_blocks=500)[0] == every
    with pytest.raises(ValueError, match="max_blocks"):
        build_utterance_rs_rows(sgd_dev, 12345, "SYSTEM", max_blocks=-1)


def test_utterance_rows_are_seeded(sgd_dev):
    first, _ = build_utterance_rs_rows(sgd_dev, 12345, "SYSTEM")
    again, _ = build_utterance_rs_rows(sgd_dev, 12345, "SYSTEM")
    other, _ = build_utterance_rs_rows(sgd_dev, 1, "SYSTEM")
    assert first == again
    assert first != other and sum(a == b for a, b in zip(first, other)) < 100


def test_dialogue_rows_of_sgd_dev_hold_the_true_next_turn_among_99_drawn_from_other_dialogues(sgd_dev,
                                                                                              sgd_dev_dialogue_rows):
    rows, stats = sgd_dev_dialogue_rows
    assert stats["dialogues"] == 2098 and stats["rows"] == len(rows) == 2088 and stats["no_target"] == 10
    assert stats["separator_responses"] == 1
    system_texts = {t.text for d in sgd_dev for t in d.turns if t.speaker == "SYSTEM"}
    with_target = [d for d in sgd_dev if any(t.speaker == "SYSTEM" for t in d.turns[4:])]
    assert len(with_target) == len(rows)
    for dialogue, (context, response, candidates) in zip(with_target, rows):
        end = next(i for i in range(4, len(dialogue.turns)) if context == context_text(dialogue, i, "SYSTEM"))
        # The context is every turn before the response and nothing after it: no leakage.
        assert dialogue.turns[end].text == response and dialogue.turns[end].speaker == "SYSTEM"
        assert len(candidates) == NUM_CANDIDATES == len(set(candidates)) and candidates.count(response) == 1
        own = {t.text for t in dialogue.turns}
        others = [text for text in candidates if text != response]
        # The 99 drawn: system turns of other dialogues, never a text of this one (its answer included).
        assert len(others) == 99 and not own & set(others) and set(others) <= system_texts
    # The true response sits anywhere among the candidates.
    positions = [candidates.index(response) for _, response, candidates in rows]
    assert min(positions) < 5 and max(positions) > 94



def test_a_dialogue_cut_draws_rows_and_candidates_from_a_seeded_sample_alone(sgd_dev, sgd_dev_dialogue_rows):
    rows, stats = build_dialogue_rs_rows(sgd_dev, 12345, "SYSTEM", 4, max_dialogues=600)
    assert (stats["dialogues"], stats["cut_dialogues"]) == (600, 1498)
    # The sample, as the docstring draws it: 600 of the corpus's indices, kept in corpus order.
    sample = [sgd_dev[i] for i in sorted(random.Random(12345).sample(range(len(sgd_dev)), 600))]
    assert [context for context, _, _ in rows] == [context for context, _, _ in
                                                    build_dialogue_rs_rows(sample, 12345, "SYSTEM", 4)[0]]
    # Its candidates are its own SYSTEM turns: far fewer texts to embed than the whole set's
    # (which is what the cut is for), where cutting the rows alone would draw nearly all of them.
    drawn = {text for _, _, candidates in rows for text in candidates}
    assert drawn <= {t.text for d in sample for t in d.turns if t.speaker == "SYSTEM"}
    every_drawn = {text for _, _, candidates in sgd_dev_dialogue_rows[0] for text in candidates}
    assert len(drawn) < len(every_drawn) / 2
    assert build_dialogue_rs_rows(sgd_dev, 1, "SYSTEM", 4, max_dialogues=600)[0] != rows
    assert build_dialogue_rs_rows(sgd_dev, 12345, "SYSTEM", 4, max_dialogues=5000)[1]["cut_dialogues"] == 0
    with pytest.raises(ValueError, match="max_dialogues"):
        build_dialogue_rs_rows(sgd_dev, 12345, "SYSTEM", 4, max_dialogues=-1)

def test_dialogue_rows_are_seeded(sgd_dev):
    first, _ = build_dialogue_rs_rows(sgd_dev[:300], 7, "SYSTEM", 4)
    assert build_dialogue_rs_rows(sgd_dev[:300], 7, "SYSTEM", 4)[0] == first
    assert build_dialogue_rs_rows(sgd_dev[:300], 8, "SYSTEM", 4)[0] != first


def test_context_text_is_the_release_reading_of_parlai_dstc7_text():
    dialogue = Dialogue("d", (Turn("USER", "hi there"), Turn("SYSTEM", "how can I\nhelp?"), Turn("USER", "a car"),
                              Turn("SYSTEM", "where?")))
    # ParlAI: "participant 1: hi there\nparticipant 2: how can I\nhelp?\n..."; its dump escapes each
    # line break and process_evaluate.py makes it a space.
    assert context_text(dialogue, 3, "SYSTEM") == "participant 1: hi there participant 2: how can I help? " \
                                                  "participant 1: a car "


def test_dialogue_rows_skip_short_dialogues_and_refuse_a_too_small_pool():
    dialogues = [Dialogue(f"d{i}", tuple(Turn("USER" if j % 2 == 0 else "SYSTEM", f"turn {j} of {i}")
                                         for j in range(6))) for i in range(40)]
    short = Dialogue("short", (Turn("USER", "a"), Turn("SYSTEM", "b")))
    rows, stats = build_dialogue_rs_rows(dialogues + [short], 0, "SYSTEM", 3)
    assert stats["rows"] == 40 and stats["no_target"] == 1
    with pytest.raises(ValueError, match="fewer than 99 distinct SYSTEM responses"):
        build_dialogue_rs_rows(dialogues[:10], 0, "SYSTEM", 3)
    with pytest.raises(ValueError, match="min_context_turns"):
        build_dialogue_rs_rows(dialogues, 0, "SYSTEM", 0)


def test_files_round_trip_through_the_release_csv_dialect(tmp_path):
    rows = [(f'query "{i}"\twith a tab', f"answer {i}") for i in range(150)]
    write_utterance_rs_file(rows, tmp_path / "u.txt")
    read = read_utterance_rs_file(tmp_path / "u.txt")
    assert list(zip(read.queries, read.responses)) == rows and read.scored_rows == 100 and read.blank_texts == 0
    # As the release reads it: csv.reader(f, delimiter="\t").
    with open(tmp_path / "u.txt", encoding="utf-8", newline="") as f:
        assert [tuple(record) for record in csv.reader(f, delimiter="\t")] == rows
    dialogue_rows = [("participant 1: hi ", "yes", tuple(["yes"] + [f"no {j}" for j in range(99)]))]
    write_dialogue_rs_file(dialogue_rows, tmp_path / "d.txt")
    read = read_dialogue_rs_file(tmp_path / "d.txt")
    assert (read.contexts, read.responses, read.candidates) == (("participant 1: hi ",), ("yes",),
                                                               (dialogue_rows[0][2],))
    assert read.responses_among_candidates == 1
    with pytest.raises(ValueError, match="row 0"):
        write_dialogue_rs_file([("c", "r", ("a|b",) * 100)], tmp_path / "bad.txt")


def test_a_file_as_the_release_writes_it_is_read_blank_texts_filled(tmp_path):
    # process_evaluate.py: csv.writer(f, delimiter="\t") with its default "\r\n" line ends.
    path = tmp_path / "test.txt"
    with open(path, "w", encoding="utf-8", newline="") as f:
        csv.writer(f, delimiter="\t").writerows([(f"q{i}", "" if i == 3 else f"a{i}") for i in range(100)])
    read = read_utterance_rs_file(path)
    assert read.responses[3] == "." and read.blank_texts == 1 and read.queries[99] == "q99"


def _lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize("bad_line, message", [
    ("one field only", "expected 2 tab-separated fields (query, response), found 1"),
    ("a\tb\tc", "expected 2 tab-separated fields (query, response), found 3"),
    ("", "expected 2 tab-separated fields (query, response), found 0"),
])
def test_malformed_utterance_lines_name_file_and_line(tmp_path, bad_line, message):
    lines = [f"q{i}\ta{i}" for i in range(120)]
    lines[6] = bad_line
    path = _lines(tmp_path / "u.txt", lines)
    with pytest.raises(DataFormatError) as error:
        read_utterance_rs_file(path)
    assert str(error.value) == f"{path}:7: {message}"


def test_utterance_file_errors_name_the_line(tmp_path):
    path = tmp_path / "u.txt"
    path.write_bytes(b"q0\ta0\nq1\ta1\nq2\t\xff\n")
    with pytest.raises(DataFormatError, match=r"u\.txt:3: invalid UTF-8"):
        read_utterance_rs_file(path)
    path.write_bytes(b"")
    with pytest.raises(DataFormatError, match=r"u\.txt:1: the file has no rows"):
        read_utterance_rs_file(path)
    _lines(path, [f"q{i}\ta{i}" for i in range(99)])
    with pytest.raises(DataFormatError, match=r"u\.txt:1: 99 rows, fewer than one block of 100"):
        read_utterance_rs_file(path)
    # A quoted field may hold a line break: the error names the line its record starts on.
    _lines(path, ['"q0', 'still q0"\ta0', "q1\ta1\textra"])
    with pytest.raises(DataFormatError, match=r"u\.txt:3: expected 2 tab-separated fields"):
        read_utterance_rs_file(path)


@pytest.mark.parametrize("candidates, message", [
    ("|".join(f"c{j}" for j in range(99)), "expected 100 candidates separated by '|', found 99"),
    ("|".join(f"c{j}" for j in range(101)), "expected 100 candidates separated by '|', found 101"),
])
def test_malformed_dialogue_lines_name_file_and_line(tmp_path, candidates, message):
    good = "|".join(f"c{j}" for j in range(100))
    path = _lines(tmp_path / "d.txt", ["ctx\tr\t" + good, "ctx\tr\t" + candidates, "ctx\tr\t" + good])
    with pytest.raises(DataFormatError) as error:
        read_dialogue_rs_file(path)
    assert str(error.value) == f"{path}:2: {message}"
    _lines(path, ["ctx\tr\t" + good, "ctx\tr"])
    with pytest.raises(DataFormatError, match=r"d\.txt:2: expected 3 tab-separated fields \(context, response, "
                                              r"candidates\), found 2"):
        read_dialogue_rs_file(path)


@pytest.mark.parametrize("read", [read_utterance_rs_file, read_dialogue_rs_file])
def test_any_bytes_read_or_fail_with_a_located_error(tmp_path, read):
    """Bytes cut from valid files and mutated: each file reads, or fails naming its file and a line."""
    rng = np.random.default_rng(5)
    good = tmp_path / "good.txt"
    write_utterance_rs_file([(f'q "{i}"', f"a\t{i}") for i in range(120)], good)
    base = good.read_bytes() + b'c\tr\t' + b"|".join(b"x%d" % j for j in range(100)) + b"\n"
    path = tmp_path / "fuzzed.txt"
    for _ in range(300):
        data = bytearray(base[:int(rng.integers(0, len(base)))])
        for position in rng.integers(0, max(len(data), 1), size=int(rng.integers(0, 6))):
            data[position:position] = bytes([int(rng.choice([9, 10, 13, 34, 124, 0xff, 0xef, 65]))])
        path.write_bytes(bytes(data))
        try:
            read(path)
        except DataFormatError as error:
            assert str(error).startswith(f"{path}:") and error.line_number >= 1
