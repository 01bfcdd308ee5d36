"""Fuzzing every file parser: it returns well-formed objects or raises the project's clear error.

The clear error is `DataFormatError` (file and 1-based line) for line formats, and a
ValueError whose message names the file for whole-file formats (JSON, vocabularies). Anything
else (IndexError, KeyError, TypeError, UnicodeDecodeError, a ValueError without the file...)
is a parser bug. Inputs are random bytes, random text lines, and lines assembled from
plausible fields with corruption mixed in (wrong field counts, bad numbers, tabs, empty fields,
huge numbers, unicode); explicit `@example`s keep the crashes fuzzing found.
"""

import csv
import io
import json
import math
import pathlib

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dialoguecse_tf.data.dialogue import Dialogue
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import READERS
from dialoguecse_tf.data.sr_builder import read_select_file
from dialoguecse_tf.encoder.bert_config import BertConfig
from dialoguecse_tf.encoder.tokenization import SPECIAL_TOKENS, load_vocab
from dialoguecse_tf.evaluation.results_io import read_results
from dialoguecse_tf.evaluation.sts import read_sts_file
from dialoguecse_tf.evaluation.sweeps import collect_sweep, sweep_markdown
from dialoguecse_tf.evaluation.tables import results_table
from dialoguecse_tf.io_utils import DataFormatError, read_strict_lines
from dialoguecse_tf.records.contrastive import ContrastiveRecordSpec
from dialoguecse_tf.records.mlm import MlmRecordSpec
from dialoguecse_tf.records.reader import read_records_info
from dialoguecse_tf.serving.embed import read_texts

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# One digit more than Python's int() converts from a string: its own ValueError, without a file name.
HUGE = "9" * 4301
# Field values a parser must survive: separators, signs, huge and non-ASCII numbers, odd whitespace.
NASTY = st.one_of(st.integers(len(HUGE), len(HUGE) + 9).map(lambda n: "9" * n), st.sampled_from([
    "", " ", "\t", "|", ",", "-", "--", "0", "1", "-1", "+1", " 1", "1 ", "1.5", "1e9", "nan", "inf", "0x10", "1_0",
    "99999999999999999999999", "١", "１", "²", "\u2028", "\ufeff", "\x00", "\r", "null", "[]", "{}",
    "user", "agent", "request(x)", "inform(", "()", "0|1-0-1", "a-b-c", "\\", '"', "好的", "😀",
]))
TEXT = st.one_of(NASTY, st.text(max_size=12), st.sampled_from(["hello there", "where is my order", "退货"]))


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _write(folder: pathlib.Path, data, name="input.txt") -> pathlib.Path:
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


def _num_lines(data: bytes) -> int:
    # A line ends at "\n", "\r\n" or a lone "\r", as the readers split them.
    return len(data.splitlines())


def _as_bytes(data) -> bytes:
    return data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")


def _joined(rows) -> str:
    return "".join("\t".join(fields) + "\n" for fields in rows)


def _field_counts(fields, low: int, high: int):
    """`fields` (a strategy of lists) cut short or padded with extra fields: wrong field counts."""
    return st.tuples(fields, st.integers(low, high)).map(
        lambda pair: pair[0][:pair[1]] + ["extra"] * (pair[1] - len(pair[0])))


def _check_located(error: DataFormatError, path, data: bytes) -> None:
    assert error.path == str(path)
    assert 1 <= error.line_number <= max(_num_lines(data), 1)
    assert str(error).startswith(f"{path}:{error.line_number}: ")


# ------------------------------------------------------------------------------------ corpora

def _authors_rows():
    utterances = st.lists(TEXT, max_size=3).map("|".join)
    roles = st.one_of(st.sampled_from(["0|1-0-1", "1-0", "0-1", "1", "0|1|1-0-1|0", "0|1-0"]), TEXT)
    labels = st.one_of(st.sampled_from(["1|0|0", "1|0", "0|1", "1"]), TEXT)
    candidates = st.one_of(st.sampled_from(["ok|no|maybe", "ok|no", "ok"]), st.lists(TEXT, max_size=3).map("|".join))
    fields = st.tuples(utterances, utterances, roles, st.one_of(st.just("1"), TEXT), candidates, labels).map(list)
    return st.lists(st.one_of(fields, _field_counts(fields, 0, 8)), max_size=5)


