"""MultiWorkerMirroredStrategy: two worker processes on this host, through the real entry point."""

import json
import os
import socket
import time

import numpy as np
import pytest
import tensorflow as tf

import forked_entry_points
from conftest import REPO_ROOT
from dialoguecse_tf.encoder.checkpoints import load_checkpoint
from dialoguecse_tf.stage import run_stage
from stage_runs import setup, stage  # noqa: F401 (fixture: tiny records, a dropout-free init checkpoint)

WORKER_TIMEOUT_S = 240
# Summing the gradient in two halves rounds differently from summing it at once, and Adam
# divides each update by the root of its squared gradient (plus epsilon: 1e-6 in BERT's AdamW,
# 1e-8 in the released DialogueCSE's Adam), which magnifies the rounding where a gradient
# nearly cancels out: up to ~3e-6 over random inits.
# A step on a different batch moves weights by ~1e-3 (the learning rate).
WEIGHT_TOLERANCE = 5e-5

# Runs finetune/run_finetuning.py as `python finetune/run_finetuning.py ...` would, and then
# dumps the backbone weights this worker holds, which the non-chief writes nowhere else.
# Runs the entry points as subprocesses (CI runs them; deselect with -m "not slow").
pytestmark = pytest.mark.slow

LAUNCHER = """
import runpy, sys
import numpy as np
from dialoguecse_tf.training import loop

dump_path, script, *flags = sys.argv[1:]
run_training_loop = loop.run_training_loop

def run_and_dump(strategy, model, *args, **kwargs):
    logs = run_training_loop(strategy, model, *args, **kwargs)
    np.savez(dump_path, *model.backbone.get_weights())
    return logs

loop.run_training_loop = run_and_dump
sys.argv = [script, *flags]
runpy.run_path(script, run_name="__main__")
"""


def free_ports(count: int) -> list:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def command_line(settings: dict) -> list:
    """The flags that give `settings` (flat, as `stage.configure` takes them) on a command line."""
    flags = []
    for name, value in settings.items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            flags.append(f"--{name}={item}")
    return flags


