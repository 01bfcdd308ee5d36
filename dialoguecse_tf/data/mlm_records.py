"""MLM continued-pretraining records: dialogues are documents, utterances are sentences.

Candidate utterances that are no dialogue's turn become documents too (`document_texts`), so
the records cover every distinct utterance of the input.

Instance packing and masking are Google's own, taken from tf-models-official's
`create_pretraining_data` (segment pairs filled up to `max_seq_length`, 80/10/10 masking,
`short_seq_prob`); only the tokenization is this project's, so the ids match the tokenizer
the later stages use in-graph.
"""

import functools
import importlib
import os
import random
import sys

import numpy as np
from absl import flags

from dialoguecse_tf import schema
from dialoguecse_tf.data.preprocessing import PrepStats, cap_text

_TOKENIZE_BATCH = 1024
_PROGRESS_EVERY = 10000


def _bert_instance_tools():
    """Imports Google's instance builder without letting it touch our command-line flags.

    The module defines absl flags (`max_seq_length`, `input_file`, ...) at import time,
    which would collide with the entry points' flags of the same names; its definitions
    are sent to a scratch registry instead, whatever the import order.
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


_bert_tools = _bert_instance_tools()


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
    spec: schema.MlmRecordSpec,
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
    length, predictions = spec.max_seq_length, spec.max_predictions_per_seq
    for _ in range(dupe_factor):
        for index in range(len(documents)):
            instances = _bert_tools.create_instances_from_document(
                documents, index, length, short_seq_prob, masked_lm_prob,
                predictions, vocab_words, rng,
            )
            for instance in instances:
                yield _to_features(instance, tokenizer, length, predictions)


def _to_features(instance, tokenizer, length: int, predictions: int) -> dict:
    input_ids = np.zeros(length, np.int64)
    input_mask = np.zeros(length, np.int64)
    segment_ids = np.zeros(length, np.int64)
    ids = tokenizer.tokens_to_ids(instance.tokens)
    input_ids[: len(ids)] = ids
    input_mask[: len(ids)] = 1
    segment_ids[: len(ids)] = instance.segment_ids
    positions = np.zeros(predictions, np.int64)
    label_ids = np.zeros(predictions, np.int64)
    weights = np.zeros(predictions, np.float32)
    count = len(instance.masked_lm_positions)
    positions[:count] = instance.masked_lm_positions
    label_ids[:count] = tokenizer.tokens_to_ids(instance.masked_lm_labels)
    weights[:count] = 1.0
    return {
        schema.INPUT_IDS: input_ids,
        schema.INPUT_MASK: input_mask,
        schema.SEGMENT_IDS: segment_ids,
        schema.MASKED_LM_POSITIONS: positions,
        schema.MASKED_LM_IDS: label_ids,
        schema.MASKED_LM_WEIGHTS: weights,
        schema.NEXT_SENTENCE_LABELS: np.array([int(instance.is_random_next)], np.int64),
    }


def write_mlm_records(
    dialogues,
    tokenizer,
    output_dir: str,
    spec: schema.MlmRecordSpec,
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
    with schema.ShardedRecordWriter(os.path.join(output_dir, "mlm"), num_shards) as writer:
        for example in examples:
            writer.write(spec.serialize(example))
            masked += int(example[schema.MASKED_LM_WEIGHTS].sum())
            if writer.num_written % _PROGRESS_EVERY == 0:
                log(f"[mlm] {writer.num_written} records written")
    stats.increment("samples_written", writer.num_written)
    stats.increment("masked_tokens", masked)
    schema.write_records_info(output_dir, spec, stats.to_dict())
    log(f"[mlm] {writer.num_written} records, {masked} masked tokens -> {output_dir}")
    return stats
