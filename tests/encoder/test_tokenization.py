import json
import random

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.encoder import tokenization
from dialoguecse_tf.encoder.tokenization import (
    SPECIAL_TOKENS,
    Tokenizer,
    build_vocab,
    load_vocab,
    write_vocab,
)

VOCAB = list(SPECIAL_TOKENS) + [
    "hello",  # 5
    "world",  # 6
    "##s",  # 7
    "un",  # 8
    "##afford",  # 9
    "##able",  # 10
    ",",  # 11
    "!",  # 12
    ".",  # 13
    "我",  # 14
    "想",  # 15
    "退",  # 16
    "货",  # 17
    "refund",  # 18
    "Hello",  # 19
    "the",  # 20
    "cafe",  # 21
]
ID = {token: index for index, token in enumerate(VOCAB)}
STRING_SPEC = tf.TensorSpec([None], tf.string)

ENGLISH = [
    "I would like to return my order, it arrived broken.",
    "Could you please check the delivery status of my package?",
    "The refund will be processed within three business days.",
    "Thanks for waiting! Your replacement has been shipped today.",
    "Hello, is the blue jacket still available in size medium?",
    "Unfortunately the discount code expired yesterday.",
]
CHINESE = [
    "我想退货，这个商品坏了。",
    "请问我的快递什么时候到？",
    "退款会在三个工作日内到账。",
    "您好，这件蓝色外套还有中号吗？",
    "优惠券已经过期了，不能使用。",
    "感谢您的耐心等待，换货已经发出。",
]




def _corpus(sentences, separator):
    rng = random.Random(0)
    return [separator.join(rng.sample(sentences, 2)) for _ in range(200)]


ENGLISH_CORPUS = _corpus(ENGLISH, " ")
CHINESE_CORPUS = _corpus(CHINESE, "")


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    write_vocab(VOCAB, path)
    return path


# Shared so its graph functions are traced once for the whole file.
@pytest.fixture(scope="module")
def tokenizer(vocab_file):
    return Tokenizer(vocab_file, max_seq_length=8)


def _ids(tokenizer, texts, **kwargs):
    return tokenizer(texts, **kwargs)["token_ids"].numpy().tolist()


def test_special_token_constants_and_ids(tokenizer):
    assert SPECIAL_TOKENS == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id) == (
        0, 1, 2, 3, 4,
    )
    assert tokenizer.vocab == VOCAB
    assert tokenizer.vocab_size == len(VOCAB)
    assert tokenizer.do_lower_case is True
    assert tokenizer.max_seq_length == 8


def test_exact_ids_with_wordpieces_and_punctuation(tokenizer):
    pieces = tokenizer.tokenize(["Hello, unaffordable worlds!"]).to_list()
    assert pieces == [[5, 11, 8, 9, 10, 6, 7, 12]]
    assert tokenizer.tokenize_to_strings("Hello, unaffordable worlds!") == [
        "hello", ",", "un", "##afford", "##able", "world", "##s", "!",
    ]
    # A word that cannot be covered by pieces becomes one [UNK], not partial pieces.
    assert tokenizer.tokenize_to_strings("worldz the") == ["[UNK]", "the"]


def test_lower_casing_switch(vocab_file):
    lower = Tokenizer(vocab_file, do_lower_case=True)
    cased = Tokenizer(vocab_file, do_lower_case=False)
    assert lower.tokenize(["Hello HELLO Café"]).to_list() == [[ID["hello"], ID["hello"], ID["cafe"]]]
    # Cased: no case folding and no accent stripping.
    assert cased.tokenize(["Hello HELLO Café hello"]).to_list() == [
        [ID["Hello"], ID["[UNK]"], ID["[UNK]"], ID["hello"]]
    ]


def test_cjk_characters_are_split(tokenizer):
    assert tokenizer.tokenize_to_strings("我想退货refund") == ["我", "想", "退", "货", "refund"]
    assert _ids(tokenizer, ["我想退货refund"]) == [[2, 14, 15, 16, 17, 18, 3, 0]]


def test_call_shapes_padding_mask_and_segments(tokenizer):
    outputs = tokenizer(["hello world", "Hello, worlds!"])
    assert set(outputs) == {"token_ids", "segment_ids", "padding_mask"}
    for tensor in outputs.values():
        assert tensor.dtype == tf.int32
        assert tensor.shape == (2, 8)
    assert outputs["token_ids"].numpy().tolist() == [
        [2, 5, 6, 3, 0, 0, 0, 0],
        [2, 5, 11, 6, 7, 12, 3, 0],
    ]
    assert outputs["padding_mask"].numpy().tolist() == [
        [1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 1, 1, 0],
    ]
    assert not outputs["segment_ids"].numpy().any()