def run_workers(settings, work_dir, num_workers: int = 2) -> tuple:
    """Runs one worker process per task of a local cluster; fails (and kills all) if any fails.

    Returns each worker's final backbone weights and its output. Worker 0 is the chief: the
    cluster has no `chief` task.
    """
    os.makedirs(work_dir)
    flags = [*command_line(settings), "--distribution_strategy=multi_worker_mirrored"]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(num_workers)]}
    processes, logs = [], [os.path.join(work_dir, f"worker_{index}.log") for index in range(num_workers)]
    try:
        for index in range(num_workers):
            env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "2",
                   "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})}
            # Forked from a server that has imported TensorFlow and started none of its runtime
            # (no devices, no gRPC): each worker sets up its own, from its own TF_CONFIG.
            processes.append(forked_entry_points.start(
                ["-c", LAUNCHER, os.path.join(work_dir, f"worker_{index}.npz"),
                 str(REPO_ROOT / "finetune" / "run_finetuning.py"), *flags],
                logs[index], env=env, cwd=REPO_ROOT,
            ))
        deadline = time.monotonic() + WORKER_TIMEOUT_S
        # A worker whose peer died waits in a collective forever: stop at the first failure.
        while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
            if any(p.poll() not in (None, 0) for p in processes):
                break
            time.sleep(0.5)
        codes = [p.poll() for p in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    outputs = []
    for log in logs:
        with open(log) as reader:
            outputs.append(reader.read())
    if codes != [0] * num_workers:
        pytest.fail(f"worker exit codes {codes} (None: killed at the {WORKER_TIMEOUT_S}s limit)\n"
                    + "\n".join(f"--- worker {i}:\n{output[-3000:]}" for i, output in enumerate(outputs)))
    weights = []
    for index in range(num_workers):
        with np.load(os.path.join(work_dir, f"worker_{index}.npz")) as arrays:
            weights.append([arrays[f"arr_{i}"] for i in range(len(arrays.files))])
    return weights, outputs


def max_difference(a: list, b: list) -> float:
    assert [x.shape for x in a] == [y.shape for y in b]
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


def logged_losses(output_dir) -> dict:
    """Step -> loss, as the chief wrote them to TensorBoard."""
    losses = {}
    for path in tf.io.gfile.glob(os.path.join(output_dir, "tensorboard", "events.out.tfevents.*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                if value.tag == "loss":
                    losses[event.step] = float(tf.make_ndarray(value.tensor))
    return losses


def roll_back(checkpoint_dir: str, step: int) -> None:
    """Makes checkpoint `step` the latest, as if the run had been killed right after it."""
    for path in tf.io.gfile.glob(os.path.join(checkpoint_dir, "ckpt-*")):
        if int(os.path.basename(path).split(".")[0].split("-")[1]) > step:
            os.remove(path)
    tf.compat.v1.train.update_checkpoint_state(checkpoint_dir, os.path.join(checkpoint_dir, f"ckpt-{step}"))


def test_two_workers_train_and_resume_like_one_process(setup, tmp_path):
    # The default contrastive objective: DialogueCSE as released (Adam, exponential decay, clip 3).
    settings = {**setup, "num_train_steps": 5, "save_checkpoints_steps": 2, "log_steps": 1, "temperature": 0.1}
    single_losses = {}
    objective, config = stage(settings, output_dir=str(tmp_path / "single"))
    run_stage(objective, config, strategy=tf.distribute.OneDeviceStrategy("/cpu:0"), verbose=False,
              on_log=lambda step, logs: single_losses.update({step: logs["loss"]}))
    single = load_checkpoint(str(tmp_path / "single" / "encoder"), 10).backbone.get_weights()
    initial = load_checkpoint(config.init_checkpoint, 10).backbone.get_weights()
    multi = tmp_path / "multi"
    settings["output_dir"] = str(multi)
    (chief, other), _ = run_workers(settings, tmp_path / "workers")

    # Only the chief's outputs remain; the other worker's throwaway checkpoints are gone.
    assert sorted(os.listdir(multi)) == ["checkpoints", "config.json", "encoder", "tensorboard", "train_log.jsonl"]
    # The command line's settings are the in-process run's: the same objective, options and config.
    written = json.loads((multi / "config.json").read_text(encoding="utf-8"))
    reference = json.loads((tmp_path / "single" / "config.json").read_text(encoding="utf-8"))
    assert {**written, "output_dir": None, "distribution_strategy": None} == {
        **reference, "output_dir": None, "distribution_strategy": None}
    assert written["distribution_strategy"] == "multi_worker_mirrored"
    assert tf.train.latest_checkpoint(str(multi / "checkpoints")).endswith("ckpt-5")
    assert max_difference(load_checkpoint(str(multi / "encoder"), 10).backbone.get_weights(), chief) == 0.0
    between_workers = max_difference(chief, other)
    to_single = max(max_difference(chief, single), max_difference(other, single))
    trained = max_difference(single, initial)
    print(f"\nmax |difference|: worker 0 vs 1 {between_workers:.3g}, workers vs one process {to_single:.3g}, "
          f"training moved weights by up to {trained:.3g}")
    # Every worker applies the same all-reduced gradients: any difference at all is a bug.
    assert between_workers == 0.0
    assert trained > 5e-3
    assert to_single < WEIGHT_TOLERANCE
    # The loss is the global batch's: a worker that saw the whole batch would double it.
    losses = logged_losses(multi)
    assert sorted(losses) == [1, 2, 3, 4, 5]
    np.testing.assert_allclose([losses[s] for s in sorted(losses)], [single_losses[s] for s in sorted(losses)],
                               atol=1e-5)

    roll_back(str(multi / "checkpoints"), 2)
    (resumed, resumed_other), outputs = run_workers(settings, tmp_path / "resumed_workers")
    for output in outputs:
        assert f"resumed from {multi / 'checkpoints' / 'ckpt-2'} at step 2" in output
    print(f"resumed at step 2: worker 0 vs 1 {max_difference(resumed, resumed_other):.3g}, "
          f"vs uninterrupted {max_difference(resumed, chief):.3g}")
    assert max_difference(resumed, resumed_other) == 0.0
    assert max_difference(resumed, chief) < WEIGHT_TOLERANCE
    assert not os.path.exists(multi / "workertemp_1")
