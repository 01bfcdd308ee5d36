import os
import random
import time

import pytest

from dialoguecse_tf.data.sr_builder import (
    SrRow,
    bm25_tokenize,
    build_sr_set,
    read_select_file,
    write_select_file,
)
from dialoguecse_tf.io_utils import DataFormatError

# Three intents. For "refund my order" BM25 ranks: the other refund sentence (3 shared terms),
# "track order status" ("order" is rarer than "my"), then "track my package" and "change my
# address" with equal scores (same length, only "my" shared), then the longer "where is my
# package". "money back please" shares no term with anything, so it never gets a positive.
ENGLISH = [
    ("refund my order", "refund"),
    ("i want a refund for my order", "refund"),
    ("money back please", "refund"),
    ("track my package", "track"),
    ("where is my package", "track"),
    ("track order status", "track"),
    ("change my address", "address"),
    ("change delivery address", "address"),
    ("wrong address on package", "address"),
]


def by_sentence(rows):
    """{sentence: (positive sentences, negative sentences)}, independent of row numbering."""
    text = {row.id: row.sentence for row in rows}
    return {
        row.sentence: ({text[i] for i in row.positive_ids}, {text[i] for i in row.negative_ids})
        for row in rows
    }


def check_invariants(rows):
    for index, row in enumerate(rows):
        assert row.id == index
        assert row.positive_ids, "every row is a query"
        assert list(row.positive_ids) == sorted(row.positive_ids)
        assert list(row.negative_ids) == sorted(row.negative_ids)
        assert not set(row.positive_ids) & set(row.negative_ids)
        for i in row.positive_ids:
            assert rows[i].intent == row.intent and rows[i].sentence != row.sentence
        for i in row.negative_ids:
            assert rows[i].intent != row.intent and rows[i].sentence != row.sentence


def test_english_top_candidates_follow_bm25_and_tie_break_by_id():
    rows, stats = build_sr_set(ENGLISH, num_candidates=3)
    check_invariants(rows)
    table = by_sentence(rows)
    # Top 3 of the ranking above: the tie between "track my package" and "change my address"
    # is cut by num_candidates=3 and goes to the lower row id.
    assert table["refund my order"] == (
        {"i want a refund for my order"},
        {"track order status", "track my package"},
    )
    assert table["change delivery address"] == ({"change my address", "wrong address on package"}, set())
    assert "money back please" not in table
    assert stats["dropped_no_positive"] == 1
    assert stats["queries"] == len(rows) == 8
    assert stats["rounds"] == 1
    assert stats["queries_without_negatives"] == 1


def test_candidates_exclude_own_text_and_duplicates_are_merged():
    items = ENGLISH + [("refund my order", "refund"), ("refund my order", "track")]
    rows, stats = build_sr_set(items, num_candidates=3)
    check_invariants(rows)
    assert stats["duplicates"] == 1
    assert stats["conflicting_texts"] == 1
    same_text = [row for row in rows if row.sentence == "refund my order"]
    assert [row.intent for row in same_text] == ["refund", "track"]
    # The two rows of the same text never retrieve each other.
    for row in same_text:
        other = next(r for r in same_text if r is not row)
        assert other.id not in row.positive_ids + row.negative_ids


def test_positives_capped_to_highest_ranked():
    # Equal-length candidates: BM25 rank follows the number of shared terms.
    items = [
        ("refund order now please", "refund"),
        ("please now order refund", "refund"),  # 4 shared terms
        ("refund order now xa", "refund"),  # 3
        ("refund order xb xc", "refund"),  # 2
        ("refund xd xe xf", "refund"),  # 1
        ("order xg xh xi", "track"),
        ("xg xh xi xj", "track"),
    ]
    rows, stats = build_sr_set(items, max_positives=2)
    check_invariants(rows)
    table = by_sentence(rows)
    assert table["refund order now please"] == (
        {"please now order refund", "refund order now xa"},
        {"order xg xh xi"},
    )
    assert all(len(row.positive_ids) <= 2 for row in rows)
    assert stats["positives_capped"] >= 1


def test_max_negatives_keeps_highest_ranked():
    rows, _ = build_sr_set(ENGLISH, num_candidates=100, max_negatives=1)
    check_invariants(rows)
    # Negatives of "refund my order" in rank order: "track order status", then the "my" ties.
    assert by_sentence(rows)["refund my order"][1] == {"track order status"}


