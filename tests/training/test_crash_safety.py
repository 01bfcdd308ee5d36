"""SIGKILL at random points, restart with the same command: the run ends as if never killed.

Each stage runs once uninterrupted (concurrently, as the reference) and once killed three
times at seeded random points mid-run (pretraining once more, while `encoder/` is written)
and restarted with the same command. After every kill each listed checkpoint must read back
completely and `encoder/` must be absent or complete; the restarted run must finish at
exactly `num_train_steps` with the reference's weights, embeddings and losses. Dropout is on,
so this also needs the dropout RNG state to be restored.
"""

import os
import random
import signal
import time

import numpy as np
import pytest
import tensorflow as tf

import stage_runs
from dialoguecse_tf.encoder.checkpoints import load_checkpoint, read_tf1_variables, find_tf1_checkpoint
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.training.loop import LoopConfig

# Runs the entry points as subprocesses (CI runs them; deselect with -m "not slow").
pytestmark = pytest.mark.slow

NUM_TRAIN_STEPS = 45
SAVE_CHECKPOINTS_STEPS = 3
NUM_KILLS = 3
KEEP_CHECKPOINT_MAX = LoopConfig.keep_checkpoint_max
MAX_KILL_DELAY_S = 0.12  # a few steps of the tiny models
END_KILL_MAX_DELAY_S = 0.01  # writing a tiny encoder takes a few milliseconds


def latest_step(output_dir) -> int:
    latest = tf.train.latest_checkpoint(os.path.join(output_dir, "checkpoints"))
    return int(latest.rsplit("-", 1)[1]) if latest else 0


def checkpoint_contents(path: str) -> dict:
    """Every variable's shape, after reading every tensor (which checks the shards' CRCs)."""
    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    for name in shapes:
        reader.get_tensor(name)
    return shapes


def assert_readable_state(output_dir) -> list:
    """What a restart would see is whole; returns the variable maps of the listed checkpoints.

    tf.train.CheckpointManager lists a new checkpoint before it deletes the oldest beyond
    `max_to_keep`, and lists the rest again after: a kill in between leaves that oldest one
    listed and part deleted (the restart deletes it). Every other listed checkpoint must be whole.
    """
    state = tf.train.get_checkpoint_state(os.path.join(output_dir, "checkpoints"))
    assert state is not None and state.all_model_checkpoint_paths
    listed = list(state.all_model_checkpoint_paths)
    assert len(listed) <= KEEP_CHECKPOINT_MAX + 1, listed
    being_deleted = listed[:max(0, len(listed) - KEEP_CHECKPOINT_MAX)]
    maps = [checkpoint_contents(path) for path in listed
            if path not in being_deleted or tf.io.gfile.exists(path + ".index")]
    encoder = os.path.join(output_dir, "encoder")
    if os.path.exists(encoder):
        assert load_checkpoint(encoder, stage_runs.MAX_SEQ_LENGTH).metadata["num_train_steps"] == NUM_TRAIN_STEPS
        assert latest_step(output_dir) == NUM_TRAIN_STEPS
    return maps


def kill_point_reached(output_dir, target: int, mid_run: bool) -> bool:
    if mid_run:
        return latest_step(output_dir) >= target
    # The encoder's write has begun: its staging folder or the folder itself shows.
    return any("encoder" in name for name in os.listdir(output_dir))


def kill_and_restart(args, output_dir, logs, rng, kill_at_end: bool) -> tuple:
    """Kills `args` NUM_KILLS times mid-run (and once more at its end), then lets it finish.

    Mid-run kills come a random delay after a random checkpoint appeared, so they land
    mid-step, mid-save or between; the end kill comes a shorter one after the encoder's
    write began. The state a restart would see is checked after every kill. Returns the
    variable maps of every checkpoint listed after a kill, and the step the last mid-run
    kill left.
    """
    resumed_at = 0
    maps = []
    for kill in range(NUM_KILLS + kill_at_end):
        mid_run = kill < NUM_KILLS
        if mid_run:
            target = resumed_at + rng.randint(1, 3) * SAVE_CHECKPOINTS_STEPS
            delay = rng.uniform(0.0, MAX_KILL_DELAY_S)
        else:
            target, delay = NUM_TRAIN_STEPS, rng.uniform(0.0, END_KILL_MAX_DELAY_S)
        log_path = logs / f"killed-{kill}.log"
        process = stage_runs.start(args, log_path)
        try:
            deadline = time.monotonic() + 120
            while (not kill_point_reached(output_dir, target, mid_run) and process.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.005)
            time.sleep(delay)
        finally:
            process.kill()
            process.wait()
        output = open(log_path, encoding="utf-8").read()
        if mid_run:
            assert process.returncode == -signal.SIGKILL, f"run ended before kill {kill}:\n{output[-3000:]}"
        if kill:
            assert f"at step {resumed_at}\n" in output
        maps += assert_readable_state(output_dir)
        saved = latest_step(output_dir)
        assert target <= saved and (saved < NUM_TRAIN_STEPS or not mid_run), (target, saved)
        if mid_run:
            last_mid_run_step = saved
        resumed_at = saved
    final = stage_runs.run_together({"restarted": args}, logs)["restarted"]
    assert f"at step {resumed_at}\n" in final
    return maps, last_mid_run_step


