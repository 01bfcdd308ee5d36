import json
import os

import numpy as np
import pytest
import tensorflow as tf
import keras

from dialoguecse_tf.training.loop import LoopConfig, NonFiniteLossError, build_train_step, run_training_loop
from dialoguecse_tf.training.optimizers import (
    ExponentialDecayFloor, WarmupLinearDecay, create_optimizer, resolve_num_train_steps,
)
from dialoguecse_tf.training.strategy import create_strategy
from dialoguecse_tf.training.train_log import TRAIN_LOG_FILE, read_train_log
from harness import run_serialization_test


def _tiny_model():
    return keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])


def _mean_square(model, batch, training_):
    return tf.reduce_mean(model(batch) ** 2), {}


def _ones(skip):
    """The loop tests' data: one batch of ones repeated, `skip` batches in as a resumed run reads it."""
    return tf.data.Dataset.from_tensors(tf.ones((4, 2))).repeat().skip(skip)


def test_warmup_then_linear_decay():
    schedule = WarmupLinearDecay(1e-3, num_warmup_steps=10, num_train_steps=110)
    values = [float(schedule(step)) for step in (0, 4, 9, 10, 60, 110, 200)]
    np.testing.assert_allclose(values, [1e-4, 5e-4, 1e-3, 1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
    run_serialization_test(schedule, (60,))


def test_resolve_num_train_steps():
    assert resolve_num_train_steps(None, 0.5, num_examples=1000, train_batch_size=50) == 10
    assert resolve_num_train_steps(7, None, 1000, 50) == 7
    with pytest.raises(ValueError, match="exactly one"):
        resolve_num_train_steps(7, 1.0, 1000, 50)


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    model = _tiny_model()
    optimizer = create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=0)
    calls = tf.Variable(0)

    def step_fn(model, batch, training_):
        calls.assign_add(1)
        loss = tf.reduce_mean(model(batch) ** 2)
        # The fourth step's loss is poisoned, as a diverging run's would be.
        return tf.where(calls > 3, tf.constant(np.nan), loss), {}

    config = LoopConfig(str(tmp_path), num_train_steps=10, save_checkpoints_steps=1, log_steps=1)
    with pytest.raises(NonFiniteLossError, match="loss became nan at step 4"):
        run_training_loop(tf.distribute.get_strategy(), model, optimizer, _ones, step_fn, config,
                          verbose=False)
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith("ckpt-3")


def test_logged_scalars_and_evaluations_go_to_a_json_lines_log_a_resumed_run_extends(tmp_path):
    model = _tiny_model()

    def step_fn(model, batch, training_):
        output = model(batch)
        return tf.reduce_mean(output ** 2), {"mean_output": tf.reduce_mean(output)}

    def run(num_train_steps):
        optimizer = create_optimizer(1e-2, num_train_steps=num_train_steps, num_warmup_steps=0)
        config = LoopConfig(str(tmp_path), num_train_steps=num_train_steps, save_checkpoints_steps=2,
                            log_steps=2, eval_steps=4)
        return run_training_loop(tf.distribute.get_strategy(), model, optimizer, _ones, step_fn,
                                 config, verbose=False, evaluate=lambda step: {"map": float(step)})

    logs = run(4)
    log_path = tmp_path / TRAIN_LOG_FILE
    with log_path.open("a") as writer:
        # A run that logged step 6 then died before its checkpoint: the resumed run logs step 6
        # again, and the later entry wins. Then a blank line and a line cut mid-write.
        writer.write(json.dumps({"step": 6, "loss": 999.0}) + "\n\n" + '{"step": 7, "lo')
    run(6)
    entries = read_train_log(str(log_path))
    assert [entry["step"] for entry in entries] == [2, 4, 4, 6, 6]
    assert entries[3]["loss"] != 999.0
    assert entries[1]["loss"] == logs["loss"] and entries[1]["mean_output"] == logs["mean_output"]
    assert {"learning_rate", "steps_per_second"} <= set(entries[0])
    assert entries[2] == {"step": 4, "eval_map": 4.0} and entries[4] == {"step": 6, "eval_map": 6.0}
    log_path.open("a").write("{broken\n")
    with pytest.raises(ValueError, match=r"train_log.jsonl:\d+: not a train log entry"):
        read_train_log(str(log_path))


def test_a_run_killed_while_evaluating_evaluates_its_step_when_it_resumes(tmp_path):
    model = _tiny_model()
    evaluated = []

    def evaluate(step):
        evaluated.append(step)
        return {"map": float(step)}

    def killed_at(kill_step):
        def kill(step, *logs):
            if step == kill_step:
                raise KeyboardInterrupt
        return kill

    def run(evaluate, on_log=None):
        optimizer = create_optimizer(1e-2, num_train_steps=8, num_warmup_steps=0)
        config = LoopConfig(str(tmp_path), num_train_steps=8, save_checkpoints_steps=2, log_steps=2, eval_steps=4)
        return run_training_loop(tf.distribute.get_strategy(), model, optimizer, _ones, _mean_square, config,
                                 verbose=False, evaluate=evaluate, on_log=on_log)

    # Killed while evaluating step 4, after its checkpoint.
    with pytest.raises(KeyboardInterrupt):
        run(killed_at(4))
    # Resumed at 4, which it evaluates first; then killed at 6 before that step's checkpoint.
    with pytest.raises(KeyboardInterrupt):
        run(evaluate, on_log=killed_at(6))
    assert evaluated == [4]
    # Resumed at 4 again: its evaluation is in the log, so it is not repeated.
    run(evaluate)
    assert evaluated == [4, 8]
    entries = read_train_log(str(tmp_path / TRAIN_LOG_FILE))
    assert [entry["step"] for entry in entries if "eval_map" in entry] == [4, 8]


def test_a_run_failing_at_its_first_step_leaves_no_log(tmp_path):
    model = _tiny_model()
    optimizer = create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=0)

    def step_fn(model, batch, training_):
        raise ValueError("the objective is broken")

    config = LoopConfig(str(tmp_path), num_train_steps=10, save_checkpoints_steps=1, log_steps=1)
    with pytest.raises(ValueError, match="the objective is broken"):
        run_training_loop(tf.distribute.get_strategy(), model, optimizer, _ones, step_fn, config,
                          verbose=False)
    assert os.listdir(tmp_path) == []


