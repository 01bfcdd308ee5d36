"""The dialogue-embedding protocols of a results row, each against its definition computed by hand
on a tiny model, and their selection per checkpoint in an evaluation run."""

import json

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.readers import write_jsonl
from dialoguecse_tf.encoder.backbone import build_backbone, run_backbone
from dialoguecse_tf.encoder.checkpoints import assign_bert_variables, save_checkpoint
from dialoguecse_tf.encoder.dialogue import DialogueEncoder
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.evaluation.baselines import CheckpointEmbedders
from dialoguecse_tf.evaluation.config import EvaluationConfig
from dialoguecse_tf.evaluation.dialogue_protocols import average_utterances
from dialoguecse_tf.evaluation.dialogue_sets import read_labelled_dialogues
from dialoguecse_tf.evaluation.registry import DIALOGUE_PROTOCOLS
from dialoguecse_tf.evaluation.tasks.dialogue_retrieval import retrieval_scores
from numpy_bert import random_bert_weights

DIALOGUES = [
    Dialogue("d0", (Turn("u", "where is my order"), Turn("a", "the order is late"), Turn("u", "refund please"))),
    Dialogue("d1", (Turn("a", "hello"), Turn("u", "i want to change the delivery address please " * 3),
                    Turn("a", "thanks"), Turn("u", "track my package"))),
    Dialogue("d2", (Turn("u", "discount code"), Turn("a", "thanks"))),
]


@pytest.fixture
def model(tiny_bert_config, tiny_vocab_file):
    config = tiny_bert_config.replace(max_position_embeddings=64)
    backbone = build_backbone(config)
    assign_bert_variables(backbone, random_bert_weights(config, seed=5), source="test")
    return config, backbone, Tokenizer(tiny_vocab_file, max_seq_length=16)


def test_utterance_mean_is_the_mean_of_each_utterances_encode(model):
    _, backbone, tokenizer = model
    embedders = CheckpointEmbedders(backbone, tokenizer, batch_size=4)
    built = embedders.dialogues("utterance_mean", 32, sentence_pooling="mean")
    sentences = SentenceEncoder(backbone, tokenizer, pooling="mean")
    expected = [sentences.encode([turn.text for turn in dialogue.turns]).mean(axis=0) for dialogue in DIALOGUES]
    np.testing.assert_allclose(built.embed_fn(DIALOGUES), np.stack(expected), atol=1e-5)
    assert "utterance_mean" in built.description and "at most 16 tokens" in built.description
    cls = embedders.dialogues("utterance_mean", 32, sentence_pooling="cls").embed_fn(DIALOGUES)
    assert not np.allclose(cls, np.stack(expected))
    np.testing.assert_array_equal(average_utterances(lambda texts: np.arange(len(texts))[:, None] * 1.0, DIALOGUES),
                                  [[1.0], [4.5], [7.5]])


def test_plain_mean_is_the_mean_over_the_first_tokens_without_separators(model):
    _, backbone, tokenizer = model
    length = 12
    vectors = CheckpointEmbedders(backbone, tokenizer).dialogues("plain_mean", length).embed_fn(DIALOGUES)
    lengths = []
    for dialogue, vector in zip(DIALOGUES, vectors):
        # The release with --use_sep_token False: [CLS], then every turn's word pieces, the first
        # max_seq_length of them, token types 0, the mean over all of them ([CLS] included).
        ids = [tokenizer.cls_id] + [int(i) for turn in dialogue.turns for i in tokenizer.tokenize([turn.text])[0]]
        lengths.append(len(ids))
        ids = tf.constant([ids[:length]], tf.int32)
        outputs = run_backbone(backbone, ids, tf.ones_like(ids))["sequence_output"].numpy()[0]
        np.testing.assert_allclose(vector, outputs.mean(axis=0), atol=1e-5)
    assert lengths[1] > length > lengths[2]  # d1 is cut, d2 is not


def test_utterance_token_mean_reads_each_utterance_as_cls_and_word_pieces_without_sep(model):
    """SimCSE in dial2vec's comparison: "[CLS] u" (no [SEP]), its first max_seq_length tokens,
    the mean over all of them, then the mean over the dialogue's utterances."""
    _, backbone, tokenizer = model
    length = 12
    embedders = CheckpointEmbedders(backbone, tokenizer, batch_size=3)
    built = embedders.dialogues("utterance_token_mean", length)
    expected, cut = [], 0
    for dialogue in DIALOGUES:
        vectors = []
        for turn in dialogue.turns:
            ids = [tokenizer.cls_id] + [int(i) for i in tokenizer.tokenize([turn.text])[0]]
            cut += len(ids) > length
            ids = tf.constant([ids[:length]], tf.int32)
            vectors.append(run_backbone(backbone, ids, tf.ones_like(ids))["sequence_output"].numpy()[0].mean(axis=0))
        expected.append(np.mean(vectors, axis=0))
    np.testing.assert_allclose(built.embed_fn(DIALOGUES), np.stack(expected), atol=1e-5)
    assert cut == 1 and "no [SEP]" in built.description
    with_sep = embedders.dialogues("utterance_mean", length, sentence_pooling="mean").embed_fn(DIALOGUES)
    assert not np.allclose(with_sep, np.stack(expected), atol=1e-3)