def test_truncation_keeps_cls_and_sep(tokenizer):
    outputs = tokenizer(["hello world hello world hello"], max_seq_length=5)
    assert outputs["token_ids"].numpy().tolist() == [[2, 5, 6, 5, 3]]
    assert outputs["padding_mask"].numpy().tolist() == [[1, 1, 1, 1, 1]]
    assert _ids(tokenizer, ["hello world"], max_seq_length=2) == [[2, 3]]
    with pytest.raises(ValueError, match="max_seq_length"):
        tokenizer(["hello"], max_seq_length=1)


def test_empty_string_and_small_batches(tokenizer):
    assert _ids(tokenizer, [""]) == [[2, 3, 0, 0, 0, 0, 0, 0]]
    assert _ids(tokenizer, ["hello"]) == [[2, 5, 3, 0, 0, 0, 0, 0]]
    empty = tokenizer([])
    for tensor in empty.values():
        assert tensor.shape == (0, 8)
    assert tokenizer.tokenize(tf.constant([], tf.string)).to_list() == []


def test_inside_tf_function_with_string_signature(tokenizer):
    function = tf.function(tokenizer, input_signature=[STRING_SPEC])
    outputs = function.get_concrete_function().structured_outputs
    assert outputs["token_ids"].shape.as_list() == [None, 8]
    texts = ["Hello, worlds!", "", "我想退货refund"]
    assert function(tf.constant(texts))["token_ids"].numpy().tolist() == _ids(tokenizer, texts)
    assert function(tf.constant([], tf.string))["token_ids"].shape == (0, 8)


def test_inside_tf_data_map(tokenizer):
    texts = ["hello world", "我想退货refund", ""]
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(tokenizer)
    rows = np.concatenate([batch["token_ids"].numpy() for batch in dataset]).tolist()
    assert rows == _ids(tokenizer, texts)
    # Per-example mapping then batching gives the same dense [L] rows.
    single = tf.data.Dataset.from_tensor_slices(texts).map(
        lambda text: {key: value[0] for key, value in tokenizer(text[tf.newaxis]).items()}
    )
    assert [row["token_ids"].numpy().tolist() for row in single] == rows


def test_invalid_utf8_raises_clear_error(tokenizer):
    bad = tf.constant([b"hello", b"caf\xe9 world"])
    # tf_text alone would map the broken word to [UNK] without complaint.
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
        tokenizer(bad)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
        tokenizer.tokenize(bad)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
        tf.function(tokenizer, input_signature=[STRING_SPEC])(bad)
    dataset = tf.data.Dataset.from_tensor_slices(bad).batch(2).map(tokenizer)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not valid UTF-8"):
        list(dataset)


def test_python_token_id_helpers(tokenizer):
    assert tokenizer.tokens_to_ids(["hello", "##s", "nope"]) == [5, 7, 1]
    assert tokenizer.ids_to_tokens([2, 14, 3]) == ["[CLS]", "我", "[SEP]"]
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.ids_to_tokens([len(VOCAB)])


def test_detokenize_round_trips(vocab_file):
    tokenizer = Tokenizer(vocab_file, max_seq_length=16)
    texts = ["我想退货refund", "hello worlds unaffordable", "the 我 world", "Hello, worlds!", ""]
    ids = tokenizer(texts)["token_ids"]
    assert tokenizer.detokenize(ids) == [
        "我想退货refund",
        "hello worlds unaffordable",
        "the我world",
        "hello , worlds !",
        "",
    ]
    assert tokenizer.detokenize(ids.numpy()) == tokenizer.detokenize(ids)
    # Special tokens, [UNK] included, are dropped.
    assert tokenizer.detokenize([[2, 5, 1, 4, 6, 3, 0]]) == ["hello world"]


def test_build_vocab_special_tokens_and_determinism():
    corpus = ENGLISH_CORPUS
    vocab = build_vocab(corpus, vocab_size=200)
    assert vocab[:5] == list(SPECIAL_TOKENS)
    assert len(vocab) <= 200
    assert len(set(vocab)) == len(vocab)
    assert "##s" in vocab and "the" in vocab
    assert build_vocab(iter(corpus), vocab_size=200) == vocab
    # The `##` form of punctuation cannot occur: punctuation is always its own word.
    assert "," in vocab and "##," not in vocab
    with pytest.raises(ValueError, match="no words"):
        build_vocab(["", "  "], vocab_size=100)


@pytest.mark.parametrize("corpus", [ENGLISH_CORPUS, CHINESE_CORPUS], ids=["english", "chinese"])
def test_build_vocab_covers_its_corpus(tmp_path, corpus):
    vocab = build_vocab(corpus, vocab_size=200)
    write_vocab(vocab, tmp_path / "vocab.txt")
    tokenizer = Tokenizer(tmp_path / "vocab.txt")
    ids = tokenizer.tokenize(corpus).flat_values.numpy()
    assert np.mean(ids == tokenizer.unk_id) < 0.01


