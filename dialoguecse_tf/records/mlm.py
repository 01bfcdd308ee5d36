"""MLM continued-pretraining records ("mlm"): dialogues are documents, utterances are sentences.

``MlmRecordSpec`` is Google BERT's exact pretraining schema, so the shards are also readable
by Google's ``run_pretraining.py`` and the TF Model Garden BERT pretraining loader.

Candidate utterances that are no dialogue's turn become documents too (`document_texts`), so
the records cover every distinct utterance of the input.

Instance packing and masking are Google's own, taken from tf-models-official's
`create_pretraining_data` (segment pairs filled up to `max_seq_length`, 80/10/10 masking,
`short_seq_prob`); only the tokenization is this project's, so the ids match the tokenizer
the later stages use in-graph.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
import os
import random
import sys
from typing import ClassVar

import numpy as np
import tensorflow as tf
from absl import flags

from dialoguecse_tf.data.preprocessing import PrepStats, cap_text
from dialoguecse_tf.records.common import (FixedFeature, RecordSpec, ShardedRecordWriter, check_positive_int,
                                           write_records_info)

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

    ``next_sentence_labels`` is always written as ``[0]`` so BERT's readers,
    which require it, accept the records; ``parse`` ignores it.
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
            FixedFeature(INPUT_IDS, tf.int64, seq),
            FixedFeature(INPUT_MASK, tf.int64, seq),
            FixedFeature(SEGMENT_IDS, tf.int64, seq),
            FixedFeature(MASKED_LM_POSITIONS, tf.int64, preds),
            FixedFeature(MASKED_LM_IDS, tf.int64, preds),
            FixedFeature(MASKED_LM_WEIGHTS, tf.float32, preds),
        )

    def _constant_features(self) -> dict[str, tf.train.Feature]:
        return {NEXT_SENTENCE_LABELS: tf.train.Feature(int64_list=tf.train.Int64List(value=[0]))}


_TOKENIZE_BATCH = 1024
_SERIALIZE_BATCH = 1024
_PROGRESS_EVERY = 10000


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


def tokenize_texts(tokenizer, texts) -> list:
    """Word-piece strings of each text, tokenized in batches through the in-graph tokenizer."""
    vocab = tokenizer.vocab
    result = []
    for start in range(0, len(texts), _TOKENIZE_BATCH):
        ragged = tokenizer.tokenize(list(texts[start:start + _TOKENIZE_BATCH]))
        result.extend([vocab[i] for i in row] for row in ragged.to_list())
    return result


def document_texts(dialogues, stats: PrepStats) -> list:
    """The MLM documents as texts: every dialogue's turns, then the candidates no turn holds.

    Each dialogue is a document of its turns in order (a text repeated across dialogues stays
    in each: it is context there). Candidate lists (the authors' format, JSON Lines with
    candidates) hold real utterances sampled from other dialogues; in the authors' ECD sample
    most of them are no turn of any line, and would otherwise never be seen. So the candidates of
    a dialogue that are no turn anywhere and not taken yet form one more document after it:
    every distinct utterance of the input is then in some document, and such a document packs
    into full sequences like a dialogue does. Its utterances are unrelated, which only the
    next-sentence labels would notice; this project's MLM stage trains no next-sentence task.

    Counts: mlm_distinct_utterances (distinct texts in all documents), mlm_turn_utterances
    (distinct turn texts), mlm_candidate_only_utterances (the rest), mlm_candidate_documents.
    """
    dialogues = list(dialogues)
    turn_texts = {turn.text for dialogue in dialogues for turn in dialogue.turns}
    taken = set(turn_texts)
    documents = []
    candidate_documents = 0
    for dialogue in dialogues:
        documents.append([turn.text for turn in dialogue.turns])
        extra = []
        for candidate in dialogue.candidates or ():
            if candidate not in taken:
                taken.add(candidate)
                extra.append(candidate)
        if extra:
            documents.append(extra)
            candidate_documents += 1
    stats.increment("mlm_distinct_utterances", len(taken))
    stats.increment("mlm_turn_utterances", len(turn_texts))
    stats.increment("mlm_candidate_only_utterances", len(taken) - len(turn_texts))
    stats.increment("mlm_candidate_documents", candidate_documents)
    return documents


def build_documents(dialogues, tokenizer, max_seq_length: int, stats: PrepStats) -> list:
    """`document_texts` as utterance token lists, over-long utterances cut.

    An utterance keeps its first `max_seq_length - 3` pieces, and Google's packing only ever
    sees those (its `truncate_seq_pair`, which cuts a segment at the front or the back at
    random, works on these lists), so each text is first cut by `cap_text` (after
    `document_texts` has compared the whole texts), which leaves every record unchanged.
    An utterance with no token left (counted as "utterances_without_tokens") is left out.
    """
    texts = document_texts(dialogues, stats)
    tokens = iter(tokenize_texts(tokenizer, [cap_text(text, max_seq_length, stats)
                                             for document in texts for text in document]))
    # Google's packing needs room for [CLS] and two [SEP]s around one utterance.
    limit = max_seq_length - 3
    documents = []
    for text_document in texts:
        document = []
        for _ in text_document:
            utterance = next(tokens)
            if len(utterance) > limit:
                stats.increment("tokens_truncated", len(utterance) - limit)
                utterance = utterance[:limit]
            if utterance:
                document.append(utterance)
            else:
                stats.increment("utterances_without_tokens")
        if document:
            documents.append(document)
    return documents


def create_mlm_examples(
    documents,
    tokenizer,
    spec: MlmRecordSpec,
    masked_lm_prob: float,
    dupe_factor: int,
    short_seq_prob: float,
    random_seed: int,
):
    """Yields feature dicts for `spec.serialize`, deterministic for a seed."""
    if not 0.0 < masked_lm_prob < 1.0:
        raise ValueError(f"masked_lm_prob must be in (0, 1), got {masked_lm_prob}")
    if dupe_factor < 1:
        raise ValueError(f"dupe_factor must be at least 1, got {dupe_factor}")
    if len(documents) < 2:
        raise ValueError(
            f"MLM records need at least 2 non-empty dialogues (random next segments come "
            f"from another dialogue), got {len(documents)}"
        )
    rng = random.Random(random_seed)
    documents = list(documents)
    rng.shuffle(documents)
    vocab_words = list(tokenizer.vocab)
    # A plain dict: the tokenizer's own is wrapped for tf.Module tracking, slow to read per token.
    token_to_id = {token: index for index, token in enumerate(vocab_words)}
    length, predictions = spec.max_seq_length, spec.max_predictions_per_seq
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            instances = _bert_tools().create_instances_from_document(
                documents, index, length, short_seq_prob, masked_lm_prob,
                predictions, vocab_words, rng,
            )
            for instance in instances:
                yield _to_features(instance, token_to_id, tokenizer.unk_id, length, predictions)


def _to_features(instance, token_to_id: dict, unk_id: int, length: int, predictions: int) -> dict:
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
    log=print,
) -> PrepStats:
    """Writes sharded MLM records and `records_info.json` into `output_dir`."""
    stats = stats if stats is not None else PrepStats()
    documents = build_documents(dialogues, tokenizer, spec.max_seq_length, stats)
    examples = create_mlm_examples(
        documents, tokenizer, spec, masked_lm_prob, dupe_factor, short_seq_prob, random_seed
    )
    masked = 0
    with ShardedRecordWriter(os.path.join(output_dir, "mlm"), num_shards) as writer:
        while batch := list(itertools.islice(examples, _SERIALIZE_BATCH)):
            before = writer.num_written
            for record in spec.serialize_batch({name: np.stack([example[name] for example in batch])
                                                for name in batch[0]}):
                writer.write(record)
            masked += int(sum(example[MASKED_LM_WEIGHTS].sum() for example in batch))
            if writer.num_written // _PROGRESS_EVERY > before // _PROGRESS_EVERY:
                log(f"[mlm] {writer.num_written} records written")
    stats.increment("samples_written", writer.num_written)
    stats.increment("masked_tokens", masked)
    write_records_info(output_dir, spec, stats.to_dict())
    log(f"[mlm] {writer.num_written} records, {masked} masked tokens -> {output_dir}")
    return stats