def _mdc_text():
    header = st.one_of(st.just("session.ID\tMessage.ID\tMessage.Timestamp\tMessage.From\tMessage.Text\tDialog-Acts"),
                       st.lists(TEXT, max_size=6).map("\t".join))
    row = st.lists(st.one_of(st.sampled_from(["1", "2", "3", "user", "agent", "hi there", "request(moviename)",
                                             "inform(city=Seattle)", "2016-01-01"]), TEXT), max_size=8)
    return st.tuples(header, st.lists(row, max_size=6)).map(lambda pair: pair[0] + "\n" + _joined(pair[1]))


def _jddc_rows():
    field = st.one_of(st.sampled_from(["a1f3", "b7c2", "0", "1", "nan", "USERID_1", "session_id", "好的"]), TEXT)
    return st.lists(st.lists(field, min_size=5, max_size=9), max_size=6)


def _ecd_rows():
    field = st.one_of(st.sampled_from(["0", "1", "hello", "你好 啊"]), TEXT)
    return st.lists(st.lists(field, max_size=5), max_size=5)


JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), TEXT)
JSON_VALUE = st.recursive(JSON_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                               st.dictionaries(TEXT, inner, max_size=3)), max_leaves=8)


def _jsonl_objects():
    turn = st.one_of(st.fixed_dictionaries({"speaker": st.one_of(st.just("user"), JSON_SCALAR),
                                            "text": st.one_of(st.just("hi"), JSON_SCALAR)},
                                           optional={"intent": JSON_SCALAR}), JSON_VALUE)
    dialogue = st.fixed_dictionaries({}, optional={
        "dialogue_id": JSON_SCALAR,
        "turns": st.one_of(st.lists(turn, max_size=4), JSON_VALUE),
        "response_index": st.one_of(st.integers(-2, 5), JSON_SCALAR),
        "candidates": st.one_of(st.lists(st.one_of(st.just("hi"), TEXT), max_size=3), JSON_VALUE),
        "candidate_labels": st.one_of(st.lists(st.integers(-1, 2), max_size=3), JSON_VALUE),
    })
    line = st.one_of(dialogue.map(lambda obj: json.dumps(obj, ensure_ascii=False)), JSON_VALUE.map(json.dumps), TEXT)
    return st.lists(line, max_size=5).map(lambda lines: "".join(line.replace("\n", " ") + "\n" for line in lines))


def _self_dialogue_text():
    """A Self-dialogue CSV: a header of its columns (or junk), rows of plausible or corrupt fields."""
    columns = ["AssignmentId", "WorkerId", "Reject", "Answer.sentence1", "Answer.sentence2"]
    header = st.one_of(st.just(columns), st.permutations(columns), st.lists(st.one_of(st.sampled_from(columns), TEXT),
                                                                          max_size=6))
    field = st.one_of(st.sampled_from(["A1", "W1", "", "{}", "hi there", "Duplicate", "a,b", 'say "x"', "x\ny"]),
                      TEXT)
    rows = st.lists(st.one_of(st.lists(field, min_size=5, max_size=5), st.lists(field, max_size=7)), max_size=5)

    def csv_text(pair):
        out = io.StringIO()
        csv.writer(out).writerows([pair[0], *pair[1]])
        return out.getvalue()

    return st.tuples(header, rows).map(csv_text)


CORPUS_INPUTS = {
    "authors": st.one_of(_authors_rows().map(_joined), st.binary(max_size=200), st.lists(TEXT).map("\n".join)),
    "mdc": st.one_of(_mdc_text(), st.binary(max_size=200)),
    "ecd": st.one_of(_ecd_rows().map(_joined), st.binary(max_size=200)),
    "jddc": st.one_of(_jddc_rows().map(_joined), st.binary(max_size=200)),
    "jsonl": st.one_of(_jsonl_objects(), st.binary(max_size=200)),
    "self_dialogue": st.one_of(_self_dialogue_text(), st.binary(max_size=200), st.lists(TEXT).map("\n".join)),
}


