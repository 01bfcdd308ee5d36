import dataclasses
import json

import re

import numpy as np
import pytest

from forked_entry_points import run_python
from dialoguecse_tf.serving.embed import nearest_neighbors, read_texts, write_embeddings


def test_read_texts_keeps_empty_lines_and_names_bad_utf8(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_bytes("hello\n\n退货 please\r\n".encode("utf-8"))
    assert read_texts(str(path)) == ["hello", "", "退货 please"]
    path.write_bytes(b"fine\nbad \xff byte\n")
    with pytest.raises(ValueError, match=r"texts.txt:2: invalid UTF-8"):
        read_texts(str(path))


def test_write_npy_and_jsonl(tmp_path):
    vectors = np.arange(6, dtype=np.float32).reshape(2, 3)
    write_embeddings(str(tmp_path / "v.npy"), ["a", "b"], vectors)
    np.testing.assert_array_equal(np.load(tmp_path / "v.npy"), vectors)
    write_embeddings(str(tmp_path / "v.jsonl"), ["a", "é"], vectors)
    rows = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows[1] == {"text": "é", "embedding": [3.0, 4.0, 5.0]}
    with pytest.raises(ValueError, match=r"v.txt: the suffix must be one of .npy, .jsonl, .json"):
        write_embeddings(str(tmp_path / "v.txt"), ["a", "b"], vectors)


def test_nearest_neighbors_by_cosine():
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    result = nearest_neighbors(vectors, 1)
    assert [row[0][0] for row in result] == [1, 0, 1]
    assert result[0][0][1] == pytest.approx(0.9 / np.hypot(0.9, 0.1))


@pytest.mark.slow
def test_embed_cli_end_to_end(tmp_path, tiny_bert_config, tiny_vocab_file):
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.checkpoints import save_checkpoint
    from dialoguecse_tf.encoder.sentence import SentenceEncoder
    from dialoguecse_tf.encoder.tokenization import Tokenizer

    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=12)
    backbone = build_backbone(tiny_bert_config)
    checkpoint = save_checkpoint(str(tmp_path / "ckpt"), backbone, tiny_bert_config, tokenizer)
    texts = ["where is my order?", "i want a refund", ""]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    done = run_python(
        ["-m", "dialoguecse_tf.cli.embed", f"--checkpoint={checkpoint}",
         f"--input_file={tmp_path / 'in.txt'}", f"--output_file={out}", "--max_seq_length=12",
         "--nearest_neighbors=2"],
        check=True, text=True,
    )
    expected = SentenceEncoder(backbone, tokenizer).encode(texts)
    np.testing.assert_allclose(np.load(out), expected, atol=1e-5)
    # stdout is the listing alone (the progress bar went to stderr); the blank line is no neighbour.
    lines = done.stdout.splitlines()
    assert [lines[0], lines[2]] == texts[:2] and len(lines) == 4, done.stdout
    assert lines[1].endswith("  i want a refund") and lines[3].endswith("  where is my order?")
    assert "batch" in done.stderr
    missing = run_python(["-m", "dialoguecse_tf.cli.embed", f"--input_file={tmp_path / 'in.txt'}"], text=True)
    assert missing.returncode != 0 and "checkpoint" in missing.stderr


@pytest.mark.slow
def test_embed_cli_embeds_whole_dialogues(tmp_path, tiny_bert_config, tiny_vocab_file):
    import json

    from dialoguecse_tf.data.dialogue import Dialogue, Turn
    from dialoguecse_tf.data.readers import write_jsonl
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.checkpoints import save_checkpoint
    from dialoguecse_tf.encoder.dialogue import DialogueEncoder
    from dialoguecse_tf.encoder.tokenization import Tokenizer

    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=12)
    backbone = build_backbone(tiny_bert_config)
    checkpoint = save_checkpoint(str(tmp_path / "ckpt"), backbone, tiny_bert_config, tokenizer)
    dialogues = [Dialogue(f"d{i}", (Turn("u", "where is my order"), Turn("a", "it is late"), Turn("u", text)))
                 for i, text in enumerate(["thanks", "i want a refund please"])]
    write_jsonl(dialogues, tmp_path / "dialogues.jsonl")
    out = tmp_path / "out.jsonl"
    completed = run_python(
        ["-m", "dialoguecse_tf.cli.embed", f"--checkpoint={checkpoint}",
         f"--input_file={tmp_path / 'dialogues.jsonl'}", "--dialogue_format=jsonl", "--dialogue_max_seq_length=24",
         f"--output_file={out}"], text=True)
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["dialogue_id"] for row in rows] == ["d0", "d1"]
    expected = DialogueEncoder(backbone, tokenizer, max_seq_length=24).encode_dialogues(dialogues)
    np.testing.assert_allclose([row["embedding"] for row in rows], expected, atol=1e-5)


