"""MLM continued-pretraining records ("mlm"): dialogues are documents, utterances are sentences.

``MlmRecordSpec`` is Google BERT's exact pretraining schema, so the shards are also readable
by Google's ``run_pretraining.py`` and the TF Model Garden BERT pretraining loader.

Candidate utterances that are no dialogue's turn become documents too (`keyed_documents`), so
the records cover every distinct utterance of the input.

Instance packing and masking are Google's own: tf-models-official's
`create_pretraining_data.create_instances_from_document` (segment pairs filled up to
`max_seq_length`, `short_seq_prob`, `truncate_seq_pair`, 80/10/10 masking) is called on every
document. Two things are this project's: the tokenization, so the ids match the tokenizer the
later stages use in-graph, and where a random next segment comes from. Google draws it from any
document of the whole corpus, which it holds in memory; here it comes from the documents of a
bounded, seeded sample of dialogues (`RandomNextPool`, all of them in a smaller corpus), so that
the corpus is streamed and every Beam worker draws the same. A draw of the document itself is
redrawn up to 10 times, as Google does.

The corpus is read twice, as the other record types read it (`streaming`): a first pass
(`scan_corpus`) finds which texts are some dialogue's turn and samples the pool; the second
writes each document's records (`serialize_documents`), with an RNG of its own per round of
`dupe_factor` (`streaming.example_rng`), each record into the shard its seeded hash names, every
shard round by round (`RoundShardWriter`), in corpus order within a round. The Beam pipeline
(`beam_pipeline`) calls the same functions and writes the same records.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from typing import ClassVar

import numpy as np
from absl import flags, logging

from dialoguecse_tf.config_fields import field
from dialoguecse_tf.data.preprocessing import PrepStats, cap_text
from dialoguecse_tf.records.record_type import RecordType
from dialoguecse_tf.records.spec import FLOAT32, INT64, FixedFeature, RecordSpec, check_positive_int, write_records_info
from dialoguecse_tf.records.streaming import (DEFAULT_RANDOM_NEXT_POOL_SIZE, BottomK, example_rng, keyed_dialogues,
                                              shard_of, stable_hash, text_digest)

RECORD_TYPE_MLM = "mlm"

# Google BERT pretraining features (names and types must not change).
INPUT_IDS = "input_ids"
INPUT_MASK = "input_mask"
SEGMENT_IDS = "segment_ids"
MASKED_LM_POSITIONS = "masked_lm_positions"
MASKED_LM_IDS = "masked_lm_ids"
MASKED_LM_WEIGHTS = "masked_lm_weights"
NEXT_SENTENCE_LABELS = "next_sentence_labels"


@dataclasses.dataclass(frozen=True)
class MlmRecordSpec(RecordSpec):
    """Masked-LM pretraining records in Google BERT's schema.

    ``next_sentence_labels`` is always written, so that BERT's readers, which require it, accept
    the records: the writer gives Google's random-next label of each instance, and an example
    passed without one gets ``[0]``; ``parse`` ignores it (no stage trains a next-sentence task).
    """

    record_type: ClassVar[str] = RECORD_TYPE_MLM

    max_seq_length: int
    max_predictions_per_seq: int

    def __post_init__(self):
        check_positive_int("MlmRecordSpec", "max_seq_length", self.max_seq_length, 1)
        check_positive_int("MlmRecordSpec", "max_predictions_per_seq", self.max_predictions_per_seq, 1)

    def _features(self) -> tuple[FixedFeature, ...]:
        seq = (self.max_seq_length,)
        preds = (self.max_predictions_per_seq,)
        return (
            FixedFeature(INPUT_IDS, INT64, seq),
            FixedFeature(INPUT_MASK, INT64, seq),
            FixedFeature(SEGMENT_IDS, INT64, seq),
            FixedFeature(MASKED_LM_POSITIONS, INT64, preds),
            FixedFeature(MASKED_LM_IDS, INT64, preds),
            FixedFeature(MASKED_LM_WEIGHTS, FLOAT32, preds),
        )

    def _constant_features(self) -> dict[str, int]:
        return {NEXT_SENTENCE_LABELS: 0}


TURNS, CANDIDATES = 0, 1  # a document key is (dialogue key, one of these)
_TOKENIZE_BATCH = 1024
_CHUNK = 256  # documents per tokenizer call and serialize_batch of the single-process writer
_PROGRESS_EVERY = 10000


@dataclasses.dataclass(frozen=True)
class MlmSettings:
    """Every setting of the MLM records' data prep (`create_pretraining_data.py`'s flags): the
    spec's and the writer's."""

    max_seq_length: int = field(50, "Tokens per record (paper: 50 for ECD/MDC, 100 for JDDC).")
    max_predictions_per_seq: int = field(10, "Most masked positions per record (paper: 10).")
    masked_lm_prob: float = field(0.15, "Fraction of tokens masked (paper: 0.15).")
    dupe_factor: int = field(1, "How many times the corpus is masked, with different masks.")
    short_seq_prob: float = field(0.1, "Probability of a shorter-than-maximum record (BERT's default).")
    random_seed: int = field(12345, "Seed of the packing, the masking, the random next segments and the shards.")
    num_shards: int = field(1, "Number of output files; a record goes to the one its seeded hash names.")
    random_next_pool_size: int = field(DEFAULT_RANDOM_NEXT_POOL_SIZE, "Random next segments come from the documents "
                                       "of a seeded sample of this many dialogues (all of them in a smaller corpus), "
                                       "which bounds the memory of a corpus of any size.")

    def __post_init__(self):
        if not 0.0 < self.masked_lm_prob < 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1), got {self.masked_lm_prob}")
        check_positive_int("MlmSettings", "dupe_factor", self.dupe_factor, 1)
        check_positive_int("MlmSettings", "num_shards", self.num_shards, 1)
        check_positive_int("MlmSettings", "random_next_pool_size", self.random_next_pool_size, 1)


@functools.cache
def _bert_tools():
    """Imports Google's instance builder without letting it touch our command-line flags.

    The module defines absl flags (`max_seq_length`, `input_file`, ...) at import time,
    which would collide with the entry points' flags of the same names; its definitions
    are sent to a scratch registry instead, whatever the import order. It is imported on first
    use: the models and objectives import this module for the spec alone.
    """
    name = "official.nlp.data.create_pretraining_data"
    if name in sys.modules:
        return sys.modules[name]
    scratch = flags.FlagValues()
    originals = {attr: getattr(flags, attr) for attr in dir(flags) if attr.startswith("DEFINE")}
    try:
        for attr, define in originals.items():
            setattr(flags, attr, functools.partial(define, flag_values=scratch))
        return importlib.import_module(name)
    finally:
        for attr, define in originals.items():
            setattr(flags, attr, define)


def turn_digests(dialogue) -> set:
    return {text_digest(turn.text) for turn in dialogue.turns}


def candidate_entries(dialogue) -> list:
    """(digest, position, text) of each distinct candidate of a dialogue, in list order.

    Candidate lists (the authors' format, JSON Lines with candidates) hold real utterances
    sampled from other dialogues; in the authors' ECD sample most of them are no turn of any
    line, and would otherwise never be seen."""
    entries, seen = [], set()
    for position, text in enumerate(dialogue.candidates or ()):
        digest = text_digest(text)
        if digest not in seen:
            seen.add(digest)
            entries.append((digest, position, text))
    return entries


def turn_document(key: int, dialogue) -> tuple:
    """A dialogue's document of its turns, in order (a text repeated across dialogues stays in
    each: it is context there)."""
    return (key, TURNS), [turn.text for turn in dialogue.turns]


def candidate_document(owned) -> list:
    """The texts of a dialogue's candidate document from its (position, text) of the candidates
    it owns: those no dialogue holds as a turn, of which it is the first holder (the smallest
    key). Such a document packs into full sequences like a dialogue does; its utterances are
    unrelated, which only the next-sentence labels would notice, and this project's MLM stage
    trains no next-sentence task."""
    return [text for _, text in sorted(owned)]


def keyed_documents(keyed, turns: set):
    """(document key, texts) of every document of one pass over (key, dialogue) pairs, in corpus
    order: a dialogue's turns, then its candidate document if it owns a candidate
    (`candidate_document`; `turns`: the digests of every turn text, from `scan_corpus`). A set
    of the digests of the candidates taken so far finds the first holders: keys increase in
    pass order (`streaming.keyed_dialogues`)."""
    taken = set()
    for key, dialogue in keyed:
        yield turn_document(key, dialogue)
        owned = []
        for digest, position, text in candidate_entries(dialogue):
            if digest not in turns and digest not in taken:
                taken.add(digest)
                owned.append((position, text))
        if owned:
            yield (key, CANDIDATES), candidate_document(owned)


def pool_item(key: int, dialogue, random_seed: int) -> tuple:
    """(hash, key, turn texts) of a dialogue: the pool samples dialogues by the smallest hashes."""
    return stable_hash(random_seed, RECORD_TYPE_MLM, "pool", key), key, [turn.text for turn in dialogue.turns]


def pool_documents(items, candidate_documents: dict) -> list:
    """(document key, texts) of the sampled dialogues' documents from their `pool_item`s, sorted,
    and the candidate documents of those that have one."""
    documents = []
    for _, key, texts, *_ in items:
        documents.append(((key, TURNS), texts))
        if key in candidate_documents:
            documents.append(((key, CANDIDATES), candidate_documents[key]))
    return documents


@dataclasses.dataclass
class CorpusScan:
    """What the single-process writer's first pass finds: the digest of every turn text, how many
    distinct candidate texts are no turn, and the pool's documents."""

    turns: set
    candidate_only: int
    pool_documents: list


