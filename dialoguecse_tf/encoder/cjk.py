"""The one place that says which code points are CJK, for every text rule of the project.

* `BERT_CJK_RANGES`: the ranges BERT's basic tokenizer (and tf_text's copy of it) splits into
  one word per character (Han ideographs); the tokenizer's detokenize must undo exactly those.
* `KANA_RANGE`: Japanese hiragana and katakana, written without spaces like Han.
* `NO_SPACE_RANGES`: every script written without spaces between words, with its symbols and
  punctuation (CJK radicals to Han, compatibility forms, fullwidth forms): where joining two
  utterances needs no space. Hangul is absent on purpose: Korean separates words with spaces.
"""

BERT_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
KANA_RANGE = (0x3040, 0x30FF)
NO_SPACE_RANGES = (
    (0x2E80, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xFE30, 0xFE4F),
    (0xFF00, 0xFFEF),
    (0x20000, 0x3FFFF),
)


def in_ranges(char: str, ranges) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in ranges)


def regex_class(ranges) -> str:
    """The inside of a regular-expression character class matching `ranges`."""
    return "".join(f"{chr(low)}-{chr(high)}" for low, high in ranges)