def test_build_vocab_on_chinese_keeps_characters():
    vocab = build_vocab(CHINESE_CORPUS, vocab_size=200)
    assert {"我", "想", "退", "货"} <= set(vocab)
    # Each CJK character is a word of its own, so "##我" would be dead weight.
    assert not any(token.startswith("##") and tokenization._is_cjk_char(token[2:]) for token in vocab)


def test_save_and_from_directory(tmp_path, vocab_file):
    original = Tokenizer(vocab_file, do_lower_case=False, max_seq_length=12)
    original.save(tmp_path / "saved")
    config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert config == {"do_lower_case": False, "max_seq_length": 12}
    restored = Tokenizer.from_directory(tmp_path / "saved")
    assert restored.vocab == VOCAB
    assert (restored.do_lower_case, restored.max_seq_length) == (False, 12)
    assert Tokenizer.from_directory(tmp_path / "saved", max_seq_length=6).max_seq_length == 6
    texts = ["Hello HELLO 我想退货refund"]
    assert _ids(restored, texts) == _ids(original, texts)


def test_from_directory_reads_huggingface_config_or_defaults(tmp_path):
    hf = tmp_path / "hf"
    hf.mkdir()
    write_vocab(VOCAB, hf / "vocab.txt")
    (hf / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "model_max_length": 512}))
    tokenizer = Tokenizer.from_directory(hf)
    assert (tokenizer.do_lower_case, tokenizer.max_seq_length) == (False, 128)
    (hf / "tokenizer_config.json").unlink()
    assert Tokenizer.from_directory(hf).do_lower_case is True


def test_vocab_file_errors_name_the_file(tmp_path):
    missing = tmp_path / "no_such_vocab.txt"
    with pytest.raises(FileNotFoundError, match="no_such_vocab.txt"):
        Tokenizer(missing)
    incomplete = tmp_path / "incomplete.txt"
    write_vocab(["[PAD]", "[UNK]", "[CLS]", "hello"], incomplete)
    with pytest.raises(ValueError, match=r"incomplete\.txt.*\[SEP\].*\[MASK\]"):
        load_vocab(incomplete)
    pad_not_zero = tmp_path / "pad_not_zero.txt"
    write_vocab(["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"], pad_not_zero)
    with pytest.raises(ValueError, match=r"pad_not_zero\.txt.*\[PAD\] as id 0"):
        Tokenizer(pad_not_zero)


def test_load_vocab_reads_what_write_vocab_wrote(tmp_path):
    tokens = VOCAB + ["\u2028", "é"]
    write_vocab(tokens, tmp_path / "v.txt")
    assert load_vocab(tmp_path / "v.txt") == tokens
    (tmp_path / "crlf.txt").write_bytes("\r\n".join(VOCAB).encode("utf-8"))
    assert load_vocab(tmp_path / "crlf.txt") == VOCAB


def test_saved_model_round_trip(tmp_path, tokenizer):
    module = tf.Module()
    module.tokenizer = tokenizer
    module.serve = tf.function(lambda texts: tokenizer(texts)["token_ids"], input_signature=[STRING_SPEC])
    tf.saved_model.save(module, str(tmp_path / "model"))

    import tensorflow_text  # noqa: F401  (registers the ops the loaded graph uses)

    loaded = tf.saved_model.load(str(tmp_path / "model"))
    texts = ["Hello, unaffordable worlds!", "我想退货refund", ""]
    assert loaded.serve(tf.constant(texts)).numpy().tolist() == _ids(tokenizer, texts)


# Text that NFKC_Casefold changes (full-width and CJK punctuation, full-width Latin, ß, ligatures, circled
# digits, half-width kana, a titlecase digraph), emoji, combining marks, accents, control and format
# characters, plain ASCII, empty.
FOLDED_TEXTS = ["亲，一般三到五天就能到哦", "「退货」。【急】", "ＡＢＣ ｔｅｘｔ！", "Straße ΣΊΣΥΦΟΣ", "ﬁnance ① ⒈",
                "ｶﾞｲﾄﾞ ǅemal", "thanks 😀👍🏽 👨‍👩‍👧", "cafe\u0301 na\u0308ive Ñandú",
                "a\x01b zero\u200bwidth soft\u00adhyphen", "where is my order?", ""]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_huggingface_normalizer_splits_words_as_tokenizer_does(do_lower_case):
    from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer
    from tokenizers import pre_tokenizers

    words = BasicTokenizer(**tokenization._basic_tokenizer_params(do_lower_case)).tokenize(FOLDED_TEXTS).to_list()
    normalizer = tokenization.huggingface_normalizer(do_lower_case)
    splitter = pre_tokenizers.BertPreTokenizer()
    for text, expected in zip(FOLDED_TEXTS, words):
        got = [word for word, _ in splitter.pre_tokenize_str(normalizer.normalize_str(text))]
        assert got == [word.decode() for word in expected], text
