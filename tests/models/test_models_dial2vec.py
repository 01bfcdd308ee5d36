"""dial2vec's cross-representations against a NumPy reference of the released forward pass, its
records, and the dialogue encoder against the training model's embedding in every setting."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import read_corpus
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import save_checkpoint
from dialoguecse_tf.encoder.dialogue import DialogueEncoder, dialogue_settings
from dialoguecse_tf.encoder.packing import pack_dialogues, ragged_dialogues
from dialoguecse_tf.models.dial2vec import Dial2vecModel, cross_representations
from dialoguecse_tf.records.dialogues import (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK, DIALOGUE_ROLE_IDS,
                                              DIALOGUE_TURN_IDS, RECORD_TYPE_DIALOGUES, DialogueRecordSpec,
                                              make_negatives, usable_dialogues, write_dialogue_records)
from dialoguecse_tf.encoder.tokenization import Tokenizer, build_vocab, write_vocab
from dialoguecse_tf.records.reader import read_dataset, resolve_records


def _numpy_forward(h, mask, roles, turns, window):
    """network.py:95-127 for one sequence, with p1 = role 0 (Q) and p2 = role 1 (R)."""
    m_a = mask * (roles == 0)
    m_b = mask * (roles == 1)
    q, r = h * m_a[:, None], h * m_b[:, None]
    w = q @ r.T  # [L, L], a = role 0 rows, b = role 1 columns
    w = w * (np.abs(turns[:, None] - turns[None, :]) <= window)
    q_cross, r_cross = w.T @ q, w @ r

    def mean(x, m):
        return (x * m[:, None]).sum(0) / max(m.sum(), 1)

    return mean(q, m_a), mean(q_cross, m_b), mean(r, m_b), mean(r_cross, m_a)


@pytest.mark.parametrize("window", [0, 1, 10])
def test_cross_representations_match_the_released_forward(window):
    rng = np.random.default_rng(0)
    n, length, dim = 3, 9, 4
    h = rng.normal(size=(n, length, dim))
    mask = np.array([[1] * 9, [1] * 6 + [0] * 3, [1] * 4 + [0] * 5])
    roles = np.array([[0, 0, 0, 1, 1, 0, 0, 1, 1], [1, 1, 0, 0, 1, 1, 0, 0, 0], [0, 1, 0, 1, 0, 0, 0, 0, 0]])
    turns = np.array([[0, 0, 0, 1, 1, 2, 2, 3, 3], [0, 0, 1, 1, 2, 2, 0, 0, 0], [0, 1, 2, 3, 0, 0, 0, 0, 0]])
    got = cross_representations(tf.constant(h, tf.float64), mask, roles, turns, window)
    for row in range(n):
        expected = _numpy_forward(h[row], mask[row], roles[row], turns[row], window)
        for value, reference in zip(got, expected):
            np.testing.assert_allclose(value[row].numpy(), reference, rtol=1e-10, atol=1e-12)


def _dialogues(shared_data, count=6):
    return list(itertools.islice(read_corpus(str(shared_data / "sgd" / "dev"), "sgd"), count))


def _model_batch(packed):
    return {DIALOGUE_INPUT_IDS: packed["token_ids"][:, None], DIALOGUE_INPUT_MASK:
            packed["padding_mask"][:, None], DIALOGUE_ROLE_IDS: packed["role_ids"][:, None],
            DIALOGUE_TURN_IDS: packed["turn_ids"][:, None]}


@pytest.mark.slow
def test_encoder_embeds_as_the_training_model_and_by_either_pooling(shared_data, tiny_vocab_file, tiny_bert_config):
    keras.utils.set_random_seed(0)
    backbone = build_backbone(tiny_bert_config.replace(max_position_embeddings=64))
    tokenizer = Tokenizer(tiny_vocab_file)
    dialogues = _dialogues(shared_data)
    texts = [[turn.text for turn in d.turns] for d in dialogues]
    roles = [[0 if turn.speaker == d.turns[0].speaker else 1 for turn in d.turns] for d in dialogues]
    settings = {}
    for truncation, role_segment_ids in (("head", False), ("recent_turns", False), ("head", True)):
        encoder = DialogueEncoder(backbone, tokenizer, max_seq_length=40, truncation=truncation,
                                  role_segment_ids=role_segment_ids)
        vectors = encoder.encode_dialogues(dialogues, batch_size=8)
        packed = pack_dialogues(tokenizer, *ragged_dialogues(texts, roles), 40, truncation)
        model = Dial2vecModel(backbone, role_segment_ids=role_segment_ids)
        np.testing.assert_allclose(vectors, model(_model_batch(packed))["embedding"].numpy(), atol=1e-5)
        settings[truncation, role_segment_ids] = vectors
    # Each setting embeds differently: SGD dialogues are longer than 40 tokens, and the role-1
    # tokens' token type moves their outputs.
    assert not np.allclose(settings["head", False], settings["recent_turns", False])
    assert not np.allclose(settings["head", False], settings["head", True])
    vectors = settings["head", False]
    # The defaults are the release's BERT path: the first tokens, all-zero token types.
    encoder = DialogueEncoder(backbone, tokenizer, max_seq_length=40)
    assert (encoder.truncation, encoder.role_segment_ids, encoder.separators) == ("head", False, True)
    # Plain mean over the whole dialogue differs from the sum of the two role means.
    plain = DialogueEncoder(backbone, tokenizer, max_seq_length=40, pooling="mean").encode_dialogues(dialogues)
    assert not np.allclose(plain, vectors)
    # (speaker, text) pairs are the same dialogue as a `Dialogue`.
    pairs = [[(turn.speaker, turn.text) for turn in d.turns] for d in dialogues[:2]]
    np.testing.assert_allclose(encoder.encode_dialogues(pairs), vectors[:2], atol=1e-5)
    with pytest.raises(ValueError, match="dialogue: dial2vec needs exactly two interlocutors"):
        encoder.encode_dialogues([[("a", "hi"), ("a", "hello")]])


def test_a_checkpoint_is_embedded_as_its_training_read_dialogues(tmp_path, tiny_vocab_file, tiny_bert_config):
    cases = [
        ({"objective": "dial2vec", "truncation": "recent_turns", "role_segment_ids": True}, ("recent_turns", True)),
        ({"objective": "dial2vec", "truncation": "head", "role_segment_ids": False}, ("head", False)),
        # Written before the options existed: trained with roles as token types and recent turns.
        ({"objective": "dial2vec", "temperature": 0.2}, ("recent_turns", True)),
        ({"objective": "dse"}, ("head", False)),
        ({}, ("head", False)),
    ]
    for metadata, (truncation, role_segment_ids) in cases:
        assert dialogue_settings(metadata) == {"truncation": truncation, "role_segment_ids": role_segment_ids}
    config = tiny_bert_config.replace(max_position_embeddings=64)
    path = save_checkpoint(str(tmp_path / "encoder"), build_backbone(config), config, Tokenizer(tiny_vocab_file),
                           metadata=cases[0][0])
    loaded = DialogueEncoder.from_checkpoint(path, max_seq_length=40)
    assert (loaded.truncation, loaded.role_segment_ids, loaded.max_seq_length) == ("recent_turns", True, 40)


def test_negatives_keep_one_role_and_draw_the_other_from_its_pool():
    import random

    texts, roles = ["u1", "s1", "u2", "s2", "u3"], [0, 1, 0, 1, 0]
    pools = [["U-a", "U-b"], ["S-a", "S-b"]]
    for keep_role in ("random", "released"):
        for negative in make_negatives(texts, roles, pools, 20, keep_role, random.Random(0)):
            kept = [t == o for t, o in zip(negative, texts)]
            role_kept = {r for r, k in zip(roles, kept) if k}
            assert len(role_kept) == 1 and all(k == (r in role_kept) for r, k in zip(roles, kept))
            if keep_role == "released":
                assert role_kept == {1}
            replaced = [t for t, k in zip(negative, kept) if not k]
            assert all(t in pools[1 - next(iter(role_kept))] for t in replaced)
    kept_roles = {next(r for r, t, o in zip(roles, n, texts) if t == o)
                  for n in make_negatives(texts, roles, pools, 20, "random", random.Random(0))}
    assert kept_roles == {0, 1}


def test_dialogue_records_on_real_sgd(shared_data, tiny_vocab_file, tmp_path):
    tokenizer = Tokenizer(tiny_vocab_file)
    dialogues = _dialogues(shared_data, 12)
    stats = write_dialogue_records(dialogues, tokenizer, str(tmp_path), DialogueRecordSpec(48, 3),
                                   samples_per_dialogue=1)
    usable = usable_dialogues(dialogues, 5, PrepStats())
    assert stats["samples_written"] == len(usable) > 5
    assert stats["dialogues_truncated"] > 0  # SGD dialogues are longer than 48 tokens
    files, spec, info = resolve_records([str(tmp_path / "dialogues-*")], RECORD_TYPE_DIALOGUES)
    assert info["keep_role"] == "random" and spec.num_samples == 4
    record = next(iter(read_dataset(files, spec)))
    first = usable[0]
    packed = pack_dialogues(tokenizer, *ragged_dialogues([first[1]], [first[2]]), 48)
    np.testing.assert_array_equal(record[DIALOGUE_INPUT_IDS][0], packed["token_ids"][0])
    np.testing.assert_array_equal(record[DIALOGUE_ROLE_IDS][0], packed["role_ids"][0])
    # A negative shares the dialogue's roles and turn layout but not all of its tokens.
    assert not np.array_equal(record[DIALOGUE_INPUT_IDS][1], record[DIALOGUE_INPUT_IDS][0])
    with pytest.raises(ValueError, match="dial2vec needs at least 2"):
        write_dialogue_records(dialogues[:1], tokenizer, str(tmp_path / "one"), DialogueRecordSpec(48, 3))


def _read_records(folder):
    files, spec, info = resolve_records([str(folder / "dialogues-*")], RECORD_TYPE_DIALOGUES)
    ids = np.stack([record[DIALOGUE_INPUT_IDS].numpy() for record in read_dataset(files, spec)])
    return files, info, ids


def test_each_dialogue_gives_ten_samples_with_fresh_negatives_as_the_release(shared_data, tmp_path):
    dialogues = _dialogues(shared_data, 8)
    texts = [turn.text for dialogue in dialogues for turn in dialogue.turns]
    write_vocab(build_vocab(texts, vocab_size=3000, min_count=1), str(tmp_path / "vocab.txt"))
    tokenizer = Tokenizer(str(tmp_path / "vocab.txt"))
    usable = usable_dialogues(dialogues, 5, PrepStats())
    count = len(usable)

    def write(name, seed):
        write_dialogue_records(dialogues, tokenizer, str(tmp_path / name), DialogueRecordSpec(96, 3),
                               random_seed=seed)
        return _read_records(tmp_path / name)

    files, info, ids = write("a", 7)
    # The release's samples_per_line (generate_training.py:93) is 10.
    assert len(ids) == info["samples_written"] == 10 * count and count >= 5
    assert info["samples_per_dialogue"] == 10 and info["dialogues_written"] == count
    rounds = ids.reshape(10, count, 4, 96)
    # Round r holds every dialogue once, in the same order, with the dialogue itself unchanged ...
    assert all(np.array_equal(rounds[r, :, 0], rounds[0, :, 0]) for r in range(10))
    assert len({rounds[0, d, 0].tobytes() for d in range(count)}) == count
    # ... and negatives drawn afresh: no two of a dialogue's ten samples share their negatives.
    for d in range(count):
        assert len({rounds[r, d, 1:].tobytes() for r in range(10)}) == 10
    again_files, _, again = write("b", 7)
    np.testing.assert_array_equal(again, ids)
    assert [open(f, "rb").read() for f in again_files] == [open(f, "rb").read() for f in files]
    _, _, other = write("c", 8)
    np.testing.assert_array_equal(other.reshape(rounds.shape)[:, :, 0], rounds[:, :, 0])
    assert not np.array_equal(other, ids)
    with pytest.raises(ValueError, match="samples_per_dialogue must be a positive int"):
        write_dialogue_records(dialogues, tokenizer, str(tmp_path / "d"), DialogueRecordSpec(96, 3),
                               samples_per_dialogue=0)