def test_a_resumed_run_drops_the_log_lines_past_its_checkpoint(tmp_path):
    model = _tiny_model()

    def run(num_train_steps):
        optimizer = create_optimizer(1e-2, num_train_steps=num_train_steps, num_warmup_steps=0)
        config = LoopConfig(str(tmp_path), num_train_steps=num_train_steps, save_checkpoints_steps=2,
                            log_steps=1)
        run_training_loop(tf.distribute.get_strategy(), model, optimizer, _ones, _mean_square, config,
                          verbose=False)

    run(2)
    log_path = tmp_path / TRAIN_LOG_FILE
    with log_path.open("a") as writer:
        # Steps 3 and 4 logged, then killed before the checkpoint at 4.
        writer.write(json.dumps({"step": 3, "loss": 999.0}) + "\n" + json.dumps({"step": 4, "loss": 999.0}) + "\n")
    run(4)
    logged = [json.loads(line) for line in log_path.read_text().splitlines()]
    assert [entry["step"] for entry in logged] == [1, 2, 3, 4]
    assert all(entry["loss"] != 999.0 for entry in logged)


def test_xla_train_step_matches_the_plain_one():
    def run(jit_compile):
        keras.utils.set_random_seed(3)
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        with strategy.scope():
            model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="gelu"), keras.layers.Dense(1)])
            optimizer = create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=0)
            optimizer.build(model.trainable_variables)
            step = tf.Variable(0, dtype=tf.int64)

        def step_fn(model, batch, training_):
            loss = tf.reduce_mean((model(batch) - 1.0) ** 2)
            return loss, {"mean_output": tf.reduce_mean(model(batch))}

        batches = tf.data.Dataset.from_tensor_slices(np.random.default_rng(0).normal(size=(5, 8, 3)).astype("float32"))
        iterator = iter(strategy.experimental_distribute_dataset(batches))
        train_step = build_train_step(strategy, model, optimizer, step_fn, step, jit_compile)
        losses = [float(train_step(iterator)[0]) for _ in range(5)]
        return losses, int(step.numpy())

    plain, xla = run(False), run(True)
    assert plain[1] == xla[1] == 5
    np.testing.assert_allclose(xla[0], plain[0], rtol=1e-5)
    assert plain[0][-1] < plain[0][0]