def test_json_output_is_one_json_array(tmp_path):
    vectors = np.arange(4, dtype=np.float32).reshape(2, 2)
    write_embeddings(str(tmp_path / "v.json"), ["a", "é"], vectors)
    assert json.loads((tmp_path / "v.json").read_text(encoding="utf-8")) == [
        {"text": "a", "embedding": [0.0, 1.0]}, {"text": "é", "embedding": [2.0, 3.0]}]
    write_embeddings(str(tmp_path / "d.json"), ["x"], vectors[:1], key_field="dialogue_id")
    assert json.loads((tmp_path / "d.json").read_text(encoding="utf-8")) == [
        {"dialogue_id": "x", "embedding": [0.0, 1.0]}]


def test_read_texts_drops_a_byte_order_mark(tmp_path):
    (tmp_path / "bom.txt").write_bytes("\ufeffhello\n\ufeffkept\n".encode("utf-8"))
    assert read_texts(str(tmp_path / "bom.txt")) == ["hello", "\ufeffkept"]
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf")
    assert read_texts(str(tmp_path / "bom.txt")) == [""]


def test_output_file_is_checked_before_any_work(tmp_path):
    from dialoguecse_tf.serving.embed import EmbedConfig, embed

    (tmp_path / "in.txt").write_text("hello\n", encoding="utf-8")
    (tmp_path / "a_file").write_text("x", encoding="utf-8")
    (tmp_path / "taken.npy").mkdir()
    # The checkpoint does not exist: only the output check can have raised.
    for output, message in ((tmp_path / "taken.npy", "is a directory"),
                            (tmp_path / "a_file" / "v.npy", "is not a directory"),
                            (tmp_path / "v.csv", "one of .npy, .jsonl, .json")):
        with pytest.raises(ValueError, match=message):
            embed(EmbedConfig(str(tmp_path / "in.txt"), str(output), checkpoint=str(tmp_path / "nowhere")))


def test_blank_lines_stay_rows_but_are_never_neighbours(tmp_path):
    from dialoguecse_tf.serving.embed import EmbedConfig, embed

    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    result = nearest_neighbors(vectors, 2, searchable=np.array([True, False, True, True]))
    assert [[j for j, _ in row] for row in result] == [[2, 3], [], [0, 3], [2, 0]]
    (tmp_path / "blank.txt").write_text("\n  \n\t\n", encoding="utf-8")
    with pytest.raises(ValueError, match="blank.txt: no text to embed"):
        embed(EmbedConfig(str(tmp_path / "blank.txt"), str(tmp_path / "v.npy"), checkpoint=str(tmp_path / "nowhere")))


def test_duplicate_dialogue_ids_are_kept_and_counted_as_every_reader_does(tmp_path, caplog):
    """One rule for the embedding CLI and the data-prep tools (they share `read_corpus`): a
    repeated id is kept, warned about once naming both places, and counted."""
    from dialoguecse_tf.data.dialogue import Dialogue, Turn
    from dialoguecse_tf.data.preprocessing import PrepStats
    from dialoguecse_tf.data.readers import read_corpus, write_jsonl

    turns = (Turn("u", "where is my order"), Turn("a", "it is late"))
    write_jsonl([Dialogue("x", turns), Dialogue("y", turns), Dialogue("x", turns), Dialogue("x", turns)],
                tmp_path / "d.jsonl")
    stats = PrepStats()
    dialogues = list(read_corpus(tmp_path / "d.jsonl", "jsonl", stats=stats))
    assert [d.dialogue_id for d in dialogues] == ["x", "y", "x", "x"] and stats["repeated_dialogue_ids"] == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and re.search(r"d.jsonl:3: dialogue id 'x' repeats the dialogue at .*d.jsonl:1",
                                            warnings[0])


