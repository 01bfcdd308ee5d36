"""DSE beyond the shared objective harness: its pair records, its model and its two learning rates."""

import dataclasses
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.preprocessing import PrepStats
from dialoguecse_tf.data.readers import read_corpus
from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.models import DSEModel
from dialoguecse_tf.objectives.dse import DSEObjective, DSEOptions, TwoRateAdam, pair_metrics
from dialoguecse_tf.records.pairs import (PAIR_INPUT_IDS, PAIR_INPUT_MASK, RECORD_TYPE_PAIRS, PairRecordSpec,
                                          has_more_words, iter_pairs, keyed_pairs, write_pair_records)
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.records.reader import read_dataset, read_records_info, resolve_records
from dialoguecse_tf.records.streaming import stable_hash


@pytest.mark.parametrize("text, words", [("I want a refund", 4), ("  where's my   order? ", 3), ("我想要退货", 5),
                                         ("订单 123ok", 3), ("", 0), ("a\u3000b\x1cc\xa0d", 4)])
def test_words_are_whitespace_runs_and_cjk_characters(text, words):
    assert (words == 0 or has_more_words(text, words - 1)) and not has_more_words(text, words)


def _dialogue(*texts):
    return Dialogue("d", tuple(Turn(str(i % 2), text) for i, text in enumerate(texts)))


def test_consecutive_pairs_are_filtered_after_pairing_as_in_the_release():
    stats = PrepStats()
    dialogue = _dialogue("one two three four", "too short", "five six seven eight", "nine ten eleven twelve",
                         "five six seven eight")
    pairs = list(iter_pairs([dialogue], "consecutive", 3, stats, 32))
    # The short turn removes both of its pairs; its neighbours are not paired with each other.
    assert pairs == [("five six seven eight", "nine ten eleven twelve"),
                     ("nine ten eleven twelve", "five six seven eight")]
    assert stats.dropped == {"pair_with_short_utterance": 2}
    stats = PrepStats()
    singles = list(iter_pairs([dialogue, dialogue], "self", 3, stats, 32))
    assert singles == [(t, t) for t in ("one two three four", "five six seven eight", "nine ten eleven twelve")]
    assert stats.dropped == {"short_utterance": 2, "repeated_utterance": 5}
    with pytest.raises(ValueError, match="pairing"):
        list(iter_pairs([dialogue], "adjacent", 3, stats, 32))


def test_pair_records_round_trip_on_real_sgd_dialogues(shared_data, tiny_vocab_file, tmp_path):
    dialogues = list(itertools.islice(read_corpus(str(shared_data / "sgd" / "train"), "sgd"), 5))
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=16)
    spec = PairRecordSpec(16)
    stats = write_pair_records(dialogues, tokenizer, str(tmp_path), spec)
    expected = [pair for _, pair in keyed_pairs(enumerate(dialogues), "consecutive", 3, PrepStats(), 16)]
    assert stats["samples_written"] == len(expected) > 10 and stats["utterances_capped"] == 0
    info_spec, info_stats = read_records_info(str(tmp_path), RECORD_TYPE_PAIRS)
    assert info_spec == spec and info_stats["min_words"] == 3 and info_stats["shuffle_seed"] == 24
    files, _, _ = resolve_records([str(tmp_path / "pairs-*")], RECORD_TYPE_PAIRS)
    written = [(record[PAIR_INPUT_IDS].numpy(), record[PAIR_INPUT_MASK].numpy())
               for record in read_dataset(files, spec)]
    # Every pair once, shuffled: sorted by a seeded hash of (seed 24, "pairs", "order", dialogue, turn).
    keys = [key for key, _ in keyed_pairs(enumerate(dialogues), "consecutive", 3, PrepStats(), 16)]
    expected = [pair for _, pair in sorted(zip([stable_hash(24, "pairs", "order", *key) for key in keys], expected))]
    assert expected != [pair for _, pair in keyed_pairs(enumerate(dialogues), "consecutive", 3, PrepStats(), 16)]
    packed = tokenizer([text for pair in expected for text in pair], max_seq_length=16)
    np.testing.assert_array_equal(np.stack([ids for ids, _ in written]), np.reshape(packed["token_ids"], (-1, 2, 16)))
    np.testing.assert_array_equal(np.stack([mask for _, mask in written]),
                                  np.reshape(packed["padding_mask"], (-1, 2, 16)))
    with pytest.raises(ValueError, match="no consecutive pair with more than 50 words"):
        write_pair_records(dialogues, tokenizer, str(tmp_path / "none"), spec, min_words=50)


