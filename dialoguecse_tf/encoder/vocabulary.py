"""BERT's vocab.txt format and special tokens, without TensorFlow (see `tokenization`)."""

import os

from dialoguecse_tf.io_utils import read_strict_lines

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)


def load_vocab(vocab_file) -> list[str]:
    """Reads a BERT vocab.txt: one UTF-8 token per line, the line number is the id.

    Invalid UTF-8 or an empty file raises `DataFormatError` naming the file and line.
    """
    vocab_file = os.fspath(vocab_file)
    if not os.path.isfile(vocab_file):
        raise FileNotFoundError(f"BERT vocabulary file not found: {vocab_file}")
    # Split on "\n" only: str.splitlines would also split on tokens such as U+2028.
    tokens = [line for _, line in read_strict_lines(vocab_file, "BERT vocabulary file has no tokens")]
    missing = [token for token in SPECIAL_TOKENS if token not in tokens]
    if missing:
        raise ValueError(f"BERT vocabulary {vocab_file} lacks the special tokens {missing}")
    if len(set(tokens)) != len(tokens):
        seen, duplicates = set(), []
        for token in tokens:
            if token in seen:
                duplicates.append(token)
            seen.add(token)
        raise ValueError(f"BERT vocabulary {vocab_file} repeats tokens {duplicates[:10]}")
    return tokens