def test_loss_scaled_mixed_precision_step_trains_dialoguecse(tiny_bert_config):
    """The mechanics the GPU path uses (float16 compute, float32 weights, loss scaling), run on CPU."""
    from dialoguecse_tf.objectives.dialoguecse import DialogueCSEObjective, DialogueCSEOptions
    from tiny_dialoguecse import contrastive_batch, dialoguecse_model

    objective = DialogueCSEObjective(DialogueCSEOptions(variant="paper_text"))

    def step_fn(model, batch, training_):
        return objective.compute_loss(model, batch, training_, global_batch_size=3)

    keras.mixed_precision.set_dtype_policy("mixed_float16")
    try:
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        with strategy.scope():
            model = dialoguecse_model(tiny_bert_config, num_frozen_layers=0)
            optimizer = create_optimizer(1e-3, num_train_steps=10, num_warmup_steps=0, loss_scaling=True)
            optimizer.build(model.trainable_variables)
            step = tf.Variable(0, dtype=tf.int64)
        batch = contrastive_batch(tiny_bert_config.vocab_size)
        iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch).repeat()))
        train_step = build_train_step(strategy, model, optimizer, step_fn, step)
        before = [v.numpy() for v in model.trainable_variables]
        losses = [float(train_step(iterator)[0]) for _ in range(3)]
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.backbone.compute_dtype == "float16"
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert np.isfinite(losses).all()
    assert any(np.abs(v.numpy() - b).max() > 0 for v, b in zip(model.trainable_variables, before))


def test_two_replicas_clip_the_global_gradient_as_one_device_does(tmp_path):
    rng = np.random.default_rng(0)
    features = rng.normal(size=(8, 4)).astype("float32")
    # The first replica's half alone has a gradient far above the clip norm, the second's not:
    # clipping each half on its own would weight them differently from the global gradient.
    features[:4] *= 30.0
    labels = np.ones((8, 1), "float32")

    def step_fn(model, batch, training_):
        x, y = batch
        return tf.nn.compute_average_loss(tf.reduce_sum((model(x) - y) ** 2, axis=-1), global_batch_size=8), {}

    def run(strategy, name):
        with strategy.scope():
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.set_weights([np.full((4, 1), 0.1, "float32"), np.zeros(1, "float32")])
            optimizer = create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=0)
        config = LoopConfig(str(tmp_path / name), num_train_steps=3, log_steps=1)
        run_training_loop(strategy, model, optimizer,
                          lambda skip: tf.data.Dataset.from_tensors((features, labels)).repeat().skip(skip),
                          step_fn, config, verbose=False)
        return model.get_weights()

    one = run(tf.distribute.OneDeviceStrategy("/cpu:0"), "one")
    strategy = create_strategy("mirrored")
    two = run(strategy, "two")
    assert strategy.num_replicas_in_sync == 2
    # Keras's own per-replica clipping is off by ~7e-5 here.
    for a, b in zip(one, two):
        np.testing.assert_allclose(b, a, atol=1e-6)


def test_resumes_a_checkpoint_written_without_dropout_state(tmp_path, caplog):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3), keras.layers.Dropout(0.5), keras.layers.Dense(1)])
    optimizer = create_optimizer(1e-2, num_train_steps=4, num_warmup_steps=0)
    optimizer.build(model.trainable_variables)
    old_style = tf.train.Checkpoint(model=model, optimizer=optimizer, step=tf.Variable(2, dtype=tf.int64))
    tf.train.CheckpointManager(old_style, str(tmp_path / "checkpoints"), max_to_keep=1).save(checkpoint_number=2)

    def step_fn(model, batch, training_):
        return tf.reduce_mean(model(batch, training=True) ** 2), {}

    config = LoopConfig(str(tmp_path), num_train_steps=4, save_checkpoints_steps=1, log_steps=1)
    steps = []
    run_training_loop(tf.distribute.get_strategy(), model, optimizer, _ones, step_fn, config,
                      verbose=False, on_log=lambda step, logs: steps.append(step))
    assert steps == [3, 4]
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert any("holds no dropout state" in warning for warning in warnings), warnings
    saved = {name.split("/", 1)[0] for name, _ in tf.train.list_variables(tf.train.latest_checkpoint(str(tmp_path / "checkpoints")))}
    assert "random_state" in saved