def test_model_embeds_with_the_evaluation_pooling_and_projects_without_bias(tiny_bert_config, tiny_vocab_file):
    keras.utils.set_random_seed(0)
    backbone = build_backbone(tiny_bert_config)
    model = DSEModel(backbone, projection_size=8, num_length_buckets=2)
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=12)
    texts = ["where is my order", "i want a refund please", "hello", "track package"]
    packed = tokenizer(texts, max_seq_length=12)
    batch = {PAIR_INPUT_IDS: tf.reshape(packed["token_ids"], (2, 2, 12)),
             PAIR_INPUT_MASK: tf.reshape(packed["padding_mask"], (2, 2, 12))}
    outputs = model(batch)
    assert outputs["embeddings"].shape == (2, 2, tiny_bert_config.hidden_size)
    assert outputs["projections"].shape == (2, 2, 8)
    # The sentence embedding DSE trains is the one evaluation and export compute.
    encoded = SentenceEncoder(backbone, tokenizer, pooling="mean").encode(texts)
    np.testing.assert_allclose(np.reshape(outputs["embeddings"], (4, -1)), encoded, atol=1e-5)
    assert [tuple(v.shape) for v in model.head_variables()] == [(32, 32), (32, 8)]
    hidden = np.maximum(np.reshape(outputs["embeddings"], (4, -1)) @ model.head_variables()[0].numpy(), 0)
    np.testing.assert_allclose(np.reshape(outputs["projections"], (4, -1)), hidden @ model.head_variables()[1].numpy(),
                               atol=1e-5)


@pytest.mark.parametrize("head_init", ["normal", "uniform"])
def test_the_head_is_drawn_as_the_release_draws_it_or_as_nn_linear(tiny_bert_config, head_init):
    # 0.3 is far above BERT's 0.02, so that a normal draw leaves nn.Linear's uniform bounds.
    config = dataclasses.replace(tiny_bert_config, initializer_range=0.3)
    keras.utils.set_random_seed(0)
    model = DSEObjective(DSEOptions(projection_size=32, head_init=head_init)).build_model(
        build_backbone(config), config, None, 1)
    kernels = np.concatenate([v.numpy().ravel() for v in model.head_variables()])
    bound = 1 / np.sqrt(config.hidden_size)  # both kernels have fan-in d
    if head_init == "normal":
        assert np.std(kernels) == pytest.approx(0.3, rel=0.1) and np.abs(kernels).max() > bound
    else:
        assert np.std(kernels) == pytest.approx(bound / np.sqrt(3), rel=0.1) and np.abs(kernels).max() <= bound
    with pytest.raises(ValueError, match="head_init must be one of"):
        DSEOptions(head_init="xavier")


def _torch_adam(weights, gradients, learning_rate, beta_1=0.9, beta_2=0.999, epsilon=1e-8):
    """`torch.optim.Adam`'s update, written out: epsilon after the bias correction."""
    m, v = np.zeros_like(weights), np.zeros_like(weights)
    for step, gradient in enumerate(gradients, start=1):
        m = beta_1 * m + (1 - beta_1) * gradient
        v = beta_2 * v + (1 - beta_2) * gradient ** 2
        denominator = np.sqrt(v) / np.sqrt(1 - beta_2 ** step) + epsilon
        weights = weights - learning_rate / (1 - beta_1 ** step) * m / denominator
    return weights