def scan_corpus(keyed, random_seed: int, pool_size: int) -> CorpusScan:
    """The first pass of the single-process writer over (key, dialogue) pairs.

    Memory: a set of the 128-bit digests of the distinct turn texts and one of the distinct
    candidate texts (about 100 bytes a text: 1 GB for 10M distinct utterances; the records pass
    keeps the first and the digests of the candidates taken), and the texts of the pool's
    `pool_size` dialogues, with the candidates each was the first to hold (whether they are
    some turn is known only at the end).
    """
    turns, candidates = set(), set()
    sample = BottomK(pool_size)
    for key, dialogue in keyed:
        turns.update(turn_digests(dialogue))
        entries = candidate_entries(dialogue)
        first_held = [entry for entry in entries if entry[0] not in candidates]
        candidates.update(digest for digest, _, _ in entries)
        sample.add((*pool_item(key, dialogue, random_seed), first_held))
    items = sample.items()
    owned = {}
    for _, key, _, first_held in items:
        texts = candidate_document([(position, text) for digest, position, text in first_held if digest not in turns])
        if texts:
            owned[key] = texts
    return CorpusScan(turns, sum(digest not in turns for digest in candidates), pool_documents(items, owned))


def utterance_stats(turn_utterances: int, candidate_only_utterances: int, candidate_documents: int) -> PrepStats:
    """mlm_distinct_utterances (distinct texts in all documents), mlm_turn_utterances (distinct
    turn texts), mlm_candidate_only_utterances (the rest), mlm_candidate_documents."""
    stats = PrepStats()
    stats.increment("mlm_distinct_utterances", turn_utterances + candidate_only_utterances)
    stats.increment("mlm_turn_utterances", turn_utterances)
    stats.increment("mlm_candidate_only_utterances", candidate_only_utterances)
    stats.increment("mlm_candidate_documents", candidate_documents)
    return stats