def _check_dialogue(dialogue: Dialogue, path, data: bytes) -> None:
    assert isinstance(dialogue.dialogue_id, str) and dialogue.dialogue_id
    assert dialogue.turns
    for turn in dialogue.turns:
        assert isinstance(turn.speaker, str) and turn.speaker
        assert isinstance(turn.text, str) and turn.text.strip()
        assert turn.intent is None or isinstance(turn.intent, str)
    assert dialogue.services is None or (dialogue.services and all(isinstance(s, str) and s for s in dialogue.services))
    if dialogue.response_index is None:
        assert dialogue.candidates is None and dialogue.candidate_labels is None
    else:
        assert 0 <= dialogue.response_index < len(dialogue.turns)
        assert dialogue.candidates and dialogue.candidates[0] == dialogue.turns[dialogue.response_index].text
        assert all(isinstance(candidate, str) and candidate.strip() for candidate in dialogue.candidates)
        labels = dialogue.candidate_labels
        assert len(labels) == len(dialogue.candidates) and labels[0] == 1 and sum(labels) == 1
    assert dialogue.source == str(path) and 1 <= dialogue.line_number <= _num_lines(data)


def _fuzz_reader(input_format, scratch, data):
    data = _as_bytes(data)
    path = _write(scratch, data, f"corpus.{input_format}")
    reader = READERS[input_format].read
    try:
        dialogues = list(reader(path))
    except DataFormatError as error:
        _check_located(error, path, data)
    else:
        for dialogue in dialogues:
            _check_dialogue(dialogue, path, data)
    stats = PrepStats()
    try:
        dialogues = list(reader(path, skip_malformed=True, stats=stats))
    except DataFormatError as error:
        # The one error skipping cannot help: an MDC or Self-dialogue file whose header is not its format's.
        assert input_format in ("mdc", "self_dialogue") and error.reason == "bad_header"
        _check_located(error, path, data)
        return
    for dialogue in dialogues:
        _check_dialogue(dialogue, path, data)
    if input_format == "self_dialogue":
        # A quoted CSV field may hold line ends, so rows are not lines: the line count below does not apply.
        return
    # Every line is a record, blank, skipped by rule or counted as malformed: none vanishes.
    if input_format == "mdc":
        # One row per turn, after the header (the first line neither blank nor malformed).
        header = 1 if _num_lines(data) > stats["blank_lines"] + stats.malformed_lines else 0
        records = sum(len(d.turns) for d in dialogues) + stats["empty_turns_skipped"] + header
    elif input_format == "jddc":
        records = sum(len(d.turns) for d in dialogues) + stats["empty_turns_skipped"] + stats["header_lines"]
    else:
        records = len(dialogues) + stats["skipped_non_positive"]
    assert records + stats["blank_lines"] + stats.malformed_lines == _num_lines(data)


@FUZZ
@given(data=CORPUS_INPUTS["authors"])
@example(data="a|b\tc\t0|1-0-1\t1\tx|y\t1|0\n" + "a\t\t1\t" + HUGE + "\tx\t1\n")
def test_fuzz_authors_reader(scratch, data):
    _fuzz_reader("authors", scratch, data)


@FUZZ
@given(data=CORPUS_INPUTS["mdc"])
@example(data="session.ID\tMessage.ID\tMessage.Timestamp\tMessage.From\tMessage.Text\n1\t" + HUGE + "\tt\tuser\thi\n")
def test_fuzz_mdc_reader(scratch, data):
    _fuzz_reader("mdc", scratch, data)


@FUZZ
@given(data=CORPUS_INPUTS["ecd"])
def test_fuzz_ecd_reader(scratch, data):
    _fuzz_reader("ecd", scratch, data)


@FUZZ
@given(data=CORPUS_INPUTS["jddc"])
@example(data="session_id\tuser_id\twaiter_send\n" + "s\tu\t1\t0\t0\tnan\thi\tthere\n" * 2)
def test_fuzz_jddc_reader(scratch, data):
    _fuzz_reader("jddc", scratch, data)


def _sgd_files():
    action = st.one_of(st.fixed_dictionaries({"act": st.one_of(st.sampled_from(["INFORM", "REQUEST"]), JSON_SCALAR)}),
                       JSON_VALUE)
    frame = st.one_of(st.fixed_dictionaries({"actions": st.one_of(st.lists(action, max_size=3), JSON_VALUE)}),
                      JSON_VALUE)
    turn = st.one_of(st.fixed_dictionaries({
        "speaker": st.one_of(st.sampled_from(["USER", "SYSTEM"]), JSON_SCALAR),
        "utterance": st.one_of(st.just("hello there"), JSON_SCALAR),
        "frames": st.one_of(st.lists(frame, max_size=2), JSON_VALUE),
    }), JSON_VALUE)
    dialogue = st.one_of(st.fixed_dictionaries({}, optional={
        "dialogue_id": st.one_of(st.just("1_00000"), JSON_SCALAR),
        "services": st.one_of(st.just(["Hotels_1"]), JSON_VALUE),
        "turns": st.one_of(st.lists(turn, min_size=1, max_size=3), JSON_VALUE),
    }), JSON_VALUE)
    return st.tuples(st.lists(dialogue, max_size=4), st.sampled_from([None, 1])).map(
        lambda pair: json.dumps(pair[0], indent=pair[1], ensure_ascii=False))


