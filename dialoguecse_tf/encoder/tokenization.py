"""BERT WordPiece tokenization that runs inside TensorFlow graphs.

`Tokenizer` wraps `tensorflow_text.BertTokenizer`, so the same object tokenizes in
`tf.data` pipelines, in `tf.function`s and inside an exported SavedModel (it is a
`tf.Module`; its vocabulary table travels with the model). `build_vocab` learns a
vocabulary for a BERT trained from scratch with tensorflow-text's own learner, using
the same basic-tokenizer settings as `Tokenizer`, so the two always agree on words.

One tokenization everywhere: data prep writes its records with `Tokenizer`, and `encode()`
and the SavedModel run the same `Tokenizer` in-graph, so an encoder is served exactly as it
was trained. With `do_lower_case` that tokenization folds text with NFKC_Casefold
(tensorflow-text's `case_fold_utf8`), then NFD and drops nonspacing marks: full-width `，`
is `,`, `ＡＢＣ` is `abc`, `ß` is `ss`, `ﬁ` is `fi`, `①` is `1`. google-research/bert's
tokenization.py and HuggingFace's BertTokenizer only lower-case, NFD and strip accents
(no NFKC), so those texts split differently there. The exports follow this project, not
the other way round: changing `Tokenizer` would change what every trained encoder was
trained on. `huggingface_normalizer` is the HuggingFace `tokenizers` normalizer that the
HuggingFace export ships so that it splits words as `Tokenizer` does.
"""

import json
import os
import unicodedata
from typing import Iterable

from absl import logging
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset import bert_vocab_from_dataset

from dialoguecse_tf.encoder.cjk import BERT_CJK_RANGES, in_ranges
from dialoguecse_tf.io_utils import read_json_object
# Re-exported: the vocabulary file format lives in a TensorFlow-free module, so data prep can
# check a vocabulary before loading TensorFlow.
from dialoguecse_tf.encoder.vocabulary import (  # noqa: F401
    CLS_TOKEN, MASK_TOKEN, PAD_TOKEN, SEP_TOKEN, SPECIAL_TOKENS, UNK_TOKEN, load_vocab,
)

VOCAB_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
DEFAULT_MAX_SEQ_LENGTH = 128

_SUFFIX = "##"

def _is_cjk_char(token: str) -> bool:
    if len(token) != 1:
        return False
    return in_ranges(token, BERT_CJK_RANGES)


def _is_punctuation(char: str) -> bool:
    # tf_text's basic tokenizer splits off ASCII symbols and Unicode class P, like BERT.
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _basic_tokenizer_params(do_lower_case: bool) -> dict:
    # Vocabulary learning and tokenization must split words identically, or the learned
    # vocabulary does not cover what the tokenizer looks up.
    return {"lower_case": bool(do_lower_case)}


def huggingface_normalizer(do_lower_case: bool):
    """A HuggingFace `tokenizers` normalizer that normalizes text as `Tokenizer` does.

    Followed by `BertPreTokenizer` it splits words as tensorflow-text's basic tokenizer does:
    with `do_lower_case`, NFKC_Casefold (default-ignorable characters removed, NFKC, full
    lower-casing plus the case foldings that differ from it, such as ß -> ss and ς -> σ, and
    NFKC again), then NFD without nonspacing marks; always, control and format characters
    become spaces (tensorflow-text splits there; `BertNormalizer` would glue the neighbours)
    and CJK ideographs are split off. What still differs, measured over every code point:
    characters newer than the Unicode version of `tokenizers` (unassigned there) and three
    separators (U+1680, U+2028, U+2029) that HuggingFace splits on and tensorflow-text keeps.
    """
    from tokenizers import Regex, normalizers

    steps = []
    if do_lower_case:
        steps += [normalizers.Replace(Regex(r"\p{Default_Ignorable_Code_Point}"), ""), normalizers.NFKC(),
                  normalizers.Lowercase()]
        steps += [normalizers.Replace(lower, folded) for lower, folded in _case_foldings().items()]
        steps += [normalizers.NFKC(), normalizers.NFD(), normalizers.Replace(Regex(r"\p{Mn}"), "")]
    steps += [normalizers.Replace(Regex(r"[\p{Cc}\p{Cf}]"), " "),
              normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False,
                                         lowercase=False)]
    return normalizers.Sequence(steps)