def test_dropping_a_query_removes_it_as_candidate_and_cascades():
    items = [
        ("alpha beta", "x"),  # top-1 is "alpha beta gamma" (other intent): dropped in pass 1
        ("alpha", "x"),  # top-1 is "alpha beta"; once that is gone, nothing of intent x: pass 2
        ("alpha beta gamma", "y"),  # top-1 is "alpha beta": dropped in pass 1
        ("gamma delta", "y"),
        ("delta gamma epsilon", "y"),
    ]
    rows, stats = build_sr_set(items, num_candidates=1)
    assert rows == [
        SrRow(0, "gamma delta", "y", (1,), ()),
        SrRow(1, "delta gamma epsilon", "y", (0,), ()),
    ]
    assert stats["dropped_no_positive"] == 3
    assert stats["rounds"] == 2


def synthetic_corpus(size, seed=0, chinese=False):
    rng = random.Random(seed)
    intents = [f"intent{i}" for i in range(20)]
    vocab = [chr(0x4E00 + i) for i in range(800)] if chinese else [f"w{i}" for i in range(800)]
    topic = {intent: rng.sample(vocab, 25) for intent in intents}
    items = []
    for _ in range(size):
        intent = rng.choice(intents)
        length = rng.randint(3, 10)
        words = [rng.choice(topic[intent]) if rng.random() < 0.6 else rng.choice(vocab)
                 for _ in range(length)]
        items.append(("".join(words) if chinese else " ".join(words), intent))
    return items


@pytest.mark.parametrize("chinese", [False, True])
def test_deterministic_and_valid_on_synthetic_corpus(tmp_path, chinese):
    items = synthetic_corpus(400, chinese=chinese)
    rows, stats = build_sr_set(items, num_candidates=50, max_positives=10)
    again, again_stats = build_sr_set(list(items), num_candidates=50, max_positives=10)
    assert rows == again and stats == again_stats
    check_invariants(rows)
    assert stats["queries"] + stats["dropped_no_positive"] + stats["duplicates"] == len(items)
    assert all(len(row.positive_ids) + len(row.negative_ids) <= 50 for row in rows)
    path = tmp_path / "select.txt"
    write_select_file(rows, path)
    assert read_select_file(path) == rows


def test_bm25_tokenize_latin_words_and_cjk_characters():
    tokens = bm25_tokenize("我想退货 Refund ORDER１２３, please!")
    assert tokens == ["我", "想", "退", "货", "refund", "order123", "please"]
    assert bm25_tokenize("Where's my_package?") == ["where", "s", "my", "package"]
    assert bm25_tokenize("?!。") == []


def test_chinese_corpus_uses_character_overlap():
    items = [
        ("我想退货", "退货"),
        ("怎么退货呢", "退货"),
        ("我的快递到哪了", "物流"),
        ("快递还没到", "物流"),
        ("我想改地址", "地址"),
        ("地址写错了", "地址"),
    ]
    rows, stats = build_sr_set(items, num_candidates=2)
    check_invariants(rows)
    table = by_sentence(rows)
    # 退 and 货 are rarer than 我, so the same-intent sentence outranks "我想改地址".
    assert table["我想退货"] == ({"怎么退货呢"}, {"我想改地址"})
    assert table["怎么退货呢"] == ({"我想退货"}, set())
    assert stats["queries"] == 6


def test_build_rejects_unwritable_or_unlabelled_items():
    with pytest.raises(ValueError, match="item 1: sentence contains a tab"):
        build_sr_set([("a b", "x"), ("a\tb", "x")])
    with pytest.raises(ValueError, match="item 0: intent is empty"):
        build_sr_set([("a b", ""), ("a c", "")])
    with pytest.raises(ValueError, match="only 0 SR queries"):
        build_sr_set([("a b", "x"), ("c d", "x")])


def test_untokenizable_sentences_are_dropped_and_counted():
    rows, stats = build_sr_set([("refund now", "r"), ("refund please", "r"), ("???", "r")])
    assert stats["untokenizable"] == 1
    assert [row.sentence for row in rows] == ["refund now", "refund please"]


