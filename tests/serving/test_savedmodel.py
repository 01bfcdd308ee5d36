import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO_ROOT, tiny_bert_config_for, write_tiny_vocab
from forked_entry_points import run_python
from dialoguecse_tf.encoder.backbone import build_backbone, with_precision
from dialoguecse_tf.encoder.checkpoints import save_checkpoint
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.serving.layout import next_version
from dialoguecse_tf.serving.savedmodel import export_savedmodel

TEXTS = [
    "", "where is my order?", "i want a refund " * 40, "thanks 😀🙏 for the help", "我想退货 refund please",
    "Hello, ADDRESS change!",
]

CHECK_IN_FRESH_PROCESS = r"""
import json, sys
import numpy as np
import tensorflow as tf
import tensorflow_text  # registers the tokenizer ops before loading
model = tf.saved_model.load(sys.argv[1])
serve = model.signatures["serving_default"]
texts = json.loads(open(sys.argv[2], encoding="utf-8").read())
out = serve(text=tf.constant(texts))["embedding"].numpy()
np.save(sys.argv[3], out)
big = serve(text=tf.constant(["where is my order"] * 1000))["embedding"]
assert big.shape[0] == 1000
one = serve(text=tf.constant(["where is my order"]))["embedding"].numpy()
assert one.shape[0] == 1 and np.allclose(one[0], big[0].numpy(), atol=1e-5)
try:
    serve(text=tf.constant([b"ok", b"bad \xff bytes"]))
    print("NO ERROR")
except tf.errors.InvalidArgumentError as error:
    print("INVALID_UTF8:", "UTF-8" in str(error))
tokens = model.signatures["embed_tokens"]
print("TOKENS_OK", tokens(token_ids=tf.constant([[2, 5, 3]]), padding_mask=tf.constant([[1, 1, 1]]))["embedding"].shape)
"""