def _case_foldings() -> dict:
    """Lower-cased NFKC text -> its case folding, wherever the two differ (ß -> ss, ...)."""
    foldings = {}
    for code in range(0x110000):
        if 0xD800 <= code < 0xE000:
            continue
        text = unicodedata.normalize("NFKC", chr(code))
        if text.casefold() != text.lower():
            foldings[text.lower()] = text.casefold()
    return foldings


def write_vocab(tokens: Iterable[str], vocab_file) -> None:
    """Writes tokens one per line (UTF-8), the form `load_vocab` reads."""
    tokens = list(tokens)
    for token in tokens:
        if not token or "\n" in token or "\r" in token:
            raise ValueError(f"cannot write vocabulary token {token!r}: empty or contains a newline")
    with open(vocab_file, "w", encoding="utf-8", newline="\n") as writer:
        writer.write("".join(token + "\n" for token in tokens))


class Tokenizer(tf.Module):
    """BERT WordPiece tokenizer: raw strings -> `[CLS] pieces [SEP] [PAD]...` ids.

    `tokenize` and `__call__` are TensorFlow ops only, so they run eagerly, in
    `tf.data.Dataset.map` and in a `tf.function` with a `tf.TensorSpec([None], tf.string)`
    signature, and a SavedModel that holds this module carries the vocabulary table
    (load it after `import tensorflow_text`, which registers the tokenizer ops).
    Input that is not valid UTF-8 raises `tf.errors.InvalidArgumentError` whose
    message says so: tf_text on its own would silently turn such text into [UNK]s.

    Example:
      >>> tokenizer = Tokenizer("vocab.txt", do_lower_case=True, max_seq_length=32)
      >>> inputs = tokenizer(["how much is shipping", "is it in stock"])
      >>> inputs["token_ids"].shape  # and segment_ids, padding_mask: int32 [2, 32]
      TensorShape([2, 32])
      >>> tokenizer.detokenize(inputs["token_ids"])
      ['how much is shipping', 'is it in stock']
    """

    # tf.Module walks every attribute (for `variables`, saving, ...); walking the Python
    # copies of a 30k-token vocabulary makes that take seconds.
    _TF_MODULE_IGNORED_PROPERTIES = tf.Module._TF_MODULE_IGNORED_PROPERTIES | {
        "_vocab",
        "_token_to_id",
        "_special_ids",
    }

    def __init__(self, vocab_file, do_lower_case: bool = True, max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH):
        """Constructor for Tokenizer.

        Args:
          vocab_file: str or path-like, a BERT vocabulary, one token a line, [PAD] first.
          do_lower_case: bool, whether text is case-folded and stripped of accents first
            (the module docstring says how).
          max_seq_length: int >= 2, the length L `__call__` pads and cuts to by default.

        Raises:
          FileNotFoundError: if `vocab_file` does not exist.
          ValueError: if the vocabulary lacks a special token, repeats one or does not put
            [PAD] at id 0, or `max_seq_length` is below 2 (`DataFormatError`, a ValueError,
            for a file that is empty or not UTF-8).
        """
        super().__init__(name="tokenizer")
        _check_max_seq_length(max_seq_length)
        vocab = load_vocab(vocab_file)
        if vocab[0] != PAD_TOKEN:
            raise ValueError(
                f"BERT vocabulary {os.fspath(vocab_file)} must have {PAD_TOKEN} as id 0 (padding "
                f"uses id 0), but id 0 is {vocab[0]!r} and {PAD_TOKEN} is id {vocab.index(PAD_TOKEN)}"
            )
        self._vocab_file = os.fspath(vocab_file)
        self._do_lower_case = bool(do_lower_case)
        self._max_seq_length = int(max_seq_length)
        self._vocab = tuple(vocab)
        self._token_to_id = {token: index for index, token in enumerate(vocab)}
        self._special_ids = frozenset(self._token_to_id[token] for token in SPECIAL_TOKENS)
        # One OOV bucket is never returned (WordpieceTokenizer maps unknown words to [UNK]);
        # StaticVocabularyTable simply needs at least one.
        self._table = tf.lookup.StaticVocabularyTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(vocab, dtype=tf.string),
                tf.range(len(vocab), dtype=tf.int64),
            ),
            num_oov_buckets=1,
        )
        longest_piece = max(len(token[len(_SUFFIX):] if token.startswith(_SUFFIX) else token) for token in vocab)
        self._bert_tokenizer = tf_text.BertTokenizer(
            self._table,
            suffix_indicator=_SUFFIX,
            max_chars_per_token=longest_piece,
            token_out_type=tf.int64,
            unknown_token=UNK_TOKEN,
            **_basic_tokenizer_params(do_lower_case),
        )

    @classmethod
    def from_directory(cls, directory, max_seq_length: int | None = None) -> "Tokenizer":
        """Reads `vocab.txt` and `tokenizer_config.json` from a folder.

        `do_lower_case` comes from `tokenizer_config.json` (this project's file and
        HuggingFace's use the same key) and defaults to True when the file or key is
        absent. `max_seq_length` is the argument, else the file's `max_seq_length`,
        else 128; HuggingFace's `model_max_length` is deliberately not used, it is the
        position limit of the model, not a training length.

        Args:
          directory: str or path-like, a folder with `vocab.txt` (as `save` writes it, or a
            HuggingFace or Google BERT folder).
          max_seq_length: int or None, overrides the file's `max_seq_length`.

        Returns:
          Tokenizer.

        Raises:
          FileNotFoundError: if the folder has no `vocab.txt`.
          ValueError: as the constructor, or for an unreadable `tokenizer_config.json`.
        """
        directory = os.fspath(directory)
        config = {}
        config_path = os.path.join(directory, TOKENIZER_CONFIG_FILE)
        if os.path.isfile(config_path):
            config = read_json_object(config_path, "a tokenizer config")
        if max_seq_length is None:
            max_seq_length = config.get("max_seq_length", DEFAULT_MAX_SEQ_LENGTH)
        return cls(
            os.path.join(directory, VOCAB_FILE),
            do_lower_case=bool(config.get("do_lower_case", True)),
            max_seq_length=max_seq_length,
        )

    def save(self, directory) -> None:
        """Writes `vocab.txt` and `tokenizer_config.json` into `directory`.

        Args:
          directory: str or path-like, created if missing; `from_directory` reads it back.
        """
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        write_vocab(self._vocab, os.path.join(directory, VOCAB_FILE))
        config = {"do_lower_case": self._do_lower_case, "max_seq_length": self._max_seq_length}
        with open(os.path.join(directory, TOKENIZER_CONFIG_FILE), "w", encoding="utf-8") as writer:
            json.dump(config, writer, indent=2, sort_keys=True)
            writer.write("\n")

    @property
    def vocab(self) -> list[str]:
        return list(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def vocab_file(self) -> str:
        return self._vocab_file

    @property
    def do_lower_case(self) -> bool:
        return self._do_lower_case

    @property
    def max_seq_length(self) -> int:
        return self._max_seq_length

    @property
    def pad_id(self) -> int:
        return self._token_to_id[PAD_TOKEN]

    @property
    def unk_id(self) -> int:
        return self._token_to_id[UNK_TOKEN]

    @property
    def cls_id(self) -> int:
        return self._token_to_id[CLS_TOKEN]

    @property
    def sep_id(self) -> int:
        return self._token_to_id[SEP_TOKEN]

    @property
    def mask_id(self) -> int:
        return self._token_to_id[MASK_TOKEN]

    # A graph function even when called eagerly: eager tf_text ops cost several ms a call.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(self, texts) -> tf.RaggedTensor:
        """Splits texts into wordpiece ids, untruncated, without [CLS]/[SEP].

        Args:
          texts: string Tensor of shape [B], UTF-8.

        Returns:
          int64 RaggedTensor of shape [B, (pieces)]; an unknown word is one [UNK].

        Raises:
          tf.errors.InvalidArgumentError: if a text is not valid UTF-8.
        """
        texts = _checked_utf8(texts)
        return self._bert_tokenizer.tokenize(texts).merge_dims(-2, -1)

    def __call__(self, texts, max_seq_length: int | None = None) -> dict:
        """Tokenizes and packs texts into BERT's inputs.

        Each row is `[CLS] wordpieces [SEP]` followed by [PAD] (id 0); wordpieces are cut
        so that the row fits L, [CLS] and [SEP] are always kept. An empty string gives
        `[CLS] [SEP]`.

        Args:
          texts: string Tensor of shape [B], or a list of B str.
          max_seq_length: int >= 2 or None, L; None takes the tokenizer's `max_seq_length`.

        Returns:
          {"token_ids", "segment_ids", "padding_mask"}: int32 Tensors of shape [B, L];
          segment ids are all 0, the mask is 1 up to and including [SEP].

        Raises:
          ValueError: if `max_seq_length` is below 2.
          tf.errors.InvalidArgumentError: if a text is not valid UTF-8.
        """
        length = self._max_seq_length if max_seq_length is None else max_seq_length
        _check_max_seq_length(length)
        return self._pack(tf.convert_to_tensor(texts, dtype=tf.string), int(length))

    def pack(self, pieces: tf.RaggedTensor, max_seq_length: int) -> dict:
        """Packs wordpieces from `tokenize` as `__call__` packs their texts.

        For a caller that needs the untruncated pieces too, so each text is tokenized once.

        Args:
          pieces: int RaggedTensor of shape [B, (pieces)], `tokenize`'s output.
          max_seq_length: int >= 2, L.

        Returns:
          {"token_ids", "segment_ids", "padding_mask"}: int32 Tensors of shape [B, L].

        Raises:
          ValueError: if `max_seq_length` is below 2.
        """
        _check_max_seq_length(max_seq_length)
        return self._pack_pieces(pieces, int(max_seq_length))

    # A graph function for the same reason as `tokenize`; one trace per length.
    @tf.function(reduce_retracing=True)
    def _pack(self, texts, length):
        return self._pack_pieces(self.tokenize(texts), length)

    @tf.function(reduce_retracing=True)
    def _pack_pieces(self, pieces, length):
        (trimmed,) = tf_text.RoundRobinTrimmer(max_seq_length=length - 2).trim([pieces])
        ids, segments = tf_text.combine_segments(
            [trimmed], start_of_sequence_id=self.cls_id, end_of_segment_id=self.sep_id
        )
        token_ids, padding_mask = tf_text.pad_model_inputs(ids, max_seq_length=length, pad_value=self.pad_id)
        segment_ids, _ = tf_text.pad_model_inputs(segments, max_seq_length=length, pad_value=0)
        return {
            "token_ids": tf.cast(token_ids, tf.int32),
            "segment_ids": tf.cast(segment_ids, tf.int32),
            "padding_mask": tf.cast(padding_mask, tf.int32),
        }

    def tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """Looks up whole tokens (no splitting into pieces).

        Args:
          tokens: iterable of str, vocabulary entries such as "[CLS]" or "##ing".

        Returns:
          list of int, one id per token; [UNK]'s id for a token not in the vocabulary.
        """
        unk_id = self.unk_id
        return [self._token_to_id.get(token, unk_id) for token in tokens]

    def ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """The vocabulary entries of ids.

        Args:
          ids: iterable of int (or NumPy integers).

        Returns:
          list of str, one token per id, special tokens included.

        Raises:
          ValueError: for an id outside [0, vocab_size).
        """
        tokens = []
        for index in ids:
            index = int(index)
            if not 0 <= index < len(self._vocab):
                raise ValueError(f"token id {index} is outside the vocabulary [0, {len(self._vocab)})")
            tokens.append(self._vocab[index])
        return tokens

    def count_unknown(self, texts) -> tuple[int, int]:
        """How much of `texts` the vocabulary does not cover.

        Args:
          texts: iterable of str.

        Returns:
          (unknown, pieces): int counts of [UNK] pieces and of all word pieces.
        """
        return count_unknown(self.tokenize, self.unk_id, texts)

    def tokenize_to_strings(self, text: str) -> list[str]:
        """The wordpiece strings of one text.

        Args:
          text: str.

        Returns:
          list of str, without [CLS]/[SEP]; an unknown word comes back as "[UNK]".
        """
        return self.ids_to_tokens(self.tokenize([text])[0].numpy())

    def detokenize(self, ids) -> list[str]:
        """[B, L] ids (numpy, tensor, ragged tensor or nested lists) -> B texts.

        Special tokens ([PAD], [UNK], [CLS], [SEP], [MASK]) are dropped, `##` pieces are
        glued to the piece before them, CJK characters are joined to their neighbours
        without a space and all other words are joined with one space.

        What round-trips, `detokenize(tokenizer(text)["token_ids"]) == [text]`, provided
        nothing was truncated and every word is in the vocabulary (no [UNK]):
          * text made of CJK characters and words separated by single spaces, with no
            space next to a CJK character and no punctuation, e.g. "我想退货refund now";
          * with `do_lower_case`, only text already lower-case without accents.
        Punctuation comes back as its own word ("hi, you!" -> "hi , you !"), runs of
        whitespace become one space and leading/trailing whitespace is lost.

        Args:
          ids: int ids of shape [B, L] (np.ndarray, tf.Tensor), or rows of ids of any
            lengths (tf.RaggedTensor [B, (L)], nested lists).

        Returns:
          list of B str.

        Raises:
          ValueError: for a NumPy (or dense tensor) input that is not 2-D, or an id outside
            the vocabulary.
        """
        if isinstance(ids, tf.RaggedTensor):
            rows = ids.to_list()
        elif isinstance(ids, tf.Tensor):
            rows = ids.numpy()
        else:
            rows = ids
        if isinstance(rows, np.ndarray) and rows.ndim != 2:
            raise ValueError(f"detokenize expects ids of shape [B, L], got shape {rows.shape}")
        return [self._detokenize_row(row) for row in rows]

    def _detokenize_row(self, row) -> str:
        words = []
        for token in self.ids_to_tokens(index for index in row if int(index) not in self._special_ids):
            if token.startswith(_SUFFIX) and words:
                words[-1] += token[len(_SUFFIX):]
            else:
                words.append(token)
        text = ""
        for previous, word in zip([None] + words, words):
            if previous is not None and not _is_cjk_char(previous) and not _is_cjk_char(word):
                text += " "
            text += word
        return text


# Above this share of [UNK] among a text's word pieces the vocabulary does not cover the text.
UNKNOWN_WARN_RATE = 0.05


def count_unknown(tokenize, unk_id: int, texts, batch_size: int = 4096) -> tuple[int, int]:
    """([UNK] pieces, word pieces) of `texts` by `tokenize` ([B] strings -> ragged ids): a
    `Tokenizer`'s, or an export's restored one."""
    texts = [text for text in texts if text]
    unknown = pieces = 0
    for start in range(0, len(texts), batch_size):
        flat = tokenize(tf.constant(texts[start:start + batch_size], tf.string)).flat_values.numpy()
        unknown, pieces = unknown + int((flat == unk_id).sum()), pieces + int(flat.size)
    return unknown, pieces


def unknown_share(unknown: int, pieces: int, vocab_file: str, what: str) -> str:
    """One line on the [UNK] share of `what`'s word pieces, logged as a warning above
    `UNKNOWN_WARN_RATE` (the vocabulary does not cover the text's language or script)."""
    share = unknown / pieces if pieces else 0.0
    line = (f"{what}: {unknown:,} of {pieces:,} word pieces ({100 * share:.1f}%) are [UNK] with the vocabulary "
            f"{vocab_file}")
    if share > UNKNOWN_WARN_RATE:
        logging.warning("%s: over %.0f%%, the vocabulary does not cover this text's language or script; the encoder "
                        "reads those words as one token", line, 100 * UNKNOWN_WARN_RATE)
    return line


def count_unknown_pieces(stats, pieces, unk_id: int) -> None:
    """Counts word pieces and [UNK] pieces of a writer's tokenized texts.

    Args:
      stats: a `PrepStats`; its `word_pieces` and `unknown_word_pieces` grow.
      pieces: word-piece ids, any shape.
      unk_id: the vocabulary's [UNK] id.
    """
    pieces = np.asarray(pieces)
    stats.increment("word_pieces", int(pieces.size))
    stats.increment("unknown_word_pieces", int((pieces == unk_id).sum()))


class PieceTable:
    """The word pieces of a set of texts, tokenized once in large batches, packed into record
    rows as `Tokenizer.pack` packs them (`pack`): a writer that uses an utterance many times (a
    negative) tokenizes it once, and one tokenizer call covers thousands of texts.

    Args:
      texts: the texts, repeats allowed; each distinct one is tokenized once.
      tokenizer: a `Tokenizer`.
      stats: a `PrepStats` counting the distinct texts' pieces (`count_unknown_pieces`), or None.
    """

    _BATCH = 4096

    def __init__(self, texts, tokenizer, stats=None):
        # The empty text (a missing context turn) has no pieces: a chunk whose other texts are all
        # known calls no tokenizer, which costs milliseconds a call however few its texts.
        unique = [""] + [text for text in dict.fromkeys(texts) if text]
        self._row_of = {text: row for row, text in enumerate(unique)}
        pieces, counts = [np.zeros(0, np.int32)], [np.zeros(1, np.int64)]
        for start in range(1, len(unique), self._BATCH):
            ragged = tokenizer.tokenize(unique[start:start + self._BATCH])
            pieces.append(ragged.flat_values.numpy().astype(np.int32))
            counts.append(ragged.row_lengths().numpy())
        self._pieces = np.concatenate(pieces)
        self._counts = np.concatenate(counts)
        if stats is not None:
            count_unknown_pieces(stats, self._pieces, tokenizer.unk_id)
        self._starts = np.cumsum(self._counts) - self._counts
        self._cls_id, self._sep_id = tokenizer.cls_id, tokenizer.sep_id

    def __contains__(self, text) -> bool:
        return text in self._row_of

    def __len__(self) -> int:
        return len(self._row_of)

    def pack(self, texts, length: int) -> tuple:
        """Record rows of texts of the table: `[CLS]`, a text's first `length - 2` pieces, `[SEP]`,
        padding.

        Args:
          texts: N texts, each one of the table's.
          length: the row length (max_seq_length).

        Returns:
          (ids, mask, counts): ids and mask [N, length] int64, and counts [N], each text's
          number of pieces before the cut.
        """
        rows = np.array([self._row_of[text] for text in texts], np.int64)
        counts = self._counts[rows]
        kept = np.minimum(counts, length - 2)
        place = np.arange(length - 2)
        inside = place < kept[:, None]
        ids = np.zeros((len(rows), length), np.int64)
        ids[:, 1:length - 1][inside] = self._pieces[(self._starts[rows][:, None] + place)[inside]]
        ids[:, 0] = self._cls_id
        ids[np.arange(len(rows)), kept + 1] = self._sep_id
        mask = (np.arange(length) < kept[:, None] + 2).astype(np.int64)
        return ids, mask, counts


def _check_max_seq_length(max_seq_length) -> None:
    if not isinstance(max_seq_length, (int, np.integer)) or max_seq_length < 2:
        raise ValueError(f"max_seq_length must be an integer >= 2 to hold [CLS] and [SEP], got {max_seq_length!r}")


def _checked_utf8(texts) -> tf.Tensor:
    # Valid UTF-8 transcodes to itself; invalid bytes become U+FFFD and differ.
    valid = tf.equal(tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace"), texts)
    check = tf.debugging.Assert(
        tf.reduce_all(valid),
        ["Tokenizer input is not valid UTF-8; batch indices of the invalid texts:", tf.where(~valid)[:, 0]],
        summarize=10,
    )
    with tf.control_dependencies([check]):
        return tf.identity(texts)


def build_vocab(
    texts: Iterable[str],
    vocab_size: int,
    do_lower_case: bool = True,
    min_count: int = 10,
    max_unique_chars: int | None = None,
    batch_size: int = 1024,
) -> list[str]:
    """Learns a WordPiece vocabulary of at most `vocab_size` tokens from raw texts.

    Uses tensorflow-text's `bert_vocab_from_dataset`, which splits words exactly like
    `Tokenizer(do_lower_case=...)` and then chooses wordpieces by frequency (deterministic:
    ties are broken alphabetically). The result starts with `SPECIAL_TOKENS` (ids 0..4),
    then every kept character and its `##` form, then longer pieces by frequency.

    Args:
      texts: the corpus, one string per item (read once, streamed).
      vocab_size: upper bound on the vocabulary size.
      do_lower_case: must match the `Tokenizer` that will use the vocabulary.
      min_count: the lowest corpus count a multi-character piece needs to be kept.
      max_unique_chars: how many distinct characters (the most frequent) to keep; words
        with other characters are not learned from and will tokenize to [UNK]. Defaults
        to `vocab_size // 2`, since every character costs up to two entries (c and ##c).
        The learner's own default of 1000 is far too few for Chinese text.
      batch_size: texts per tokenization batch while counting words.

    The learner adds a `##` form of every character, but CJK characters and punctuation
    are always words of their own, so the tokenizer can never produce those forms; they
    are removed, which leaves the vocabulary noticeably smaller than `vocab_size` on
    Chinese text.
    """
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    if max_unique_chars is None:
        max_unique_chars = vocab_size // 2
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(texts), output_signature=tf.TensorSpec([], tf.string)
    ).batch(batch_size)
    try:
        vocab = bert_vocab_from_dataset(
            dataset,
            vocab_size=vocab_size,
            reserved_tokens=list(SPECIAL_TOKENS),
            bert_tokenizer_params=_basic_tokenizer_params(do_lower_case),
            learn_params={"lower_thresh": min_count, "max_unique_chars": max_unique_chars},
        )
    except StopIteration:
        # The learner reads its first counted word with next(); no words ends up here.
        raise ValueError("build_vocab: the corpus contains no words") from None
    return [token for token in vocab if not _is_unreachable_suffix(token)]


def _is_unreachable_suffix(token: str) -> bool:
    if not token.startswith(_SUFFIX) or len(token) != len(_SUFFIX) + 1:
        return False
    char = token[-1]
    return _is_cjk_char(char) or _is_punctuation(char)