@pytest.mark.slow
def test_interlocutor_reads_dialogues_as_the_checkpoint_was_trained(model):
    _, backbone, tokenizer = model
    trained = {"objective": "dial2vec", "truncation": "recent_turns", "role_segment_ids": True}
    got = CheckpointEmbedders(backbone, tokenizer, metadata=trained).dialogues("interlocutor", 20)
    expected = DialogueEncoder(backbone, tokenizer, 20, truncation="recent_turns", role_segment_ids=True)
    np.testing.assert_allclose(got.embed_fn(DIALOGUES), expected.encode_dialogues(DIALOGUES), atol=1e-5)
    untrained = CheckpointEmbedders(backbone, tokenizer).dialogues("interlocutor", 20).embed_fn(DIALOGUES)
    np.testing.assert_allclose(untrained, DialogueEncoder(backbone, tokenizer, 20).encode_dialogues(DIALOGUES),
                               atol=1e-5)
    assert not np.allclose(untrained, got.embed_fn(DIALOGUES), atol=1e-4)
    with pytest.raises(ValueError, match="unknown dialogue protocol 'mean'"):
        CheckpointEmbedders(backbone, tokenizer).dialogues("mean", 20)


def test_one_protocol_per_checkpoint_or_one_for_all():
    base = {"checkpoint": ("a", "b"), "output_dir": "out", "dialogue_file": ("x",)}
    assert EvaluationConfig(**base).dialogue_protocols() == ["interlocutor", "interlocutor"]
    assert EvaluationConfig(**base, dialogue_protocol=("plain_mean",)).dialogue_protocols() == ["plain_mean"] * 2
    pair = ("plain_mean", "utterance_mean")
    assert EvaluationConfig(**base, dialogue_protocol=pair).dialogue_protocols() == list(pair)
    with pytest.raises(ValueError, match="one dialogue_protocol for every checkpoint or one per checkpoint"):
        EvaluationConfig(**base, dialogue_protocol=pair + ("interlocutor",))
    with pytest.raises(ValueError, match="unknown dialogue protocol 'cls'"):
        EvaluationConfig(**base, dialogue_protocol=("cls",))
    assert set(DIALOGUE_PROTOCOLS) == {"interlocutor", "utterance_mean", "utterance_token_mean", "plain_mean"}


def test_a_run_scores_each_row_by_its_protocol_and_the_table_says_which(tmp_path, model):
    from dialoguecse_tf.evaluation.runner import run_evaluation

    config, backbone, tokenizer = model
    checkpoint = save_checkpoint(str(tmp_path / "tiny"), backbone, config, tokenizer)
    words = {"A_1": "order refund money back", "B_1": "delivery address ship package", "C_2": "hello thanks"}
    dialogues = [Dialogue(f"{service}-{i}", tuple(Turn("USER" if t % 2 == 0 else "SYSTEM", f"{text} {t}")
                                                  for t in range(4)), services=(service,))
                 for service, text in words.items() for i in range(3)]
    write_jsonl(dialogues, tmp_path / "dialogues.jsonl")
    evaluation = EvaluationConfig(checkpoint=(checkpoint, checkpoint), model_name=("Tiny plain", "Tiny utterances"),
                                  dialogue_protocol=("plain_mean", "utterance_mean"), output_dir=str(tmp_path / "eval"),
                                  dataset_name=("toy",), dialogue_file=(str(tmp_path / "dialogues.jsonl"),),
                                  max_seq_length=16, dialogue_max_seq_length=32)
    results = run_evaluation(evaluation)
    assert [m["dialogue_protocol"] for m in results["models"]] == ["plain_mean", "utterance_mean"]
    data = read_labelled_dialogues(str(tmp_path / "dialogues.jsonl"))
    sentences = SentenceEncoder(backbone, tokenizer, pooling="mean")
    expected = retrieval_scores(average_utterances(sentences.encode, data.dialogues), data.labels)
    assert results["models"][1]["metrics"]["toy"]["dialogue_map"] == pytest.approx(expected["dialogue_map"], abs=1e-6)
    table = (tmp_path / "eval" / "results.md").read_text(encoding="utf-8")
    assert "each row's embedding protocol" in table
    assert "Tiny plain: plain_mean; Tiny utterances: utterance_mean." in table
    json.dumps(results)