def run_killed_and_uninterrupted(stage_flags, script, tmp_path, seed, kill_at_end=False):
    """The same command twice: one uninterrupted (in the background) and one killed and restarted."""
    common = [*stage_flags, f"--num_train_steps={NUM_TRAIN_STEPS}", "--log_steps=1",
              f"--save_checkpoints_steps={SAVE_CHECKPOINTS_STEPS}"]
    killed_dir, reference_dir = tmp_path / "killed", tmp_path / "reference"
    killed_args = stage_runs.command(script, *common, f"--output_dir={killed_dir}")
    reference_args = stage_runs.command(script, *common, f"--output_dir={reference_dir}")
    reference = stage_runs.start(reference_args, tmp_path / "reference.log")
    try:
        maps, last_mid_run_step = kill_and_restart(killed_args, killed_dir, tmp_path, random.Random(seed), kill_at_end)
    except BaseException:
        reference.kill()
        reference.wait()
        raise
    stage_runs.finish(reference, tmp_path / "reference.log")

    assert latest_step(killed_dir) == NUM_TRAIN_STEPS
    assert [name for name in os.listdir(killed_dir) if "encoder" in name] == ["encoder"]
    final_maps = assert_readable_state(reference_dir)
    assert all(found == final_maps[0] for found in maps), "a listed checkpoint lacks variables"
    encoders = [load_checkpoint(str(folder / "encoder"), stage_runs.MAX_SEQ_LENGTH)
                for folder in (killed_dir, reference_dir)]
    assert [e.metadata["num_train_steps"] for e in encoders] == [NUM_TRAIN_STEPS] * 2
    weights = [read_tf1_variables(find_tf1_checkpoint(str(folder / "encoder"))) for folder in (killed_dir, reference_dir)]
    assert sorted(weights[0]) == sorted(weights[1])
    for name in weights[1]:
        np.testing.assert_allclose(weights[0][name], weights[1][name], rtol=0, atol=1e-6, err_msg=name)
    embeddings = [SentenceEncoder(e.backbone, e.tokenizer).encode(stage_runs.PROBE_SENTENCES) for e in encoders]
    np.testing.assert_allclose(embeddings[0], embeddings[1], rtol=0, atol=1e-5)
    # A killed run loses the summaries it had not flushed; each one that it wrote, and those of
    # the steps redone after a restart, must be the reference's.
    resumed_losses = stage_runs.scalars(killed_dir, "loss")
    reference_losses = stage_runs.scalars(reference_dir, "loss")
    assert sorted(reference_losses) == list(range(1, NUM_TRAIN_STEPS + 1))
    assert max(resumed_losses) > last_mid_run_step
    for step, loss in resumed_losses.items():
        assert loss == pytest.approx(reference_losses[step], rel=1e-5, abs=1e-6), step
    return encoders


def test_pretraining_survives_random_kills(tmp_path, tiny_vocab_file, tiny_bert_config):
    flags = stage_runs.write_pretraining_inputs(tmp_path, tiny_vocab_file, tiny_bert_config)
    # Both stages write the encoder with the same `save_checkpoint`; one covers kills around it.
    killed, _ = run_killed_and_uninterrupted(flags, stage_runs.PRETRAIN, tmp_path, seed=4, kill_at_end=True)
    assert killed.metadata["stage"] == "pretrain" and killed.metadata["objective"] == "mlm"
    assert len(killed.mlm_head) == 5


def test_finetuning_survives_random_kills(tmp_path, tiny_vocab_file, tiny_bert_config):
    flags = stage_runs.write_finetuning_inputs(tmp_path, tiny_vocab_file, tiny_bert_config)
    killed, _ = run_killed_and_uninterrupted(flags, stage_runs.FINETUNE, tmp_path, seed=1)
    assert killed.metadata["stage"] == "finetune" and killed.metadata["objective"] == "dialoguecse"
    assert killed.metadata["variant"] == "released" and killed.metadata["aggregation"] == "attention"
