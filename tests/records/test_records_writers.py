"""The record writers: MLM and contrastive ones checked on the real ECD training sample, and all
of them on a huge utterance."""

import re
import resource
import time
import unicodedata

import numpy as np
import pytest

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import read_authors_contrastive
from dialoguecse_tf.records.contrastive import (RECORD_TYPE_CONTRASTIVE, ContrastiveRecordSpec, nearest_context,
                                                write_contrastive_records)
from dialoguecse_tf.records.dialogues import DialogueRecordSpec, write_dialogue_records
from dialoguecse_tf.records.mlm import (CANDIDATES, RECORD_TYPE_MLM, TURNS, MlmRecordSpec, keyed_documents, scan_corpus,
                                        write_mlm_records)
from dialoguecse_tf.encoder.tokenization import Tokenizer, build_vocab, write_vocab
from dialoguecse_tf.records.pairs import PairRecordSpec, write_pair_records
from dialoguecse_tf.records.reader import read_dataset, read_records_info
from dialoguecse_tf.records.spec import FLOAT32
from dialoguecse_tf.records.streaming import shard_of


@pytest.fixture(scope="module")
def ecd(shared_data, tmp_path_factory):
    """The 1,000 real ECD lines and a tokenizer whose vocabulary was built from them."""
    dialogues = list(read_authors_contrastive(str(shared_data / "ecd" / "train" / "train_data.txt.sample")))
    texts = sorted({t.text for d in dialogues for t in d.turns} | {c for d in dialogues for c in d.candidates})
    vocab_file = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    write_vocab(build_vocab(texts, vocab_size=8000, min_count=2), str(vocab_file))
    return dialogues, Tokenizer(str(vocab_file), max_seq_length=128)


def _normalize(text):
    # What survives tokenization: NFKC case folding, no whitespace.
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text).casefold())


def test_nearest_context_is_bidirectional_and_ordered():
    assert nearest_context(7, 3, 3) == [1, 2, 4]
    assert nearest_context(7, 0, 3) == [1, 2, 3]
    assert nearest_context(7, 6, 2) == [4, 5]
    assert nearest_context(3, 1, 5) == [0, 2]
    assert nearest_context(1, 0, 3) == []


@pytest.mark.slow
def test_contrastive_records_round_trip_real_ecd(ecd, tmp_path):
    dialogues, tokenizer = ecd
    spec = ContrastiveRecordSpec(max_seq_length=128, num_context_turns=3, num_negatives=9)
    start = time.perf_counter()
    stats = write_contrastive_records(dialogues, tokenizer, str(tmp_path), spec, num_shards=2)
    elapsed = time.perf_counter() - start
    print(f"contrastive writer: {len(dialogues) / elapsed:.0f} records/s")
    assert stats["samples_written"] == 1000
    info_spec, info_stats = read_records_info(str(tmp_path), RECORD_TYPE_CONTRASTIVE)
    assert info_spec == spec and info_stats["samples_written"] == 1000
    # A record goes to the shard its seeded hash names, in corpus order there.
    shards = [shard_of(12345, RECORD_TYPE_CONTRASTIVE, (index, dialogue.response_index), 2)
              for index, dialogue in enumerate(dialogues)]
    assert 400 < shards.count(0) < 600
    expected = [d for shard in (0, 1) for d, s in zip(dialogues, shards) if s == shard]
    records = [record for shard in (0, 1) for record in
               read_dataset(str(tmp_path / f"contrastive-{shard:05d}-of-00002.tfrecord"), spec).as_numpy_iterator()]
    assert len(records) == 1000
    unk = 0
    for dialogue, record in zip(expected, records, strict=True):
        texts = [t.text for t in dialogue.turns]
        context = [texts[i] for i in nearest_context(len(texts), dialogue.response_index, 3)]
        assert record["context_turn_mask"].tolist() == [1] * len(context) + [0] * (3 - len(context))
        picked = nearest_context(len(texts), dialogue.response_index, 3)
        assert record["context_turn_offset"][: len(context)].tolist() == [i - dialogue.response_index for i in picked]
        decoded_context = tokenizer.detokenize(record["context_input_ids"][: len(context)])
        decoded_candidates = tokenizer.detokenize(record["candidate_input_ids"])
        expected = context + list(dialogue.candidates[:10])
        for got, want in zip(decoded_context + decoded_candidates, expected):
            if tokenizer.unk_id not in record["candidate_input_ids"] and tokenizer.unk_id not in record["context_input_ids"]:
                assert _normalize(got) == _normalize(want)[: len(_normalize(got))]
                assert len(_normalize(got)) > 0
            else:
                unk += 1
        # The first candidate is the positive: the true response of this dialogue.
        assert decoded_candidates[0] and _normalize(dialogue.candidates[0]).startswith(_normalize(decoded_candidates[0]))
        assert record["candidate_input_ids"][0][0] == tokenizer.cls_id
    assert unk < 50  # characters rarer than min_count=2 become [UNK]; they are few


