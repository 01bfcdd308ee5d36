import numpy as np
import pytest
import tensorflow as tf
import keras

from dialoguecse_tf import training


def test_warmup_then_linear_decay():
    schedule = training.WarmupLinearDecay(1e-3, num_warmup_steps=10, num_train_steps=110)
    values = [float(schedule(step)) for step in (0, 4, 9, 10, 60, 110, 200)]
    np.testing.assert_allclose(values, [1e-4, 5e-4, 1e-3, 1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
    assert training.WarmupLinearDecay(**schedule.get_config()).get_config() == schedule.get_config()


def test_resolve_num_train_steps():
    assert training.resolve_num_train_steps(None, 0.5, num_examples=1000, train_batch_size=50) == 10
    assert training.resolve_num_train_steps(7, None, 1000, 50) == 7
    with pytest.raises(ValueError, match="exactly one"):
        training.resolve_num_train_steps(7, 1.0, 1000, 50)


def test_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = training.create_optimizer(1e-2, num_train_steps=10, num_warmup_steps=0)
    calls = tf.Variable(0)

    def step_fn(model, batch, training_):
        calls.assign_add(1)
        loss = tf.reduce_mean(model(batch) ** 2)
        # The fourth step's loss is poisoned, as a diverging run's would be.
        return tf.where(calls > 3, tf.constant(np.nan), loss), {}

    def dataset_fn(skip):
        return tf.data.Dataset.from_tensors(tf.ones((4, 2))).repeat().skip(skip)

    config = training.LoopConfig(str(tmp_path), num_train_steps=10, save_checkpoints_steps=1, log_steps=1)
    with pytest.raises(training.NonFiniteLossError, match="loss became nan at step 4"):
        training.run_training_loop(tf.distribute.get_strategy(), model, optimizer, dataset_fn, step_fn, config,
                                   verbose=False)
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith("ckpt-3")