@pytest.fixture
def encoder(tiny_bert_config, tiny_vocab_file):
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=16)
    return SentenceEncoder(build_backbone(tiny_bert_config), tokenizer)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(encoder, {normalize: version folder}): one tiny encoder's checkpoint exported by
    export/export_savedmodel.py without and with --normalize, each to `<folder>/export/1`; the
    checks below read these two exports (an export costs seconds of tracing)."""
    folder = tmp_path_factory.mktemp("savedmodel")
    vocab_file = write_tiny_vocab(folder / "vocab.txt")
    config = tiny_bert_config_for(vocab_file)
    encoder = SentenceEncoder(build_backbone(config), Tokenizer(vocab_file, max_seq_length=16))
    checkpoint = save_checkpoint(str(folder / "ckpt"), encoder.backbone, config, encoder.tokenizer)
    paths = {}
    for normalize in (False, True):
        export_dir = folder / f"normalize_{normalize}" / "export"
        done = run_python([REPO_ROOT / "export" / "export_savedmodel.py", f"--checkpoint={checkpoint}",
                           f"--export_dir={export_dir}", "--max_seq_length=16", f"--normalize={normalize}"], text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        paths[normalize] = str(export_dir / "1")
    return encoder, paths


@pytest.mark.slow
@pytest.mark.parametrize("normalize", [False, True])
def test_export_serves_the_same_vectors_as_encode_in_a_fresh_process(tmp_path, exported, normalize):
    encoder, paths = exported
    path = paths[normalize]
    (tmp_path / "texts.json").write_text(json.dumps(TEXTS), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", CHECK_IN_FRESH_PROCESS, path, str(tmp_path / "texts.json"), str(tmp_path / "out.npy")],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    served = np.load(tmp_path / "out.npy")
    expected = encoder.encode(TEXTS, normalize=normalize)
    assert served.shape == expected.shape
    assert np.abs(served - expected).max() < 1e-5
    assert "INVALID_UTF8: True" in done.stdout
    assert "TOKENS_OK (1, 32)" in done.stdout


@pytest.mark.slow
def test_saved_model_cli_lists_both_signatures_and_versions_increase(exported):
    encoder, paths = exported
    export_dir = os.path.dirname(paths[False])
    assert next_version(export_dir) == 2
    cli = REPO_ROOT / ".venv" / "bin" / "saved_model_cli"
    shown = subprocess.run([str(cli) if cli.exists() else "saved_model_cli", "show", "--dir", paths[False], "--all"],
                           capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "signature_def['serving_default']" in shown.stdout
    assert "signature_def['embed_tokens']" in shown.stdout
    assert "inputs['text']" in shown.stdout and "outputs['embedding']" in shown.stdout
    with pytest.raises(FileExistsError):
        export_savedmodel(encoder, export_dir, version=1)


@pytest.mark.slow
def test_the_embed_cli_reads_an_export(tmp_path, exported):
    encoder, paths = exported
    (tmp_path / "in.txt").write_text("where is my order\n退货\n", encoding="utf-8")
    embedded = run_python(["-m", "dialoguecse_tf.cli.embed", f"--export_dir={os.path.dirname(paths[False])}",
                           f"--input_file={tmp_path / 'in.txt'}", f"--output_file={tmp_path / 'out.jsonl'}"], text=True)
    assert embedded.returncode == 0, embedded.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    expected = encoder.encode(["where is my order", "退货"])
    assert [r["text"] for r in rows] == ["where is my order", "退货"]
    assert np.abs(np.array([r["embedding"] for r in rows]) - expected).max() < 1e-5


@pytest.mark.slow
def test_the_dialogue_signature_gives_encode_dialogues_vectors(exported):
    from dialoguecse_tf.encoder.dialogue import DialogueEncoder
    from dialoguecse_tf.serving.savedmodel import ExportedEncoder

    encoder, paths = exported
    path = paths[False]
    dialogues = [
        [("user", "where is my order"), ("agent", "the order is late"), ("user", "i want a refund please")],
        [("agent", "hello"), ("user", "change my address " * 6), ("agent", "thanks")],
        [("a", "hi"), ("b", "hello")],
    ]
    # The export packs dialogues at the checkpoint's maximum length (24 positions) by default.
    expected = DialogueEncoder(encoder.backbone, encoder.tokenizer, max_seq_length=24).encode_dialogues(dialogues)
    served = ExportedEncoder(path).encode_dialogues(dialogues, batch_size=2)
    np.testing.assert_allclose(served, expected, atol=1e-5)
    import tensorflow as tf

    signature = tf.saved_model.load(path).signatures["embed_dialogues"]
    for lengths, message in (([0, 2], "at least one turn"), ([1, 2], "add up to the number of turns")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            signature(turns=tf.constant(["hi", "hello"]), speakers=tf.constant(["a", "b"]),
                      dialogue_lengths=tf.constant(lengths, tf.int32))


@pytest.mark.slow
def test_the_dialogue_signature_reads_dialogues_as_the_checkpoint_was_trained(tmp_path, tiny_bert_config,
                                                                              tiny_vocab_file):
    from dialoguecse_tf.encoder.dialogue import DialogueEncoder
    from dialoguecse_tf.serving.savedmodel import ExportConfig, ExportedEncoder, run_export

    backbone = build_backbone(tiny_bert_config)
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=16)
    # A dial2vec run trained with roles as token types on records that kept the recent turns.
    checkpoint = save_checkpoint(str(tmp_path / "dial2vec"), backbone, tiny_bert_config, tokenizer,
                                 metadata={"objective": "dial2vec", "truncation": "recent_turns",
                                           "role_segment_ids": True})
    dialogues = [[("user", "where is my order"), ("agent", "the order is late " * 3), ("user", "refund please")],
                 [("agent", "hello"), ("user", "thanks")]]
    path = run_export(ExportConfig(checkpoint, str(tmp_path / "export"), max_seq_length=16, dialogue_max_seq_length=12))
    served = ExportedEncoder(path).encode_dialogues(dialogues)
    trained = DialogueEncoder(backbone, tokenizer, 12, truncation="recent_turns", role_segment_ids=True)
    np.testing.assert_allclose(served, trained.encode_dialogues(dialogues), atol=1e-5)
    assert not np.allclose(served, DialogueEncoder(backbone, tokenizer, 12).encode_dialogues(dialogues), atol=1e-3)


@pytest.mark.slow
def test_the_token_and_dialogue_signatures_refuse_what_the_library_refuses(exported):
    import tensorflow as tf

    signatures = tf.saved_model.load(exported[1][False]).signatures
    tokens = signatures["embed_tokens"]
    served = tokens(token_ids=tf.constant([[2, 5, 3]]), padding_mask=tf.constant([[1, 1, 1]]))["embedding"]
    assert served.shape == (1, 32)
    for ids, mask, message in (([[2, 5, 6, 7, 3]], [[1, 1, 1, 1]], "token_ids and padding_mask must have one shape"),
                               ([[2, -5, 3]], [[1, 1, 1]], "token_ids must be >= 0"),
                               ([[2, 5, 3]], [[1, 2, 1]], "padding_mask must hold only 0 and 1")):
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            tokens(token_ids=tf.constant(ids), padding_mask=tf.constant(mask))
    dialogues = signatures["embed_dialogues"]
    served = dialogues(turns=tf.constant(["hi", "hello", "ok"]), speakers=tf.constant(["a", "b", "a"]),
                       dialogue_lengths=tf.constant([3], tf.int32))["embedding"]
    assert served.shape == (1, 32)
    empty = dialogues(turns=tf.constant([], tf.string), speakers=tf.constant([], tf.string),
                      dialogue_lengths=tf.constant([], tf.int32))["embedding"]
    assert empty.shape == (0, 32)
    for speakers, lengths in ((["a", "b", "c"], [3]), (["a", "a", "a"], [3]), (["a", "b", "b"], [2, 1])):
        with pytest.raises(tf.errors.InvalidArgumentError, match="exactly two speakers"):
            dialogues(turns=tf.constant(["hi", "hello", "ok"]), speakers=tf.constant(speakers),
                      dialogue_lengths=tf.constant(lengths, tf.int32))


@pytest.mark.slow
def test_an_export_counts_unknown_word_pieces_as_its_tokenizer_does(exported):
    """dialoguecse-embed --export_dir reports the [UNK] share of its input: the export keeps no
    vocabulary file, so it counts with its own tokenizer, as `Tokenizer.count_unknown` does."""
    from dialoguecse_tf.serving.savedmodel import ExportedEncoder

    encoder, paths = exported
    path = paths[False]
    texts = ["where is my order", "zebra quantum xylophone", "退 货 猫", "", "track my package please"]
    expected = encoder.tokenizer.count_unknown(texts)
    assert expected[0] > 0 and ExportedEncoder(path).count_unknown(texts) == expected


@pytest.mark.slow
@pytest.mark.parametrize("normalize", [False, True])
def test_the_export_writes_a_card_that_loads_as_it_says(exported, normalize):
    import re

    import yaml

    encoder, paths = exported
    path = paths[normalize]
    # The card's code loads "export/1", relative to the folder holding the export.
    folder = os.path.dirname(os.path.dirname(path))
    settings = json.loads(open(os.path.join(path, "export_config.json"), encoding="utf-8").read())
    assert settings["pooling"] == "mean" and settings["normalize"] is normalize and settings["version"] is None
    text = open(os.path.join(path, "README.md"), encoding="utf-8").read()
    block, body = text[len("---\n"):].split("\n---\n", 1)
    assert text.startswith("---\n") and yaml.safe_load(block) == {
        "pipeline_tag": "feature-extraction", "tags": ["tensorflow", "saved_model", "feature-extraction",
                                                       "dialoguecse_tf"]}
    assert all(f"`{name}`" in body for name in ("serving_default", "embed_tokens", "embed_dialogues"))
    assert ("L2-normalized" in body) is normalize
    [code] = re.findall(r"```python\n(.*?)```", body, flags=re.DOTALL)
    assert 'model_path = "export/1"' in code
    namespace = {}
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(code, "README.md", "exec"), namespace)
    finally:
        os.chdir(here)
    expected = encoder.encode(namespace["texts"], normalize=normalize)
    assert np.abs(namespace["embeddings"] - expected).max() < 1e-5
    assert [name for name in os.listdir(os.path.dirname(path)) if name.startswith(".")] == []


@pytest.mark.slow
def test_a_graph_with_xla_islands_is_not_exported(tmp_path, encoder):
    # A bfloat16 backbone runs XLA-compiled islands, which TF Serving does not run by default;
    # run_export turns them off, a direct export of such an encoder is refused and leaves nothing.
    islands = SentenceEncoder(with_precision(encoder.backbone, "bfloat16"), encoder.tokenizer)
    with pytest.raises(ValueError, match="XLA-compiled"):
        export_savedmodel(islands, str(tmp_path / "export"), version=1)
    assert os.listdir(tmp_path / "export") == []


@pytest.mark.slow
def test_a_bfloat16_export_keeps_its_signatures_float32_in_and_out(tmp_path, encoder, tiny_bert_config):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops before loading)

    from dialoguecse_tf.serving.savedmodel import ExportConfig, ExportedEncoder, run_export

    checkpoint = save_checkpoint(str(tmp_path / "ckpt"), encoder.backbone, tiny_bert_config, encoder.tokenizer)
    path = run_export(ExportConfig(checkpoint, str(tmp_path / "export"), max_seq_length=16, precision="bfloat16"))
    assert json.loads((tmp_path / "export" / "1" / "export_config.json").read_text())["precision"] == "bfloat16"
    # Plain ops only: TF Serving runs no XLA on CPU by default (bfloat16's compiled islands stay out).
    assert b"_XlaMustCompile" not in (tmp_path / "export" / "1" / "saved_model.pb").read_bytes()
    signatures = tf.saved_model.load(path).signatures
    for name, inputs in {"serving_default": {"text": tf.string},
                         "embed_tokens": {"token_ids": tf.int32, "padding_mask": tf.int32},
                         "embed_dialogues": {"turns": tf.string, "speakers": tf.string,
                                             "dialogue_lengths": tf.int32}}.items():
        _, given = signatures[name].structured_input_signature
        assert {key: spec.dtype for key, spec in given.items()} == inputs
        assert signatures[name].structured_outputs["embedding"].dtype == tf.float32
    served = ExportedEncoder(path).encode(TEXTS)
    expected = encoder.encode(TEXTS)
    assert served.dtype == np.float32
    cosines = (served * expected).sum(1) / (np.linalg.norm(served, axis=1) * np.linalg.norm(expected, axis=1))
    # Within bfloat16's rounding of float32's vectors (as tests/encoder/test_sentence.py bounds encode()).
    assert cosines.min() > 0.999, cosines
