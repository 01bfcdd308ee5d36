"""Positive-pair records ("pairs") for DSE (Zhou et al., NAACL 2022, section 3).

`pairing="consecutive"` (DSE): every two adjacent turns (u_i, u_i+1) of a dialogue, the
earlier one first, as the authors' `data/process_pretrain.py` makes them (l.25-29): the
pairs are formed first and then kept only when BOTH sides have more than `min_words` words,
so a short utterance removes its two pairs and its neighbours are not paired with each
other. Pairs are not de-duplicated, and pairs of one dialogue may later share a batch,
as in the release. The pairs of the whole corpus are shuffled with a seed (the release:
`random.seed(24)`, `random.shuffle`, l.8 and 31; here each shard is sorted by a seeded hash of
its pairs, `write_pair_records`), so a training stream's shuffle buffer does not keep a
dialogue's pairs together.

`pairing="self"` (DSE-dropout, i.e. unsupervised SimCSE): each distinct utterance with more
than `min_words` words, paired with itself; the two views then differ only by dropout. The
paper counts "879185 unique sentences" for it (L899), so repeats are dropped here.

The corpus stage before this one merges a speaker's consecutive utterances into one turn
(`--merge_speakers`, on by default, the DialogueCSE paper's preprocessing; the DSE release
pairs TOD-BERT's turns as they are) and applies the format's `--min_turns`; on SGD, whose
speakers alternate, neither changes anything.

Words: the release counts `len(u.split())`, which is meaningless for Chinese, written
without spaces. Here a word is a whitespace-separated run of non-CJK characters, and each
CJK character (BERT's CJK ranges and kana) counts as one word: for English the release's
rule, for Chinese a character count (our choice; the paper has no Chinese corpus).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import ClassVar

import numpy as np
from absl import logging

from dialoguecse_tf.config_fields import field
from dialoguecse_tf.data.preprocessing import PrepStats, cap_text
from dialoguecse_tf.encoder.cjk import BERT_CJK_RANGES, KANA_RANGE, regex_class
from dialoguecse_tf.records.record_type import RecordType
from dialoguecse_tf.records.spec import INT64, FixedFeature, RecordSpec, check_positive_int, write_records_info
from dialoguecse_tf.records.streaming import shard_of, stable_hash

RECORD_TYPE_PAIRS = "pairs"

# Pair (DSE) features: [2, max_seq_length], the anchor in row 0 and its positive in row 1.
PAIR_INPUT_IDS = "pair_input_ids"
PAIR_INPUT_MASK = "pair_input_mask"

PAIRINGS = ("consecutive", "self")


@dataclasses.dataclass(frozen=True)
class PairRecordSpec(RecordSpec):
    """Positive pairs of utterances: ``pair_*`` are ``[2, max_seq_length]``, row 0 the earlier
    utterance and row 1 its positive. ``pairing`` says how the pairs were made:

    * ``"consecutive"``: two adjacent turns of one dialogue (DSE);
    * ``"self"``: an utterance with itself, the two views differing only by dropout (DSE-dropout,
      i.e. unsupervised SimCSE).

    Segment ids are all zero and are not stored.
    """

    record_type: ClassVar[str] = RECORD_TYPE_PAIRS

    max_seq_length: int
    pairing: str = "consecutive"

    def __post_init__(self):
        check_positive_int("PairRecordSpec", "max_seq_length", self.max_seq_length, 1)
        if self.pairing not in PAIRINGS:
            raise ValueError(f"PairRecordSpec.pairing must be one of {PAIRINGS}, got {self.pairing!r}")

    def _features(self) -> tuple[FixedFeature, ...]:
        pair = (2, self.max_seq_length)
        return (FixedFeature(PAIR_INPUT_IDS, INT64, pair), FixedFeature(PAIR_INPUT_MASK, INT64, pair))


DEFAULT_MIN_WORDS = 3
DEFAULT_SHUFFLE_SEED = 24  # the release's


@dataclasses.dataclass(frozen=True)
class PairSettings:
    """Every setting of the pair records' data prep (`create_pair_data.py`'s flags)."""

    max_seq_length: int = field(32, "Tokens per utterance (DSE's released code: 32).")
    pairing: str = field("consecutive", "consecutive: adjacent turns (DSE); self: each distinct utterance with itself "
                         "(DSE-dropout, unsupervised SimCSE).", choices=PAIRINGS)
    min_words: int = field(DEFAULT_MIN_WORDS, "Keep only utterances with more words than this (DSE: 3; a CJK "
                           "character counts as a word).")
    random_seed: int = field(DEFAULT_SHUFFLE_SEED, "Seed of the shuffle of all pairs: shards and their order (DSE's "
                             "release: 24).")
    num_shards: int = field(1, "Number of output files; a pair goes to the one its seeded hash names, and sorting a "
                            "shard holds it in memory.")

_CHUNK = 512
_PROGRESS_EVERY = 50000
_CJK = regex_class(BERT_CJK_RANGES + (KANA_RANGE,))
# A CJK character, or a run of characters that are neither CJK nor whitespace (`\s` is
# exactly `str.isspace`).
_WORD_RE = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")


def has_more_words(text: str, count: int) -> bool:
    """Whether `text` has more than `count` words (module docstring), reading it only up to
    that word: a junk utterance of megabytes costs no more than a sentence."""
    return next(itertools.islice(_WORD_RE.finditer(text), count, None), None) is not None


def consecutive_pairs(key: int, dialogue, min_words: int, max_seq_length: int, stats: PrepStats) -> list:
    """((key, i), (turn i, turn i + 1)) of one dialogue's consecutive pairs whose two sides
    have more than `min_words` words, the texts cut by `cap_text`."""
    texts = [turn.text for turn in dialogue.turns]
    long_enough = [has_more_words(text, min_words) for text in texts]
    texts = [cap_text(text, max_seq_length, stats) if keep else text for text, keep in zip(texts, long_enough)]
    pairs = []
    for i in range(len(texts) - 1):
        if long_enough[i] and long_enough[i + 1]:
            pairs.append(((key, i), (texts[i], texts[i + 1])))
        else:
            stats.drop("pair_with_short_utterance")
    return pairs


def self_candidates(key: int, dialogue, min_words: int, stats: PrepStats) -> list:
    """((key, i), text) of one dialogue's utterances with more than `min_words` words, whole:
    the corpus keeps the first occurrence of each text (`self_pair`)."""
    candidates = []
    for i, turn in enumerate(dialogue.turns):
        if has_more_words(turn.text, min_words):
            candidates.append(((key, i), turn.text))
        else:
            stats.drop("short_utterance")
    return candidates


def self_pair(example_key: tuple, text: str, max_seq_length: int, stats: PrepStats) -> tuple:
    """The self pair of an utterance's first occurrence, cut by `cap_text`."""
    text = cap_text(text, max_seq_length, stats)
    return example_key, (text, text)


