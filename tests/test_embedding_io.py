import json
import subprocess
import sys

import numpy as np
import pytest

from dialoguecse_tf.embedding_io import nearest_neighbors, read_texts, write_embeddings


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
    with pytest.raises(ValueError, match=".npy or .jsonl"):
        write_embeddings(str(tmp_path / "v.txt"), ["a", "b"], vectors)


def test_nearest_neighbors_by_cosine():
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    result = nearest_neighbors(vectors, 1)
    assert [row[0][0] for row in result] == [1, 0, 1]
    assert result[0][0][1] == pytest.approx(0.9 / np.hypot(0.9, 0.1))


def test_embed_cli_end_to_end(tmp_path, tiny_bert_config, tiny_vocab_file):
    from dialoguecse_tf.checkpoints import save_checkpoint
    from dialoguecse_tf.encoder import build_backbone
    from dialoguecse_tf.sentence_encoder import SentenceEncoder
    from dialoguecse_tf.tokenization import Tokenizer

    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=12)
    backbone = build_backbone(tiny_bert_config)
    checkpoint = save_checkpoint(str(tmp_path / "ckpt"), backbone, tiny_bert_config, tokenizer)
    texts = ["where is my order?", "i want a refund", ""]
    (tmp_path / "in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / "out.npy"
    subprocess.run(
        [sys.executable, "-m", "dialoguecse_tf.cli.embed", f"--checkpoint={checkpoint}",
         f"--input_file={tmp_path / 'in.txt'}", f"--output_file={out}", "--max_seq_length=12"],
        check=True, capture_output=True,
    )
    expected = SentenceEncoder(backbone, tokenizer).encode(texts)
    np.testing.assert_allclose(np.load(out), expected, atol=1e-5)
    missing = subprocess.run(
        [sys.executable, "-m", "dialoguecse_tf.cli.embed", f"--input_file={tmp_path / 'in.txt'}"],
        capture_output=True, text=True,
    )
    assert missing.returncode != 0 and "checkpoint" in missing.stderr


def test_embed_cli_embeds_whole_dialogues(tmp_path, tiny_bert_config, tiny_vocab_file):
    import json

    from dialoguecse_tf.checkpoints import save_checkpoint
    from dialoguecse_tf.data.dialogue import Dialogue, Turn
    from dialoguecse_tf.data.readers import write_jsonl
    from dialoguecse_tf.dialogue_encoder import DialogueEncoder
    from dialoguecse_tf.encoder import build_backbone
    from dialoguecse_tf.tokenization import Tokenizer

    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=12)
    backbone = build_backbone(tiny_bert_config)
    checkpoint = save_checkpoint(str(tmp_path / "ckpt"), backbone, tiny_bert_config, tokenizer)
    dialogues = [Dialogue(f"d{i}", (Turn("u", "where is my order"), Turn("a", "it is late"), Turn("u", text)))
                 for i, text in enumerate(["thanks", "i want a refund please"])]
    write_jsonl(dialogues, tmp_path / "dialogues.jsonl")
    out = tmp_path / "out.jsonl"
    completed = subprocess.run(
        [sys.executable, "-m", "dialoguecse_tf.cli.embed", f"--checkpoint={checkpoint}",
         f"--input_file={tmp_path / 'dialogues.jsonl'}", "--dialogue_format=jsonl", "--dialogue_max_seq_length=24",
         f"--output_file={out}"], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["text"] for row in rows] == ["d0", "d1"]
    expected = DialogueEncoder(backbone, tokenizer, max_seq_length=24).encode_dialogues(dialogues)
    np.testing.assert_allclose([row["embedding"] for row in rows], expected, atol=1e-5)