def test_contrastive_missing_turns_are_pure_padding(tiny_vocab_file, tmp_path):
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=8)
    dialogues = [
        Dialogue("a", (Turn("u", "where is my order"), Turn("a", "i want a refund"))),
        Dialogue("b", (Turn("u", "hello"), Turn("a", "thanks"), Turn("u", "change address"))),
    ]
    spec = ContrastiveRecordSpec(max_seq_length=8, num_context_turns=3, num_negatives=2)
    stats = write_contrastive_records(dialogues, tokenizer, str(tmp_path), spec, random_seed=3)
    records = list(read_dataset(str(tmp_path / "contrastive-*"), spec).as_numpy_iterator())
    assert len(records) == stats["samples_written"] == 5
    first = records[0]
    assert first["context_turn_mask"].tolist() == [1, 0, 0]
    assert first["context_turn_offset"].tolist() == [1, 0, 0]
    assert not first["context_input_ids"][1:].any() and not first["context_input_mask"][1:].any()
    # Negatives come from the other dialogue only.
    negatives = tokenizer.detokenize(first["candidate_input_ids"][1:])
    assert set(negatives) <= {"hello", "thanks", "change address"}
    again = tmp_path / "again"
    write_contrastive_records(dialogues, tokenizer, str(again), spec, random_seed=3)
    same = list(read_dataset(str(again / "contrastive-*"), spec).as_numpy_iterator())
    for x, y in zip(records, same):
        np.testing.assert_array_equal(x["candidate_input_ids"], y["candidate_input_ids"])


@pytest.mark.slow
def test_contrastive_records_hold_exactly_the_tokenizer_ids(ecd, tmp_path):
    # Each distinct text is tokenized once per chunk and cut to CHARS_PER_TOKEN * max_seq_length
    # characters first: neither may change a record of real text.
    dialogues, tokenizer = ecd
    spec = ContrastiveRecordSpec(max_seq_length=16, num_context_turns=3, num_negatives=9)
    stats = write_contrastive_records(dialogues[:300], tokenizer, str(tmp_path), spec)
    assert stats["utterances_capped"] == 0
    records = list(read_dataset(str(tmp_path / "contrastive-*"), spec).as_numpy_iterator())
    for dialogue, record in zip(dialogues[:300], records):
        expected = tokenizer(list(dialogue.candidates[:10]), max_seq_length=16)
        np.testing.assert_array_equal(record["candidate_input_ids"], expected["token_ids"].numpy())
        np.testing.assert_array_equal(record["candidate_input_mask"], expected["padding_mask"].numpy())


def _contrastive(dialogues, tokenizer, out):
    spec = ContrastiveRecordSpec(max_seq_length=8, num_context_turns=3, num_negatives=2)
    return spec, write_contrastive_records(dialogues, tokenizer, out, spec)


def _pairs(pairing):
    def write(dialogues, tokenizer, out):
        spec = PairRecordSpec(8, pairing)
        return spec, write_pair_records(dialogues, tokenizer, out, spec)
    return write


def _dialogues(truncation):
    def write(dialogues, tokenizer, out):
        spec = DialogueRecordSpec(16, 2, truncation)
        return spec, write_dialogue_records(dialogues, tokenizer, out, spec, samples_per_dialogue=2)
    return write


def _mlm(dialogues, tokenizer, out):
    spec = MlmRecordSpec(max_seq_length=8, max_predictions_per_seq=2)
    return spec, write_mlm_records(dialogues, tokenizer, out, spec, dupe_factor=2)


def _corpus_with(text):
    """20 dialogues of 6 ordinary turns between two speakers; dialogue 3 says `text` as its
    second and its last turn, so head truncation keeps its first pieces and recent_turns cuts it."""
    ordinary = ["hello i want a refund", "where is my order please", "thanks the package is late",
                "change my address please", "the delivery is late", "i want my money back"]
    dialogues = []
    for i in range(20):
        texts = ordinary[i % 6:] + ordinary[:i % 6]
        if i == 3:
            texts[1] = texts[5] = text
        dialogues.append(Dialogue(f"d{i}", tuple(Turn("ua"[j % 2], t) for j, t in enumerate(texts))))
    return dialogues