@FUZZ
@given(data=st.one_of(_sgd_files(), _sgd_files().map(lambda text: text[:-3]), st.binary(max_size=200)))
@example(data="[" * 100000)
@example(data='[{"dialogue_id": ' + HUGE + "}]")
def test_fuzz_sgd_reader(scratch, data):
    data = _as_bytes(data)
    path = _write(scratch, data, "dialogues_001.json")
    try:
        items = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        items = None
    try:
        dialogues = list(READERS["sgd"].read(path))
    except DataFormatError as error:
        _check_located(error, path, data)
    else:
        assert isinstance(items, list)
        for dialogue in dialogues:
            _check_dialogue(dialogue, path, data)
    stats = PrepStats()
    try:
        dialogues = list(READERS["sgd"].read(path, skip_malformed=True, stats=stats))
    except DataFormatError as error:
        # Only a file that is no JSON list stops a run that skips malformed dialogues.
        assert error.reason in ("bad_json", "invalid_utf8") and not isinstance(items, list)
        _check_located(error, path, data)
        return
    for dialogue in dialogues:
        _check_dialogue(dialogue, path, data)
    # Every item of the list is a dialogue or counted as malformed: none vanishes.
    assert len(dialogues) + stats.malformed_lines == len(items)


@FUZZ
@given(data=CORPUS_INPUTS["jsonl"])
@example(data='{"turns": [{"speaker": "u", "text": "hi"}], "response_index": ' + HUGE + "}\n")
@example(data="[" * 100000 + "\n")
def test_fuzz_jsonl_reader(scratch, data):
    _fuzz_reader("jsonl", scratch, data)


@FUZZ
@given(data=CORPUS_INPUTS["self_dialogue"])
@example(data="AssignmentId,WorkerId,Reject,Answer.sentence1\nA1,W1,,\"" + "x" * 200_000 + "\"\nA2,W1,,hi\n")
@example(data=b"AssignmentId,WorkerId,Reject,Answer.sentence1\nA1,W\xe9,,hi\n")
def test_fuzz_self_dialogue_reader(scratch, data):
    _fuzz_reader("self_dialogue", scratch, data)


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), st.lists(TEXT).map("\n".join)))
def test_fuzz_strict_lines(scratch, data):
    data = _as_bytes(data)
    path = _write(scratch, data)
    try:
        lines = read_strict_lines(path, "no lines")
    except DataFormatError as error:
        _check_located(error, path, data)
        return
    assert [number for number, _ in lines] == list(range(1, _num_lines(data) + 1))
    assert all(isinstance(line, str) and "\n" not in line for _, line in lines)


# ------------------------------------------------------------------------- evaluation sets

def _select_rows():
    ids = st.lists(st.one_of(st.integers(0, 6).map(str), NASTY), max_size=4).map(",".join)
    row = st.tuples(st.one_of(st.integers(0, 6).map(str), NASTY), TEXT, TEXT, ids, ids).map(list)
    return st.lists(st.one_of(row, _field_counts(row, 3, 7)), max_size=6)


def _valid_select_rows():
    """Well-formed files now and then, so the success path is exercised too."""
    def rows(n):
        return [[str(i), f"sentence {i}", str(i % 2), str((i + 2) % n), str((i + 1) % n)] for i in range(n)]
    return st.integers(3, 6).map(rows)


@FUZZ
@given(data=st.one_of(_select_rows().map(_joined), _valid_select_rows().map(_joined), st.binary(max_size=200)))
@example(data="0\ta\t\t1\t\n1\tb\t\t0\t" + HUGE + "\n")
def test_fuzz_select_file(scratch, data):
    data = _as_bytes(data)
    path = _write(scratch, data, "select.txt")
    try:
        rows = read_select_file(path)
    except DataFormatError as error:
        _check_located(error, path, data)
        return
    assert [row.id for row in rows] == list(range(len(rows))) and len(rows) == _num_lines(data)
    for row in rows:
        assert row.positive_ids and not set(row.positive_ids) & set(row.negative_ids)
        for ids in (row.positive_ids, row.negative_ids):
            assert all(0 <= i < len(rows) and i != row.id for i in ids) and len(set(ids)) == len(ids)
        assert not any(ch in row.sentence + row.intent for ch in "\t\n")


