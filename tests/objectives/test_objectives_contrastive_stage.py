import dataclasses
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from stage_runs import setup, stage  # noqa: F401 (fixture: tiny records, a dropout-free init checkpoint)
from dialoguecse_tf.encoder.checkpoints import load_checkpoint
from dialoguecse_tf.models.siamese import flatten_context
from dialoguecse_tf.objectives.contrastive import select_context_turns, select_negatives
from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK, CONTEXT_TURN_OFFSET)
from dialoguecse_tf.stage import ENCODER_DIR, run_stage

CONTRASTIVE_METRICS = ("positive_ranked_first", "positive_cosine", "negative_cosine", "cosine_gap")


def test_select_context_turns_keeps_nearest_in_dialogue_order():
    offsets = tf.constant([[-2, -1, 1, 2], [-1, 1, 0, 0]])
    batch = {
        CONTEXT_TURN_OFFSET: offsets,
        CONTEXT_TURN_MASK: tf.constant([[1, 1, 1, 1], [1, 1, 0, 0]]),
        CONTEXT_INPUT_IDS: tf.reshape(tf.range(8), (2, 4, 1)),
        CONTEXT_INPUT_MASK: tf.ones((2, 4, 1), tf.int32),
    }
    picked = select_context_turns(batch, 3)
    assert picked[CONTEXT_TURN_OFFSET].numpy().tolist() == [[-2, -1, 1], [-1, 1, 0]]
    assert picked[CONTEXT_INPUT_IDS].numpy()[:, :, 0].tolist() == [[0, 1, 2], [4, 5, 6]]
    assert picked[CONTEXT_TURN_MASK].numpy().tolist() == [[1, 1, 1], [1, 1, 0]]
    nearest = select_context_turns(batch, 1)
    assert nearest[CONTEXT_TURN_OFFSET].numpy().tolist() == [[-1], [-1]]
    ids = tf.reshape(tf.range(12), (1, 6, 2))
    kept = select_negatives({CANDIDATE_INPUT_IDS: ids, CANDIDATE_INPUT_MASK: ids}, 2)
    assert kept[CANDIDATE_INPUT_IDS].numpy().tolist() == [[[0, 1], [2, 3], [4, 5]]]


def test_flatten_context_matches_python_reference():
    cls, sep = 2, 3
    ids = np.array([[[cls, 7, 8, sep, 0], [cls, 9, sep, 0, 0], [cls, 5, sep, 0, 0]]])
    mask = (ids > 0).astype(np.int32)
    flat_ids, flat_mask = flatten_context(tf.constant(ids), tf.constant(mask), tf.constant([[1, 0, 1]]), cls, 6)
    assert flat_ids.numpy().tolist() == [[cls, 7, 8, sep, 5, sep]]
    assert flat_mask.numpy().tolist() == [[1, 1, 1, 1, 1, 1]]
    short_ids, short_mask = flatten_context(tf.constant(ids), tf.constant(mask), tf.constant([[1, 1, 0]]), cls, 9)
    assert short_ids.numpy().tolist() == [[cls, 7, 8, sep, 9, sep, 0, 0, 0]]
    assert short_mask.numpy().sum() == 6


# tests/objectives/test_objectives.py runs loss-falls, frozen-weights, logged-metrics, config, mirrored and
# resume checks on every objective and its defaults (released DialogueCSE aggregates by attention);
# this case adds the one pairing no default has, paper_text with attention, and the metadata.
@pytest.mark.slow
@pytest.mark.parametrize("objective_name, options", [
    ("dialoguecse", {"variant": "paper_text", "aggregation": "attention", "temperature": 0.1}),
], ids=["paper_text-attention"])
def test_loss_falls_and_frozen_layers_stay_bit_identical(setup, objective_name, options):
    run_name = "-".join([objective_name, *map(str, options.values())])
    objective, config = stage(setup, objective_name, **options, output_dir=setup["output_dir"] + run_name)
    logged = []
    run_stage(objective, config, verbose=False, on_log=lambda step, logs: logged.append(logs))
    losses = [logs["loss"] for logs in logged]
    assert np.mean(losses[-8:]) < np.mean(losses[:8]) - 0.1, losses
    # Every contrastive objective logs the same cosine metrics, on one scale.
    for logs in logged:
        assert set(CONTRASTIVE_METRICS) <= set(logs), sorted(logs)
        assert -1.0 - 1e-5 <= logs["positive_cosine"] <= 1.0 + 1e-5 and 0.0 <= logs["positive_ranked_first"] <= 1.0
        assert logs["cosine_gap"] == pytest.approx(logs["positive_cosine"] - logs["negative_cosine"], abs=1e-5)
    before = load_checkpoint(config.init_checkpoint, 10).backbone
    encoder = load_checkpoint(os.path.join(config.output_dir, ENCODER_DIR), 10)
    after = encoder.backbone
    for name in ("token_embedding", "position_embedding", "segment_embedding", "embeddings_layer_norm",
                 "transformer_layer_0", "pooled_dense"):
        for old, new in zip(before.get_layer(name).weights, after.get_layer(name).weights):
            np.testing.assert_array_equal(old.numpy(), new.numpy(), err_msg=f"{name} changed")
    changed = [not np.array_equal(o.numpy(), n.numpy())
               for o, n in zip(before.get_layer("transformer_layer_2").weights, after.get_layer("transformer_layer_2").weights)]
    assert all(changed)
    assert encoder.metadata["stage"] == "finetune" and encoder.metadata["objective"] == objective_name
    assert {key: encoder.metadata[key] for key in options} == options
    written = json.loads(open(os.path.join(config.output_dir, "config.json"), encoding="utf-8").read())
    assert written["objective"] == objective_name
    assert written["options"] == dataclasses.asdict(objective.options)
    assert written["options"]["num_frozen_layers"] == 1 and written["num_train_steps"] == 40


@pytest.mark.parametrize("objective_name", ["dialoguecse", "siamese_m"])
def test_records_with_too_few_negatives_or_turns_are_rejected(setup, objective_name):
    # The records carry 5 negatives and 4 turns on each side.
    with pytest.raises(ValueError, match="num_negatives=9 but the records"):
        run_stage(*stage(setup, objective_name, num_negatives=9), verbose=False)
    with pytest.raises(ValueError, match="num_context_turns=5 but the records"):
        run_stage(*stage(setup, objective_name, num_context_turns=5), verbose=False)


@pytest.mark.slow
def test_rerunning_a_finished_run_keeps_its_encoder(setup):
    objective, config = stage(setup, num_train_steps=3)
    logs = run_stage(objective, config, verbose=False)
    encoder_dir = os.path.join(config.output_dir, ENCODER_DIR)
    written = os.path.getmtime(os.path.join(encoder_dir, "dialoguecse_checkpoint.json"))
    assert run_stage(objective, config, verbose=False) == {}
    assert os.path.getmtime(os.path.join(encoder_dir, "dialoguecse_checkpoint.json")) == written
    assert load_checkpoint(encoder_dir, 10).metadata["final_logs"]["loss"] == logs["loss"]