def keyed_pairs(keyed, pairing: str, min_words: int, stats: PrepStats, max_seq_length: int):
    """(example key, (first, second)) of the positive pairs of (key, dialogue) pairs, in corpus
    order. Self pairs keep each text's first occurrence, with a set of the distinct texts seen."""
    if pairing not in PAIRINGS:
        raise ValueError(f"pairing must be one of {PAIRINGS}, got {pairing!r}")
    seen = set()
    for key, dialogue in keyed:
        if pairing == "consecutive":
            yield from consecutive_pairs(key, dialogue, min_words, max_seq_length, stats)
            continue
        for example_key, text in self_candidates(key, dialogue, min_words, stats):
            if text in seen:
                stats.drop("repeated_utterance")
            else:
                seen.add(text)
                yield self_pair(example_key, text, max_seq_length, stats)


def iter_pairs(dialogues, pairing: str, min_words: int, stats: PrepStats, max_seq_length: int):
    """(first, second) texts of the positive pairs of `dialogues`, in corpus order.

    The word count and the repeat check read each utterance whole; the texts yielded are then
    cut by `cap_text` for `max_seq_length`, which a record never notices (it keeps the first
    max_seq_length - 2 pieces).
    """
    return (pair for _, pair in keyed_pairs(enumerate(dialogues), pairing, min_words, stats, max_seq_length))


def pair_order(random_seed: int, example_key: tuple) -> int:
    """A pair's place in its shard: shards are sorted by this seeded hash."""
    return stable_hash(random_seed, RECORD_TYPE_PAIRS, "order", *example_key)


def encode_pairs(pairs, tokenizer, spec: PairRecordSpec, stats: PrepStats) -> dict:
    """The features of a chunk of pairs, each ``[len(pairs), 2, max_seq_length]``; each distinct
    text tokenized once."""
    from dialoguecse_tf.encoder.tokenization import PieceTable

    texts = [text for pair in pairs for text in pair]
    length = spec.max_seq_length
    ids, mask, word_pieces = PieceTable(texts, tokenizer, stats).pack(texts, length)
    stats.increment("tokens_truncated", int(np.maximum(word_pieces - (length - 2), 0).sum()))
    return {PAIR_INPUT_IDS: ids.reshape(len(pairs), 2, length), PAIR_INPUT_MASK: mask.reshape(len(pairs), 2, length)}


