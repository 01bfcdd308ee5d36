import pytest

from dialoguecse_tf.evaluation.sts import StsPair, read_sts_file
from dialoguecse_tf.io_utils import DataFormatError


def test_reads_pairs_with_bom_crlf_and_no_final_newline(tmp_path):
    path = tmp_path / "sts.txt"
    path.write_bytes("\ufeff5\t明天能发吗\t今天发吗\r\n1\tshipping fee\tmy order\n3\ta\tb".encode("utf-8"))
    pairs = read_sts_file(path)
    assert pairs == [(5, "明天能发吗", "今天发吗"), (1, "shipping fee", "my order"), (3, "a", "b")]
    assert isinstance(pairs[0], StsPair) and pairs[0].sentence_b == "今天发吗"


@pytest.mark.parametrize(
    "bad_line, reason, message",
    [
        (b"4\tonly two", "field_count", "expected 3 tab-separated fields"),
        (b"4\ta\tb\tc", "field_count", "found 4"),
        (b"0\ta\tb", "bad_score", "not an integer in 1..5"),
        (b"6\ta\tb", "bad_score", "'6'"),
        (b"3.5\ta\tb", "bad_score", "'3.5'"),
        (b" 3\ta\tb", "bad_score", "' 3'"),
        (b"-1\ta\tb", "bad_score", "'-1'"),
        (b"3\t\tb", "empty_sentence", "sentence_a is empty"),
        (b"3\ta\t  ", "empty_sentence", "sentence_b is empty"),
        (b"3\ta \xff\tb", "invalid_utf8", "invalid UTF-8"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path, bad_line, reason, message):
    path = tmp_path / "sts.txt"
    path.write_bytes(b"5\tgood\tpair\n2\tanother\tgood one\n" + bad_line + b"\n")
    with pytest.raises(DataFormatError, match=message) as info:
        read_sts_file(path)
    assert info.value.reason == reason and info.value.line_number == 3
    assert str(info.value).startswith(f"{path}:3: ")


def test_empty_file(tmp_path):
    path = tmp_path / "sts.txt"
    path.write_bytes(b"")
    with pytest.raises(DataFormatError, match=r"sts.txt:1: D-STS file has no pairs"):
        read_sts_file(path)


@pytest.mark.parametrize("corpus, count", [("ecd", 500), ("jddc", 1000)])
def test_reads_the_released_dev_files(shared_data, corpus, count):
    pairs = read_sts_file(shared_data / corpus / "dev" / "sts.txt")
    assert len(pairs) == count
    assert {score for score, _, _ in pairs} == {1, 2, 3, 4, 5}
