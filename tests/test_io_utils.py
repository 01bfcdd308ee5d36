"""dialoguecse_tf/io_utils.py: the one whole-file UTF-8 reader the corpus, intent, dialogue-act
and response-set readers share."""

import pytest

from dialoguecse_tf.io_utils import DataFormatError, read_utf8


def test_a_byte_order_mark_is_dropped_and_line_ends_kept(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes("\ufeff[1,\r\n 2]\n".encode("utf-8"))
    assert read_utf8(path) == "[1,\r\n 2]\n"


def test_a_byte_that_is_not_utf8_is_named_at_its_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_bytes(b"first\nsecond\nthi\xffrd\n")
    with pytest.raises(DataFormatError) as caught:
        read_utf8(path)
    assert (caught.value.line_number, caught.value.reason) == (3, "invalid_utf8")
    assert str(caught.value).startswith(f"{path}:3: invalid UTF-8")