def test_write_read_round_trip_and_atomic_write(tmp_path):
    rows = [
        SrRow(0, "我想退货", "退货", (1,), (2,)),
        SrRow(1, "refund please", "退货", (0,), ()),
        SrRow(2, "where is it", "", (1,), (0,)),
    ]
    path = tmp_path / "sub" / "select.txt"
    write_select_file(rows, path)
    assert path.read_text(encoding="utf-8") == (
        "0\t我想退货\t退货\t1\t2\n1\trefund please\t退货\t0\t\n2\twhere is it\t\t1\t0\n"
    )
    assert read_select_file(path) == rows
    with pytest.raises(ValueError, match="row 1: query 1 has no positive"):
        write_select_file([rows[0], SrRow(1, "x", "y", (), (0,)), rows[2]], path)
    assert read_select_file(path) == rows  # the failed write left the old file alone
    assert os.listdir(path.parent) == ["select.txt"]


GOOD = "0\ta\tx\t1\t2\n1\tb\tx\t0\t2\n2\tc\ty\t0\t\n"


@pytest.mark.parametrize(
    "text, line, reason",
    [
        ("0\ta\tx\t1\t2\n1\tb\tx\t0\n2\tc\ty\t0\t\n", 2, "field_count"),
        ("0\ta\tx\t1\t2\n1\tb\tx\t0\t2\n\n", 3, "field_count"),
        ("0\ta\tx\t1\t2\nX\tb\tx\t0\t2\n2\tc\ty\t0\t\n", 2, "bad_id"),
        ("0\ta\tx\t1\t2\n1\tb\tx\t0,,2\t\n2\tc\ty\t0\t\n", 2, "bad_id"),
        ("0\ta\tx\t1\t-2\n1\tb\tx\t0\t2\n2\tc\ty\t0\t\n", 1, "bad_id"),
        ("0\ta\tx\t1\t2\n1\tb\tx\t0\t2\n2\tc\ty\t0\t3\n", 3, "id_out_of_range"),
        ("0\ta\tx\t1\t2\n2\tb\tx\t0\t2\n2\tc\ty\t0\t\n", 2, "id_mismatch"),
        ("0\ta\tx\t1\t2\n1\tb\tx\t0\t2\n2\tc\ty\t\t0\n", 3, "no_positive"),
        ("0\ta\tx\t1\t1\n1\tb\tx\t0\t2\n2\tc\ty\t0\t\n", 1, "positive_negative_overlap"),
        ("0\ta\tx\t1\t2\n1\tb\tx\t0,1\t2\n2\tc\ty\t0\t\n", 2, "self_reference"),
        ("", 1, "empty_file"),
    ],
)
def test_reader_rejects_format_violations_naming_file_and_line(tmp_path, text, line, reason):
    path = tmp_path / "select.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataFormatError) as caught:
        read_select_file(path)
    assert (caught.value.path, caught.value.line_number, caught.value.reason) == (str(path), line, reason)
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_reader_keeps_repeated_ids_as_the_release_does(tmp_path):
    # The DialogueCSE authors' select files repeat an id in some positive lists; their
    # eval_selection.py keeps every listed id as a candidate.
    path = tmp_path / "select.txt"
    path.write_text("0\ta\tx\t1,1\t2,2\n1\tb\tx\t0\t2\n2\tc\ty\t0\t\n", encoding="utf-8")
    assert [(row.positive_ids, row.negative_ids) for row in read_select_file(path)] == [
        ((1, 1), (2, 2)), ((0,), (2,)), ((0,), ())]


def test_reader_accepts_crlf_and_bom(tmp_path):
    path = tmp_path / "select.txt"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").encode("utf-8"))
    assert [row.positive_ids for row in read_select_file(path)] == [(1,), (0,), (0,)]


@pytest.mark.parametrize("corpus, num_rows", [("ecd", 2373), ("jddc", 2094)])
def test_reads_real_dev_files(shared_data, corpus, num_rows):
    start = time.perf_counter()
    rows = read_select_file(shared_data / corpus / "dev" / "select.txt")
    elapsed_ms = (time.perf_counter() - start) * 1000
    print(f"{corpus}: {len(rows)} rows read in {elapsed_ms:.0f} ms")
    assert len(rows) == num_rows
    assert all(len(row.positive_ids) == 30 and len(row.negative_ids) == 40 for row in rows)