@FUZZ
@given(data=st.one_of(st.lists(st.lists(st.one_of(st.integers(0, 6).map(str), TEXT), max_size=4)).map(_joined),
                      st.binary(max_size=200)))
@example(data="5\ta\tb\n" + HUGE + "\ta\tb\n")
def test_fuzz_sts_file(scratch, data):
    data = _as_bytes(data)
    path = _write(scratch, data, "sts.txt")
    try:
        pairs = read_sts_file(path)
    except DataFormatError as error:
        _check_located(error, path, data)
        return
    assert len(pairs) == _num_lines(data)
    for score, sentence_a, sentence_b in pairs:
        assert type(score) is int and 1 <= score <= 5
        assert sentence_a.strip() and sentence_b.strip() and "\t" not in sentence_a + sentence_b


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), st.lists(TEXT).map("\n".join)))
def test_fuzz_read_texts(scratch, data):
    data = _as_bytes(data)
    path = _write(scratch, data)
    try:
        texts = read_texts(str(path))
    except ValueError as error:
        assert str(error).startswith(f"{path}:") and "invalid UTF-8" in str(error)
        return
    assert len(texts) == _num_lines(data) and all(isinstance(t, str) and "\n" not in t for t in texts)


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), st.lists(st.one_of(st.sampled_from(SPECIAL_TOKENS), TEXT)).map(
    lambda tokens: "\n".join(tokens) + "\n"), st.permutations(SPECIAL_TOKENS + ("a", "##b")).map("\n".join)))
@example(data="\n".join(SPECIAL_TOKENS).encode() + b"\nth\xe9\n")
def test_fuzz_vocab(scratch, data):
    data = _as_bytes(data)
    path = _write(scratch, data, "vocab.txt")
    try:
        tokens = load_vocab(path)
    except ValueError as error:
        assert str(path) in str(error)
        return
    assert set(SPECIAL_TOKENS) <= set(tokens) and len(set(tokens)) == len(tokens)
    assert all(isinstance(token, str) and "\n" not in token for token in tokens)


# --------------------------------------------------------------------------------- JSON files

def _json_text(objects):
    return st.one_of(objects.map(lambda value: json.dumps(value, ensure_ascii=False)), JSON_VALUE.map(json.dumps),
                     st.binary(max_size=100), TEXT)


GOOD_BERT = {"vocab_size": 40, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
             "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 24, "type_vocab_size": 2,
             "initializer_range": 0.02, "layer_norm_eps": 1e-12}
BERT_VALUES = st.one_of(JSON_SCALAR, st.integers(-2, 64), st.floats(-1, 2), st.sampled_from(
    ["gelu", "gelu_new", "relu", "absolute", "relative_key", "bert", "roberta"]), JSON_VALUE)


def _mutated(base):
    """`base` with some keys dropped and some values replaced."""
    return st.tuples(st.sets(st.sampled_from(sorted(base))), st.dictionaries(
        st.one_of(st.sampled_from(sorted(base) + ["hidden_act", "model_type", "position_embedding_type",
                                                  "layer_norm_epsilon"]), TEXT), BERT_VALUES, max_size=3)
    ).map(lambda pair: {**{k: v for k, v in base.items() if k not in pair[0]}, **pair[1]})


@FUZZ
@given(data=_json_text(_mutated(GOOD_BERT)), hf=st.booleans())
@example(data=json.dumps({**GOOD_BERT, "hidden_act": ["gelu"]}), hf=True)
@example(data=json.dumps({**GOOD_BERT, "initializer_range": "0.02"}), hf=False)
@example(data=json.dumps({**GOOD_BERT, "vocab_size": True}), hf=False)
@example(data=b'{"vocab_size": "\xff"}', hf=False)
@example(data='{"vocab_size": ' + HUGE + "}", hf=False)
def test_fuzz_bert_config(scratch, data, hf):
    path = _write(scratch, _as_bytes(data), "bert_config.json")
    try:
        config = (BertConfig.from_hf_json_file if hf else BertConfig.from_json_file)(str(path))
    except ValueError as error:
        assert str(path) in str(error)
        return
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "max_position_embeddings", "type_vocab_size"):
        assert type(getattr(config, key)) is int and getattr(config, key) > 0
    assert config.hidden_size % config.num_attention_heads == 0
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        assert 0 <= getattr(config, key) < 1
    for key in ("initializer_range", "layer_norm_eps"):
        assert isinstance(getattr(config, key), (int, float)) and 0 < getattr(config, key) < math.inf