@pytest.mark.parametrize("write", [_contrastive, _pairs("consecutive"), _pairs("self"), _dialogues("head"),
                                   _dialogues("recent_turns"), _mlm],
                         ids=["contrastive", "pairs", "self_pairs", "dialogues_head", "dialogues_recent_turns", "mlm"])
def test_huge_utterance_costs_seconds_and_megabytes(write, tiny_vocab_file, tmp_path):
    # Review finding 7: one 50 MB utterance took 280 s and 7.1 GB in contrastive prep, tokenized
    # in full ~13 times. Every builder cuts it to 100 characters per token of max_seq_length first.
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=8)
    # Tracing a writer's graphs is paid once per process, not per utterance: a first corpus pays it.
    write(_corpus_with("where is my order"), tokenizer, str(tmp_path / "warm_up"))
    huge = "where is my order " * 600_000  # 10.8 MB
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    spec, stats = write(_corpus_with(huge), tokenizer, str(tmp_path / "huge"))
    elapsed = time.perf_counter() - start
    peak_growth_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before) / 1024
    print(f"10.8 MB utterance: {elapsed:.2f} s, peak RSS growth {peak_growth_mb:.0f} MB")
    assert elapsed < 5 and peak_growth_mb < 200
    assert stats["utterances_capped"] > 0
    # Its records are those of a short text with the same first 40 pieces, more than any
    # builder keeps: the cut loses only pieces no record holds.
    _, short_stats = write(_corpus_with("where is my order " * 10), tokenizer, str(tmp_path / "short"))
    assert short_stats["utterances_capped"] == 0 and short_stats["samples_written"] == stats["samples_written"]
    records = [read_dataset(str(tmp_path / run / "*.tfrecord"), spec).as_numpy_iterator()
               for run in ("huge", "short")]
    for huge_record, short_record in zip(*records, strict=True):
        for key in huge_record:
            np.testing.assert_array_equal(huge_record[key], short_record[key])


@pytest.mark.slow
def test_mlm_records_real_ecd(ecd, tmp_path):
    dialogues, tokenizer = ecd
    spec = MlmRecordSpec(max_seq_length=50, max_predictions_per_seq=10)
    start = time.perf_counter()
    stats = write_mlm_records(dialogues, tokenizer, str(tmp_path), spec, random_seed=7, num_shards=2)
    elapsed = time.perf_counter() - start
    count = stats["samples_written"]
    print(f"mlm writer: {count / elapsed:.0f} records/s ({count} records)")
    assert count > 500
    records = list(read_dataset(str(tmp_path / "mlm-*"), spec).as_numpy_iterator())
    assert len(records) == count
    _, info_stats = read_records_info(str(tmp_path), RECORD_TYPE_MLM)
    assert info_stats["mlm_distinct_utterances"] == 50653 and info_stats["mlm_candidate_only_utterances"] == 42891
    fractions = []
    for record in records[:200]:
        ids, mask = record["input_ids"], record["input_mask"]
        length = int(mask.sum())
        assert ids[0] == tokenizer.cls_id and ids[length - 1] == tokenizer.sep_id
        assert not ids[length:].any()
        weights = record["masked_lm_weights"]
        n = int(weights.sum())
        assert 1 <= n <= 10
        positions = record["masked_lm_positions"][:n]
        assert (positions > 0).all() and (positions < length).all()
        assert record["masked_lm_ids"][n:].sum() == 0
        fractions.append(n / length)
    assert 0.1 < np.mean(fractions) < 0.2  # masked_lm_prob 0.15, capped at 10 predictions


@pytest.mark.slow
def test_mlm_documents_hold_every_distinct_utterance_of_the_real_sample(ecd, shared_data):
    dialogues, _ = ecd
    # Counted from the raw fields, not through the reader: context, response and candidates.
    turns, everything = set(), set()
    for line in (shared_data / "ecd" / "train" / "train_data.txt.sample").read_text(encoding="utf-8").splitlines():
        left, right, _, _, candidates, _ = line.split("\t")
        turns.update(left.split("|") + right.split("|") + candidates.split("|")[:1])
        everything.update(candidates.split("|"))
    everything |= turns
    assert (len(everything), len(turns)) == (50653, 7762)

    scan = scan_corpus(enumerate(dialogues), random_seed=1, pool_size=10)
    keyed = list(keyed_documents(enumerate(dialogues), scan.turns))
    documents = [texts for _, texts in keyed]
    assert {text for document in documents for text in document} == everything
    assert (len(scan.turns), scan.candidate_only) == (7762, 42891)
    # Each dialogue stays a document of its turns, followed by one of its candidates no turn holds.
    assert [key for key, _ in keyed] == [(i, part) for i in range(1000) for part in (TURNS, CANDIDATES)]
    assert documents[0::2] == [[t.text for t in d.turns] for d in dialogues]
    extra = [text for document in documents[1::2] for text in document]
    assert len(extra) == len(set(extra)) == 42891 and not set(extra) & turns
    assert set(documents[1]) <= set(dialogues[0].candidates[1:])
    # The first pass finds the sampled dialogues' candidate documents before it knows every turn:
    # the same documents as the records pass.
    by_key = dict(keyed)
    assert len({key for (key, _), _ in scan.pool_documents}) == 10
    assert all(texts == by_key[key] for key, texts in scan.pool_documents)


