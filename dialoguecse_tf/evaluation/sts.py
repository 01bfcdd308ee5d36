"""Reads the dialogue STS (D-STS) file, `sts.txt` of the authors' release.

Format: one UTF-8 line per pair, `score \\t sentence_a \\t sentence_b`, where `score` is the
median of the annotators' 1..5 relevance grades (an integer). Lines are split on "\\n"; a
trailing "\\r" and a UTF-8 byte-order mark are ignored, as in `read_select_file`.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from dialoguecse_tf.io_utils import DataFormatError, read_strict_lines

MIN_SCORE = 1
MAX_SCORE = 5
_SCORE_TEXTS = frozenset(str(score) for score in range(MIN_SCORE, MAX_SCORE + 1))


class StsPair(NamedTuple):
    score: int
    sentence_a: str
    sentence_b: str


def read_sts_file(path: str | os.PathLike) -> list[StsPair]:
    """Reads and validates `sts.txt`; returns `(score, sentence_a, sentence_b)` tuples.

    Each line must have 3 tab-separated fields, a plain decimal integer score in 1..5 and two
    sentences that are not empty or whitespace-only. A violation (or invalid UTF-8) raises
    `DataFormatError` naming the file and 1-based line; an empty file raises it for line 1.
    """
    pairs = []
    for line_number, line in read_strict_lines(path, "D-STS file has no pairs"):
        fields = line.split("\t")
        if len(fields) != 3:
            message = f"expected 3 tab-separated fields (score, sentence_a, sentence_b), found {len(fields)}"
            raise DataFormatError(path, line_number, message, reason="field_count")
        score_text, sentence_a, sentence_b = fields
        # Stricter than int(): no signs, spaces or non-ASCII digits; and never int() of a string
        # longer than Python converts (4300 digits), which raises a ValueError of its own.
        if not (score_text.isascii() and score_text.isdigit()) or score_text.lstrip("0") not in _SCORE_TEXTS:
            raise DataFormatError(
                path, line_number, f"score {score_text!r} is not an integer in {MIN_SCORE}..{MAX_SCORE}",
                reason="bad_score",
            )
        for name, sentence in (("sentence_a", sentence_a), ("sentence_b", sentence_b)):
            if not sentence.strip():
                raise DataFormatError(path, line_number, f"{name} is empty", reason="empty_sentence")
        pairs.append(StsPair(int(score_text), sentence_a, sentence_b))
    return pairs