def document_pieces(documents, tokenizer, max_seq_length: int, stats: PrepStats) -> list:
    """The word-piece ids (int32 arrays) of each document's utterances, over-long ones cut.

    An utterance keeps its first `max_seq_length - 3` pieces, room for [CLS] and two [SEP]s,
    and Google's packing only ever sees those (its `truncate_seq_pair`, which cuts a segment at
    the front or the back at random, works on these lists), so each text is first cut by
    `cap_text` (after the texts were compared whole), which leaves every record unchanged.
    An utterance with no piece left (counted as "utterances_without_tokens") is left out.
    """
    from dialoguecse_tf.encoder.tokenization import count_unknown_pieces

    texts = [cap_text(text, max_seq_length, stats) for document in documents for text in document]
    flat, lengths = [np.zeros(0, np.int32)], [np.zeros(0, np.int64)]
    for start in range(0, len(texts), _TOKENIZE_BATCH):
        ragged = tokenizer.tokenize(texts[start:start + _TOKENIZE_BATCH])
        flat.append(ragged.flat_values.numpy().astype(np.int32))
        lengths.append(ragged.row_lengths().numpy())
    flat, lengths = np.concatenate(flat), np.concatenate(lengths)
    count_unknown_pieces(stats, flat, tokenizer.unk_id)
    kept = np.minimum(lengths, max(max_seq_length - 3, 0))
    stats.increment("tokens_truncated", int((lengths - kept).sum()))
    stats.increment("utterances_without_tokens", int((kept == 0).sum()))
    starts, kept = (np.cumsum(lengths) - lengths).tolist(), kept.tolist()
    pieces, index = [], 0
    for document in documents:
        rows = range(index, index + len(document))
        pieces.append([flat[starts[row]:starts[row] + kept[row]] for row in rows if kept[row]])
        index += len(document)
    return pieces