GOOD_INFO = {"record_type": "mlm", "spec": {"max_seq_length": 16, "max_predictions_per_seq": 3},
             "stats": {"samples_written": 4}}
INFO_OBJECTS = st.one_of(
    st.fixed_dictionaries({}, optional={
        "record_type": st.one_of(st.sampled_from(["mlm", "contrastive"]), JSON_SCALAR),
        "spec": st.one_of(st.dictionaries(st.sampled_from(["max_seq_length", "max_predictions_per_seq",
                                                           "num_context_turns", "num_negatives", "other"]),
                                          st.one_of(st.integers(-1, 60), JSON_SCALAR), max_size=4), JSON_VALUE),
        "stats": st.one_of(st.dictionaries(TEXT, st.integers()), JSON_VALUE)}),
    _mutated(GOOD_INFO))


@FUZZ
@given(data=_json_text(INFO_OBJECTS))
@example(data=json.dumps({"record_type": "mlm"}))
@example(data=json.dumps({"record_type": "mlm", "spec": [16, 3]}))
@example(data=json.dumps({"record_type": ["mlm"]}))
@example(data="[]")
@example(data=b"\xff\xfe")
def test_fuzz_records_info(scratch, data):
    path = _write(scratch, _as_bytes(data), "records_info.json")
    try:
        spec, stats = read_records_info(str(path))
    except ValueError as error:
        assert str(path) in str(error)
        return
    assert isinstance(spec, (MlmRecordSpec, ContrastiveRecordSpec)) and isinstance(stats, dict)


def _results_objects():
    metrics = st.dictionaries(TEXT, st.one_of(st.dictionaries(st.sampled_from(["corr", "map", "mrr"]),
                                                              st.one_of(st.floats(0, 100), JSON_SCALAR)),
                                              JSON_VALUE), max_size=2)
    model = st.one_of(st.fixed_dictionaries({}, optional={
        "display_name": st.one_of(st.just("BERT-avg"), JSON_SCALAR), "checkpoint": JSON_SCALAR,
        "description": st.one_of(st.just("mean"), JSON_SCALAR), "baseline": JSON_SCALAR, "metrics": metrics,
    }), JSON_VALUE)
    dataset = st.one_of(st.fixed_dictionaries({"name": st.one_of(st.just("ECD"), JSON_SCALAR)}, optional={
        "select_file": JSON_SCALAR, "select_sha256": st.sampled_from(["a", "b"]), "sr_queries": JSON_SCALAR,
        "sts_file": JSON_SCALAR, "sts_sha256": st.sampled_from(["a", "b"]), "sts_pairs": JSON_SCALAR,
    }), JSON_VALUE)
    return st.fixed_dictionaries({"format_version": st.one_of(st.just(1), JSON_SCALAR)}, optional={
        "datasets": st.one_of(st.lists(dataset, max_size=3), JSON_VALUE),
        "models": st.one_of(st.lists(model, max_size=3), JSON_VALUE), "config": JSON_VALUE,
    })


@FUZZ
@given(data=_json_text(_results_objects()))
@example(data=json.dumps({"format_version": 1, "datasets": [], "models": [{"checkpoint": "c", "metrics": {}}]}))
@example(data=json.dumps({"format_version": 1, "datasets": [{"name": "ECD", "sts_sha256": "a"}], "models": []}))
@example(data=json.dumps({"format_version": 1, "datasets": [], "models": [
    {"display_name": "m", "checkpoint": "c", "description": "d", "metrics": {"ECD": {"corr": "high"}}}]}))
def test_fuzz_results(scratch, data):
    path = _write(scratch, _as_bytes(data), "results.json")
    try:
        results = read_results(str(path))
    except ValueError as error:
        assert str(path) in str(error)
        return
    # What a read results.json is for: tables and sweeps, which must work on it or name it.
    for make_table in (lambda: results_table([(str(path), results)]).to_markdown(),
                       lambda: sweep_markdown(collect_sweep("t", [("1", str(path))]))):
        try:
            make_table()
        except ValueError as error:
            assert str(path) in str(error)
