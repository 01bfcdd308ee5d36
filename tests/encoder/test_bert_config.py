import json

import pytest

from dialoguecse_tf.encoder.bert_config import BertConfig

GOOGLE_CHINESE_BASE = {
    "attention_probs_dropout_prob": 0.1,
    "directionality": "bidi",
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 512,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pooler_fc_size": 768,
    "pooler_num_attention_heads": 12,
    "pooler_num_fc_layers": 3,
    "pooler_size_per_head": 128,
    "pooler_type": "first_token_transform",
    "type_vocab_size": 2,
    "vocab_size": 21128,
}


def test_reads_google_chinese_config_and_writes_it_back(tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(GOOGLE_CHINESE_BASE))
    config = BertConfig.from_json_file(str(path))
    assert config.vocab_size == 21128 and config.num_hidden_layers == 12 and config.hidden_act == "gelu"
    out = tmp_path / "out.json"
    config.to_json_file(str(out))
    written = json.loads(out.read_text())
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size", "max_position_embeddings", "type_vocab_size",
                "hidden_dropout_prob", "attention_probs_dropout_prob", "hidden_act"):
        assert written[key] == GOOGLE_CHINESE_BASE[key]
    assert BertConfig.from_json_file(str(out)) == config


def test_missing_key_names_file_and_key(tmp_path):
    values = dict(GOOGLE_CHINESE_BASE)
    del values["num_attention_heads"]
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(ValueError, match=r"bert_config.json.*num_attention_heads"):
        BertConfig.from_json_file(str(path))


def test_invalid_values_rejected(tmp_path):
    with pytest.raises(ValueError, match="multiple of"):
        BertConfig(vocab_size=10, hidden_size=30, num_attention_heads=4)
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig(vocab_size=10, hidden_act="swish")
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        BertConfig.from_json_file(str(path))
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BertConfig.from_json_file(str(tmp_path / "nope.json"))


def test_huggingface_gelu_means_exact_gelu(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**GOOGLE_CHINESE_BASE, "model_type": "bert", "layer_norm_eps": 1e-7}))
    config = BertConfig.from_hf_json_file(str(path))
    assert config.hidden_act == "gelu_exact"
    assert config.layer_norm_eps == 1e-7
    path.write_text(json.dumps({**GOOGLE_CHINESE_BASE, "hidden_act": "gelu_new"}))
    assert BertConfig.from_hf_json_file(str(path)).hidden_act == "gelu"
    path.write_text(json.dumps({**GOOGLE_CHINESE_BASE, "model_type": "roberta"}))
    with pytest.raises(ValueError, match="roberta"):
        BertConfig.from_hf_json_file(str(path))