class RandomNextPool:
    """The documents random next segments are drawn from: those of the `random_next_pool_size`
    dialogues of smallest seeded hash (`pool_item`), in hash order, all of them in a smaller
    corpus; documents with no word piece are left out. Memory: 4 bytes a word piece, a few
    hundred MB at the default size for dialogues with long candidate lists.

    Google's `create_instances_from_document` reads `all_documents` by length and index only;
    `documents_with` gives it the document being packed at index 0 and the pool's other
    documents after it, so its draw is uniform over the others and a draw of the document itself
    is redrawn, up to 10 times, as it is over the whole corpus.
    """

    def __init__(self, documents, tokenizer, max_seq_length: int):
        scratch = PrepStats()  # the records pass counts the cuts
        pieces = document_pieces([texts for _, texts in documents], tokenizer, max_seq_length, scratch)
        kept = [(key, document) for (key, _), document in zip(documents, pieces) if document]
        if len(kept) < 2:
            raise ValueError(f"MLM records need at least 2 documents with word pieces to draw random next segments "
                             f"from (a bigger random_next_pool_size samples more dialogues), got {len(kept)}")
        self._index = {key: index for index, (key, _) in enumerate(kept)}
        utterances = [utterance for _, document in kept for utterance in document]
        self._ids = np.concatenate(utterances)
        self._utterance_starts = np.cumsum([0] + [len(utterance) for utterance in utterances])
        self._document_starts = np.cumsum([0] + [len(document) for _, document in kept])
        self._words = tokenizer.vocab

    def __len__(self) -> int:
        return len(self._index)

    def documents_with(self, key: tuple, document: list) -> "_Documents":
        return _Documents(document, self, self._index.get(key))

    def utterance_count(self, index: int) -> int:
        return int(self._document_starts[index + 1] - self._document_starts[index])

    def utterance(self, index: int, position: int) -> list:
        """The word pieces of an utterance of the `index`-th document."""
        row = self._document_starts[index] + position
        start, end = self._utterance_starts[row:row + 2]
        return [self._words[i] for i in self._ids[start:end].tolist()]


class _Documents:
    """A document at index 0, then every other document of a pool: Google's `all_documents`."""

    def __init__(self, document: list, pool: RandomNextPool, own: int | None):
        self._document = document
        self._pool = pool
        self._own = own

    def __len__(self) -> int:
        return 1 + len(self._pool) - (self._own is not None)

    def __getitem__(self, index: int):
        if index == 0:
            return self._document
        index -= 1
        if self._own is not None and index >= self._own:
            index += 1
        return _PoolDocument(self._pool, index)