def serialize_pairs(keyed, tokenizer, spec: PairRecordSpec, random_seed: int, num_shards: int,
                    stats: PrepStats) -> list:
    """(shard, order, serialized record) of a chunk of (example key, pair)."""
    records = spec.serialize_batch(encode_pairs([pair for _, pair in keyed], tokenizer, spec, stats))
    return [(shard_of(random_seed, RECORD_TYPE_PAIRS, example_key, num_shards), pair_order(random_seed, example_key),
             record) for (example_key, _), record in zip(keyed, records)]


def write_pair_records(dialogues, tokenizer, output_dir: str, spec: PairRecordSpec,
                       min_words: int = DEFAULT_MIN_WORDS, num_shards: int = 1, stats: PrepStats | None = None,
                       random_seed: int = DEFAULT_SHUFFLE_SEED) -> PrepStats:
    """Writes the pairs as sharded records (`pairs-*.tfrecord`) and `records_info.json` into
    `output_dir`, streaming the corpus.

    A pair goes to the shard its seeded hash names (`streaming.shard_of`), and each shard is
    sorted by another seeded hash of the pair (`pair_order`): a shuffle of the pairs with
    `random_seed`, as the release shuffles them (with `random.shuffle`, another order), that the
    Beam pipeline writes identically. Sorting holds one shard's records in memory
    (`shards.OrderedShardWriter`): a big corpus wants enough shards.

    Args:
      dialogues: the corpus: a `source.DialogueSource` (read once), or dialogues.
      tokenizer: the `Tokenizer` of the encoder to train.
      output_dir: the records' folder.
      spec: the records' spec: the pairing and the row length.
      min_words: a pair's sides (a self pair's utterance) need more words than this.
      num_shards: the number of shard files.
      stats: the `PrepStats` to count into; a new one if None.
      random_seed: the seed of the shards and of their order.

    Returns:
      The stats: `samples_written`, the pairs dropped by reason (`pair_with_short_utterance`,
      `short_utterance`, `repeated_utterance`), the texts cut (`utterances_capped`,
      `tokens_truncated`) and the word pieces (`word_pieces`, `unknown_word_pieces`).
    """
    from dialoguecse_tf.records.shards import OrderedShardWriter

    stats = stats if stats is not None else PrepStats()
    keyed = dialogues.keyed() if hasattr(dialogues, "keyed") else enumerate(dialogues)
    with OrderedShardWriter(PAIRS.shard_prefix(output_dir), num_shards) as writer:
        chunk = []
        for item in keyed_pairs(keyed, spec.pairing, min_words, stats, spec.max_seq_length):
            chunk.append(item)
            if len(chunk) == _CHUNK:
                _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats)
                chunk = []
        if chunk:
            _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats)
        if writer.num_written == 0:
            raise ValueError(f"no {spec.pairing} pair with more than {min_words} words per side in the input "
                             "dialogues")
    stats.increment("samples_written", writer.num_written)
    write_records_info(output_dir, spec, PAIRS.records_info(stats, {"min_words": min_words,
                                                                    "random_seed": random_seed}))
    logging.info("[pairs] %d %s pairs -> %s", writer.num_written, spec.pairing, output_dir)
    return stats


def _write_chunk(writer, chunk, tokenizer, spec, random_seed, stats):
    before = writer.num_written
    for shard, order, record in serialize_pairs(chunk, tokenizer, spec, random_seed, writer.num_shards, stats):
        writer.write(record, shard, order)
    if writer.num_written // _PROGRESS_EVERY > before // _PROGRESS_EVERY:
        logging.info("[pairs] %d pairs written", writer.num_written)


PAIRS = RecordType(
    name=RECORD_TYPE_PAIRS,
    spec_class=PairRecordSpec,
    settings_class=PairSettings,
    write=write_pair_records,
    entry_point="data_prep/create_pair_data.py",
    tool="pair_records",
    tool_version=2,
    info_arguments=(("min_words", "min_words"), ("shuffle_seed", "random_seed")),
    beam_builder="dialoguecse_tf.records.beam_pipeline:pair_pipeline",
    beam_shard_order="sorted",
)