def test_mlm_masking_is_deterministic_and_needs_two_dialogues(tiny_vocab_file, tmp_path):
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=16)
    dialogues = [
        Dialogue(str(i), tuple(Turn(str(j % 2), "where is my order i want a refund please") for j in range(4)))
        for i in range(6)
    ]
    spec = MlmRecordSpec(max_seq_length=16, max_predictions_per_seq=3)
    outputs = []
    for run in ("a", "b"):
        write_mlm_records(dialogues, tokenizer, str(tmp_path / run), spec, random_seed=1, dupe_factor=2)
        outputs.append([r["input_ids"].tolist() for r in read_dataset(str(tmp_path / run / "mlm-*"), spec).as_numpy_iterator()])
    assert outputs[0] == outputs[1]
    stats = PrepStats()
    # A control character tokenizes to nothing: left out, and counted.
    with_empty = dialogues + [Dialogue("e", (Turn("0", "\x00"), Turn("1", "where is my order")))]
    write_mlm_records(with_empty, tokenizer, str(tmp_path / "c"), spec, stats=stats)
    assert stats["tokens_truncated"] == 0 and stats["utterances_without_tokens"] == 1
    with pytest.raises(ValueError, match="at least 2"):
        write_mlm_records(dialogues[:1], tokenizer, str(tmp_path / "d"), spec)


@pytest.mark.slow
def test_given_candidates_can_be_replaced_by_sampled_ones(ecd, tmp_path):
    dialogues, tokenizer = ecd
    spec = ContrastiveRecordSpec(max_seq_length=32, num_context_turns=2, num_negatives=3)
    stats = write_contrastive_records(dialogues[:50], tokenizer, str(tmp_path), spec, use_given_candidates=False)
    assert stats["samples_written"] == sum(len(d.turns) for d in dialogues[:50])


@pytest.mark.parametrize("spec", [
    ContrastiveRecordSpec(max_seq_length=7, num_context_turns=2, num_negatives=3, context_layout="sides"),
    PairRecordSpec(max_seq_length=5),
    DialogueRecordSpec(max_seq_length=6, num_negatives=2),
    MlmRecordSpec(max_seq_length=6, max_predictions_per_seq=3),
], ids=lambda spec: spec.record_type)
def test_serialize_batch_writes_the_bytes_of_serialize(spec):
    """Random values over the whole int32 range (negative ones take 10-byte varints, 127/128 and
    16383/16384 change width) and random floats: the same bytes as one tf.train.Example each."""
    rng = np.random.default_rng(0)
    edges = np.array([0, 1, 127, 128, 16383, 16384, -1, -128, 2**31 - 1, -2**31], np.int64)
    batch = {}
    for feature in spec._features():
        shape = (5, *feature.shape)
        if feature.dtype == FLOAT32:
            batch[feature.name] = rng.normal(size=shape).astype(np.float32)
        else:
            values = rng.integers(-2**31, 2**31, size=shape, dtype=np.int64)
            small = rng.integers(0, 20000, size=shape)
            values = np.where(rng.random(shape) < 0.5, small, values)
            values.reshape(-1)[:len(edges)] = edges
            batch[feature.name] = values
    batch[spec._features()[0].name][1] = 0  # an all-zero row: one byte per value
    examples = [{name: values[row] for name, values in batch.items()} for row in range(5)]
    assert spec.serialize_batch(batch) == [spec.serialize(example) for example in examples]
    if isinstance(spec, MlmRecordSpec):  # the constant feature, given as the writer gives it
        batch["next_sentence_labels"] = np.array([[0], [1], [0], [1], [1]])
        examples = [{name: values[row] for name, values in batch.items()} for row in range(5)]
        assert spec.serialize_batch(batch) == [spec.serialize(example) for example in examples]
    with pytest.raises(ValueError, match="do not fit in int32"):
        spec.serialize_batch({**batch, spec._features()[0].name: batch[spec._features()[0].name] + 2**32})