class _PoolDocument:
    """A pool document as Google reads one: its length and its utterances' pieces by position."""

    def __init__(self, pool: RandomNextPool, index: int):
        self._pool = pool
        self._index = index

    def __len__(self) -> int:
        return self._pool.utterance_count(self._index)

    def __getitem__(self, position: int) -> list:
        return self._pool.utterance(self._index, position)


def document_instances(key: tuple, document: list, pool: RandomNextPool, words: list, spec: MlmRecordSpec,
                       settings: MlmSettings, sample_round: int) -> list:
    """Google's training instances of one document (its utterances' word pieces) in one round,
    from the document's own RNG for that round."""
    rng = example_rng(settings.random_seed, RECORD_TYPE_MLM, *key, sample_round)
    return _bert_tools().create_instances_from_document(
        pool.documents_with(key, document), 0, spec.max_seq_length, settings.short_seq_prob,
        settings.masked_lm_prob, spec.max_predictions_per_seq, words, rng,
    )


def serialize_documents(keyed, tokenizer, pool: RandomNextPool, spec: MlmRecordSpec, settings: MlmSettings,
                        stats: PrepStats) -> list:
    """(shard, round, serialized record) of a chunk of (document key, texts): every document's
    instances of every round, document by document. A record's shard is the seeded hash of
    (document key, round, instance index)."""
    pieces = document_pieces([texts for _, texts in keyed], tokenizer, spec.max_seq_length, stats)
    words = tokenizer.vocab
    # A plain dict: the tokenizer's is wrapped for tf.Module tracking, slow to read per token.
    token_to_id = {token: index for index, token in enumerate(words)}
    example_keys, examples = [], []
    for (key, _), document in zip(keyed, pieces):
        if not document:
            continue
        document = [[words[i] for i in utterance.tolist()] for utterance in document]
        for sample_round in range(settings.dupe_factor):
            for index, instance in enumerate(document_instances(key, document, pool, words, spec, settings,
                                                                sample_round)):
                example_keys.append((*key, sample_round, index))
                examples.append(_to_features(instance, token_to_id, tokenizer.unk_id, spec))
    if not examples:
        return []
    stats.increment("masked_tokens", int(sum(example[MASKED_LM_WEIGHTS].sum() for example in examples)))
    records = spec.serialize_batch({name: np.stack([example[name] for example in examples]) for name in examples[0]})
    return [(shard_of(settings.random_seed, RECORD_TYPE_MLM, example_key, settings.num_shards), example_key[2], record)
            for example_key, record in zip(example_keys, records)]


def _to_features(instance, token_to_id: dict, unk_id: int, spec: MlmRecordSpec) -> dict:
    length, predictions = spec.max_seq_length, spec.max_predictions_per_seq
    input_ids = np.zeros(length, np.int64)
    input_mask = np.zeros(length, np.int64)
    segment_ids = np.zeros(length, np.int64)
    ids = [token_to_id.get(token, unk_id) for token in instance.tokens]
    input_ids[: len(ids)] = ids
    input_mask[: len(ids)] = 1
    segment_ids[: len(ids)] = instance.segment_ids
    positions = np.zeros(predictions, np.int64)
    label_ids = np.zeros(predictions, np.int64)
    weights = np.zeros(predictions, np.float32)
    count = len(instance.masked_lm_positions)
    positions[:count] = instance.masked_lm_positions
    label_ids[:count] = [token_to_id.get(token, unk_id) for token in instance.masked_lm_labels]
    weights[:count] = 1.0
    return {
        INPUT_IDS: input_ids,
        INPUT_MASK: input_mask,
        SEGMENT_IDS: segment_ids,
        MASKED_LM_POSITIONS: positions,
        MASKED_LM_IDS: label_ids,
        MASKED_LM_WEIGHTS: weights,
        NEXT_SENTENCE_LABELS: np.array([int(instance.is_random_next)], np.int64),
    }