def _tf1_adam_steps(params, grads_per_step, learning_rates, clip_norm, beta1=0.9, beta2=0.999, epsilon=1e-8):
    """The DialogueCSE release's update, written from its TF1 calls: tf.clip_by_global_norm
    (wrapper_bert.py:360) then tf.train.AdamOptimizer (l.222; TF1's formula: lr_t = lr *
    sqrt(1 - beta2^t) / (1 - beta1^t), var -= lr_t * m / (sqrt(v) + epsilon))."""
    params = [p.astype(np.float64).copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, (grads, lr) in enumerate(zip(grads_per_step, learning_rates), start=1):
        norm = np.sqrt(sum((g.astype(np.float64) ** 2).sum() for g in grads))
        grads = [g * clip_norm / max(norm, clip_norm) for g in grads]
        lr_t = lr * np.sqrt(1 - beta2**t) / (1 - beta1**t)
        for i, g in enumerate(grads):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            params[i] -= lr_t * m[i] / (np.sqrt(v[i]) + epsilon)
    return params


def test_released_dialoguecse_optimizer_is_the_release_recipe():
    """Adam without weight decay, lr max(lr0 * rate^(step / steps), floor) with no warmup,
    gradients clipped to global norm 3 (wrapper_bert.py:210-223, 360; config_bert.py:51-57)."""
    from dialoguecse_tf.objectives.dialoguecse import DialogueCSEObjective, DialogueCSEOptions

    defaults = DialogueCSEOptions()
    assert (defaults.lr_decay_rate, defaults.lr_decay_steps, defaults.min_learning_rate, defaults.clip_norm) == (
        0.98, 10000, 1e-5, 3.0)
    schedule = ExponentialDecayFloor(5e-5, 0.98, 10000, 1e-5)
    steps = np.array([0, 1, 5000, 10000, 123456, 796000, 797000, 2_000_000])
    expected = np.maximum(5e-5 * 0.98 ** (steps / 10000.0), 1e-5)
    np.testing.assert_allclose([float(schedule(s)) for s in steps], expected, rtol=1e-5)
    assert float(schedule(796000)) > 1e-5 and float(schedule(797000)) == pytest.approx(1e-5)

    # A fast schedule so that decay and floor both act within a few steps.
    options = DialogueCSEOptions(lr_decay_rate=0.5, lr_decay_steps=2, min_learning_rate=0.02, clip_norm=3.0)
    config = type("Config", (), {"learning_rate": 0.1, "num_warmup_steps": 0, "precision": "float32"})()
    optimizer = DialogueCSEObjective(options).create_optimizer(config, 100, None)
    assert isinstance(optimizer, keras.optimizers.Adam) and not isinstance(optimizer, keras.optimizers.AdamW)
    rng = np.random.default_rng(3)
    start = [rng.normal(size=(4, 3)).astype(np.float32), rng.normal(size=(3,)).astype(np.float32)]
    variables = [keras.Variable(p) for p in start]
    # Steps 0-2 are clipped (norm about 20), steps 3-5 are not (norm about 0.2).
    grads = [[rng.normal(size=p.shape).astype(np.float32) * (8.0 if step < 3 else 0.08) for p in start]
             for step in range(6)]
    for step_grads in grads:
        optimizer.apply_gradients(zip([tf.constant(g) for g in step_grads], variables))
    rates = np.maximum(0.1 * 0.5 ** (np.arange(6) / 2.0), 0.02)
    reference = _tf1_adam_steps(start, grads, rates, clip_norm=3.0)
    for variable, want in zip(variables, reference):
        np.testing.assert_allclose(variable.numpy(), want, rtol=1e-5, atol=1e-5)
    # Without the clip the first steps would differ: the test sees the clipping.
    unclipped = _tf1_adam_steps(start, grads, rates, clip_norm=1e9)
    assert not np.allclose(unclipped[0], reference[0], atol=1e-4)