def test_two_rate_adam_is_torch_adam_with_the_head_at_its_own_rate():
    start = np.array([0.5, -1.0, 2.0, 0.0], np.float32)
    encoder_weight, head_weight = keras.Variable(start), keras.Variable(start)
    optimizer = TwoRateAdam([head_weight], 100.0, learning_rate=1e-3, epsilon=1e-8)
    # Gradients near epsilon's size are where the two placements of epsilon part: at 3e-8 one
    # step of Keras's Adam moves a weight by a tenth of what PyTorch's moves it.
    gradients = [np.array([1.0, -2.0, 3e-8, -1e-7], np.float32), np.array([0.5, 1e-7, -3e-8, 2e-7], np.float32),
                 np.array([-0.25, 1.0, 5e-8, 0.0], np.float32)]
    for gradient in gradients:
        optimizer.apply_gradients([(tf.constant(gradient), encoder_weight), (tf.constant(gradient), head_weight)])
    np.testing.assert_allclose(encoder_weight.numpy(), _torch_adam(start.astype(np.float64), gradients, 1e-3),
                               rtol=1e-5)
    np.testing.assert_allclose(head_weight.numpy(), _torch_adam(start.astype(np.float64), gradients, 1e-1), rtol=1e-5)


def test_pair_metrics_by_hand():
    first = tf.constant([[1.0, 0.0], [0.0, 1.0]])
    second = tf.constant([[1.0, 0.0], [0.6, 0.8]])
    metrics = {k: float(v) for k, v in pair_metrics(first, second).items()}
    # Texts a0, a1, b0, b1; positives (a0, b0) = 1.0 and (a1, b1) = 0.8; each anchor's negatives
    # are the two texts that are neither itself nor its partner.
    cos = np.array([[1, 0, 1, 0.6], [0, 1, 0, 0.8], [1, 0, 1, 0.6], [0.6, 0.8, 0.6, 1]])
    negatives = [cos[0, 1], cos[0, 3], cos[1, 0], cos[1, 2], cos[2, 1], cos[2, 3], cos[3, 0], cos[3, 2]]
    assert metrics["positive_cosine"] == pytest.approx(0.9)
    assert metrics["negative_cosine"] == pytest.approx(np.mean(negatives))
    assert metrics["cosine_gap"] == pytest.approx(0.9 - np.mean(negatives))
    # b1's partner a1 (0.8) beats a0 and b0 (0.6): every anchor ranks its partner first.
    assert metrics["positive_ranked_first"] == pytest.approx(1.0)


def test_records_smaller_than_one_batch_are_refused(tiny_vocab_file, tmp_path):
    from dialoguecse_tf import stage

    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=16)
    dialogue = _dialogue("where is my order please", "i want a refund please", "track my package please")
    write_pair_records([dialogue], tokenizer, str(tmp_path / "pairs"), PairRecordSpec(16))
    objective, config = stage.configure("dse", train_file=(str(tmp_path / "pairs" / "pairs-*"),),
                                        output_dir=str(tmp_path / "run"), max_seq_length=16, train_batch_size=4,
                                        num_train_steps=1)
    with pytest.raises(ValueError, match=r"pairs: dse takes its negatives from the batch, but the records give 2 "
                                         r"examples, fewer than one batch of 4"):
        stage.run_stage(objective, config, verbose=False)


def test_in_batch_negative_batches_never_repeat_a_record():
    from dialoguecse_tf.training.strategy import make_dataset

    records = tf.data.Dataset.range(10)
    batches = list(make_dataset(records, 4, seed=1, distinct_batches=True, prefetch=False).take(12))
    for batch in batches:
        assert len(set(batch.numpy())) == 4
    # Two full batches per epoch (the remainder of 2 dropped), reshuffled every epoch.
    assert len({tuple(sorted(np.concatenate(batches[i:i + 2]))) for i in range(0, 12, 2)}) > 1
    resumed = list(make_dataset(records, 4, seed=1, skip_batches=5, distinct_batches=True,
                                prefetch=False).take(7))
    for a, b in zip(resumed, batches[5:]):
        np.testing.assert_array_equal(a, b)


def test_a_collapsed_encoder_ranks_no_partner_first():
    from dialoguecse_tf.objectives.dse import pair_metrics

    same = tf.ones((3, 4)) / 2.0
    assert float(pair_metrics(same, same)["positive_ranked_first"]) == 0.0
