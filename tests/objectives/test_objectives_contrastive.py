"""Context selection of the contrastive objectives across record layouts."""

import numpy as np
import pytest
import tensorflow as tf

from dialoguecse_tf import stage
from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.objectives.contrastive import candidate_metrics, select_context_turns, select_side_turns
from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CONTEXT_INPUT_IDS, CONTEXT_INPUT_MASK,
                                                CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET, RECORD_TYPE_CONTRASTIVE,
                                                ContrastiveRecordSpec, context_slots, write_contrastive_records)
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.records.reader import read_dataset, resolve_records

WORDS = "where is my order refund please change address discount code thanks hello".split()


def _dialogues():
    rng = np.random.default_rng(2)
    return [Dialogue(str(i), tuple(Turn(str(j % 2), " ".join(rng.choice(WORDS, 3))) for j in range(2 + i % 6)))
            for i in range(12)]


def test_context_slots_keep_each_side_in_dialogue_order():
    sides = ContrastiveRecordSpec(10, 3, 1, "sides")
    assert context_slots(6, 1, sides) == [None, None, 0, 2, 3, 4]
    assert context_slots(6, 5, sides) == [2, 3, 4, None, None, None]
    nearest = ContrastiveRecordSpec(10, 3, 1, "nearest")
    assert context_slots(6, 1, nearest) == [0, 2, 3]
    assert context_slots(2, 1, nearest) == [0, None, None]


def _read(folder, spec):
    files, read_spec, _ = resolve_records([str(folder / "contrastive-*")], RECORD_TYPE_CONTRASTIVE)
    assert read_spec == spec
    return next(iter(read_dataset(files, read_spec, shuffle_files=False).batch(1000)))


@pytest.mark.parametrize("turns", [1, 2, 3])
def test_nearest_turns_from_sides_records_equal_nearest_records(tmp_path, tiny_vocab_file, turns):
    """One set of "sides" records serves the paper-text variant and the siamese baselines:
    the turns they select are exactly those "nearest" records carry."""
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=8)
    batches = {}
    for layout in ("sides", "nearest"):
        spec = ContrastiveRecordSpec(8, 3, 2, layout)
        write_contrastive_records(_dialogues(), tokenizer, str(tmp_path / layout), spec, random_seed=5)
        batches[layout] = _read(tmp_path / layout, spec)
    from_sides = select_context_turns(batches["sides"], turns)
    from_nearest = select_context_turns(batches["nearest"], turns)
    for name in (CONTEXT_INPUT_IDS, CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET,
                 CANDIDATE_INPUT_IDS):
        valid = from_nearest[CONTEXT_TURN_MASK].numpy().astype(bool)
        a, b = from_sides[name].numpy(), from_nearest[name].numpy()
        if name.startswith("context"):
            # Padding turns may sit in other slots; the real turns and their order must agree.
            a = [row[mask] for row, mask in zip(a, from_sides[CONTEXT_TURN_MASK].numpy().astype(bool))]
            b = [row[mask] for row, mask in zip(b, valid)]
            assert all(np.array_equal(x, y) for x, y in zip(a, b)), name
        else:
            np.testing.assert_array_equal(a, b)


def test_select_side_turns_keeps_the_nearest_on_each_side():
    offsets = tf.constant([[-3, -2, -1, 1, 2, 0]])
    batch = {CONTEXT_TURN_OFFSET: offsets, CONTEXT_TURN_MASK: tf.cast(offsets != 0, tf.int64),
             CONTEXT_INPUT_IDS: offsets[..., None], CONTEXT_INPUT_MASK: offsets[..., None]}
    kept = select_side_turns(batch, 2, 3)
    assert kept[CONTEXT_TURN_OFFSET].numpy().tolist() == [[-2, -1, 1, 2]]
    assert select_side_turns(batch, 3, 3) is batch


def test_released_variant_refuses_nearest_records(tmp_path, tiny_vocab_file):
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=8)
    write_contrastive_records(_dialogues(), tokenizer, str(tmp_path / "records"),
                              ContrastiveRecordSpec(8, 3, 2, "nearest"), random_seed=5)
    objective, config = stage.configure("dialoguecse", train_file=[str(tmp_path / "records" / "contrastive-*")],
                                        output_dir=str(tmp_path / "run"), bert_config_file="unused",
                                        num_train_steps=1, num_negatives=2, max_seq_length=8)
    with pytest.raises(ValueError, match="context_layout='nearest'.*--context_layout=sides"):
        stage.run_stage(objective, config, verbose=False)


def test_a_positive_tied_with_a_negative_is_not_ranked_first():
    # Row 0 ties (a collapsed encoder, e.g. after lr 1e6, ties everywhere), row 1 wins, row 2 loses.
    scores = tf.constant([[0.5, 0.5, 0.1], [0.9, 0.5, 0.1], [0.1, 0.5, 0.1]])
    np.testing.assert_array_equal(candidate_metrics(scores, scores)["positive_ranked_first"], [0.0, 1.0, 0.0])