def test_cr_only_line_endings_split_as_lf_and_crlf_do(tmp_path):
    from dialoguecse_tf.data.preprocessing import PrepStats
    from dialoguecse_tf.data.readers import read_corpus
    from dialoguecse_tf.serving.embed import read_texts

    (tmp_path / "mac.txt").write_bytes(b"first line\rsecond line\r\nthird line\nfourth\r")
    assert read_texts(str(tmp_path / "mac.txt")) == ["first line", "second line", "third line", "fourth"]
    lines = [b'{"id": "a", "turns": [{"speaker": "u", "text": "hi"}, {"speaker": "b", "text": "hello"}]}',
             b'{"id": "b", "turns": [{"speaker": "u", "text": "yo"}, {"speaker": "b", "text": "hey"}]}']
    (tmp_path / "mac.jsonl").write_bytes(b"\r".join(lines) + b"\r")
    dialogues = list(read_corpus(tmp_path / "mac.jsonl", "jsonl", stats=PrepStats()))
    assert [(d.line_number, d.turns[0].text) for d in dialogues] == [(1, "hi"), (2, "yo")]


def test_settings_for_the_other_mode_are_refused():
    from dialoguecse_tf.serving.embed import EmbedConfig

    with pytest.raises(ValueError, match="pooling cannot apply when embedding dialogues"):
        EmbedConfig("-", "v.npy", checkpoint="c", pooling="cls", dialogue_format="jsonl")
    with pytest.raises(ValueError, match="dialogue_max_seq_length cannot apply when embedding lines of text"):
        EmbedConfig("-", "v.npy", checkpoint="c", dialogue_max_seq_length=64)


@pytest.mark.slow
def test_an_export_refuses_other_settings_and_normalizes_on_request(tmp_path, tiny_bert_config, tiny_vocab_file):
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.checkpoints import save_checkpoint
    from dialoguecse_tf.encoder.tokenization import Tokenizer
    from dialoguecse_tf.serving.embed import EmbedConfig, check_export_request, embed
    from dialoguecse_tf.serving.savedmodel import ExportConfig, run_export

    checkpoint = save_checkpoint(str(tmp_path / "ckpt"), build_backbone(tiny_bert_config), tiny_bert_config,
                                 Tokenizer(tiny_vocab_file, max_seq_length=12))
    export = run_export(ExportConfig(checkpoint, str(tmp_path / "export"), max_seq_length=12))
    (tmp_path / "in.txt").write_text("where is my order\n\nrefund\n", encoding="utf-8")
    config = EmbedConfig(str(tmp_path / "in.txt"), str(tmp_path / "v.npy"), export_dir=str(tmp_path / "export"))
    plain = embed(config).vectors
    assert np.linalg.norm(plain, axis=1).min() > 1.5
    unit = embed(dataclasses.replace(config, normalize=True)).vectors
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(unit, plain / np.linalg.norm(plain, axis=1, keepdims=True), rtol=1e-5)
    # The values the export records may be given; others are refused naming the setting.
    embed(dataclasses.replace(config, max_seq_length=12, pooling="mean"))
    recorded = {"max_seq_length": 12, "pooling": "mean", "dialogue_pooling": "interlocutor"}
    for name, value, dialogue_format in (("max_seq_length", 8, None), ("pooling", "cls", None),
                                         ("dialogue_pooling", "mean", "jsonl")):
        with pytest.raises(ValueError, match=f"{name}={value!r}: the export .* cannot change it"):
            check_export_request(dataclasses.replace(config, dialogue_format=dialogue_format, **{name: value}),
                                 recorded, export)
    with pytest.raises(ValueError, match="normalize=False: the export .* normalizes"):
        check_export_request(dataclasses.replace(config, normalize=False), {"normalize": True}, export)


def test_an_export_computes_in_the_precision_it_was_written_with():
    from dialoguecse_tf.serving.embed import EmbedConfig, check_export_request

    config = EmbedConfig("-", "v.npy", export_dir="export")
    # Written before the setting existed: float32.
    check_export_request(dataclasses.replace(config, precision="float32"), {}, "export/1")
    with pytest.raises(ValueError, match="precision='bfloat16': the export export/1 was written with "
                                         "precision='float32' and cannot change it"):
        check_export_request(dataclasses.replace(config, precision="bfloat16"), {}, "export/1")
    check_export_request(dataclasses.replace(config, precision="bfloat16"), {"precision": "bfloat16"}, "export/1")
    with pytest.raises(ValueError, match="precision='float32': the export"):
        check_export_request(dataclasses.replace(config, precision="float32"), {"precision": "bfloat16"}, "export/1")