def write_mlm_records(
    dialogues,
    tokenizer,
    output_dir: str,
    spec: MlmRecordSpec,
    masked_lm_prob: float = 0.15,
    dupe_factor: int = 1,
    short_seq_prob: float = 0.1,
    random_seed: int = 12345,
    num_shards: int = 1,
    stats: PrepStats | None = None,
    random_next_pool_size: int = DEFAULT_RANDOM_NEXT_POOL_SIZE,
) -> PrepStats:
    """Writes sharded MLM records (`mlm-*.tfrecord`) and `records_info.json` into `output_dir`,
    streaming the corpus.

    `dialogues` is read twice (`streaming.keyed_dialogues`): once for `scan_corpus` (the
    distinct texts' digests and the random-next pool), once for the records, a chunk of
    documents at a time. Each document is packed and masked `dupe_factor` times, each round from
    its own RNG; a record goes to the shard its seeded hash names, and each shard holds its
    records round by round (`RoundShardWriter`), in corpus order within a round.

    Args:
      dialogues: the corpus, read twice: a `source.DialogueSource`, or a list of dialogues.
      tokenizer: the `Tokenizer` of the model to pretrain.
      output_dir: the records' folder.
      spec: the records' spec: sequence length and masked positions.
      masked_lm_prob: the share of tokens masked, in (0, 1).
      dupe_factor: how many times each document is packed and masked.
      short_seq_prob: the probability of a shorter-than-maximum record (Google's).
      random_seed: the seed of the packing, the masking, the random next segments and the shards.
      num_shards: the number of shard files.
      stats: the `PrepStats` to count into; a new one if None.
      random_next_pool_size: how many dialogues the random next segments are drawn from.

    Returns:
      The stats: `samples_written`, `masked_tokens`, the distinct utterances
      (`mlm_distinct_utterances`, `mlm_turn_utterances`, `mlm_candidate_only_utterances`),
      `mlm_candidate_documents`, the texts cut (`utterances_capped`, `tokens_truncated`,
      `utterances_without_tokens`) and the word pieces (`word_pieces`, `unknown_word_pieces`).
    """
    from dialoguecse_tf.records.shards import RoundShardWriter

    settings = MlmSettings(spec.max_seq_length, spec.max_predictions_per_seq, masked_lm_prob, dupe_factor,
                           short_seq_prob, random_seed, num_shards, random_next_pool_size)
    stats = stats if stats is not None else PrepStats()
    scan = scan_corpus(keyed_dialogues(dialogues), random_seed, random_next_pool_size)
    pool = RandomNextPool(scan.pool_documents, tokenizer, spec.max_seq_length)
    candidate_documents = 0
    with RoundShardWriter(MLM.shard_prefix(output_dir), num_shards, dupe_factor) as writer:
        chunk = []
        for document in keyed_documents(keyed_dialogues(dialogues), scan.turns):
            candidate_documents += document[0][1] == CANDIDATES
            chunk.append(document)
            if len(chunk) == _CHUNK:
                _write_chunk(writer, chunk, tokenizer, pool, spec, settings, stats)
                chunk = []
        if chunk:
            _write_chunk(writer, chunk, tokenizer, pool, spec, settings, stats)
    stats.merge(utterance_stats(len(scan.turns), scan.candidate_only, candidate_documents))
    stats.increment("samples_written", writer.num_written)
    write_records_info(output_dir, spec, MLM.records_info(stats, {}))
    logging.info("[mlm] %d records, %d masked tokens -> %s", writer.num_written, stats["masked_tokens"], output_dir)
    return stats


def _write_chunk(writer, chunk, tokenizer, pool, spec, settings, stats):
    before = writer.num_written
    for shard, sample_round, record in serialize_documents(chunk, tokenizer, pool, spec, settings, stats):
        writer.write(record, shard, sample_round)
    if writer.num_written // _PROGRESS_EVERY > before // _PROGRESS_EVERY:
        logging.info("[mlm] %d records written", writer.num_written)


MLM = RecordType(
    name=RECORD_TYPE_MLM,
    spec_class=MlmRecordSpec,
    settings_class=MlmSettings,
    write=write_mlm_records,
    entry_point="data_prep/create_pretraining_data.py",
    tool="mlm_records",
    tool_version=2,
    beam_builder="dialoguecse_tf.records.beam_pipeline:mlm_pipeline",
    beam_shard_order="rounds",
)
