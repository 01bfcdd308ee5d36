"""The training loop the one training stage runs: checkpoints, resumption, logging, evaluation.

A custom loop (as in Model Garden) rather than `Model.fit`, because a run killed at any step
must resume at exactly that step with its optimizer state, on any `tf.distribute` strategy:
the step counter, model and optimizer live in one `tf.train.Checkpoint`, and the input
pipeline is deterministic for a seed, so a restarted run skips the batches already seen.
"""

import dataclasses
import os
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from dialoguecse_tf.progress import Progress
from dialoguecse_tf.training.grad_cache import random_state_variables
from dialoguecse_tf.training.strategy import distribute_global_batches, worker_scratch_dir
from dialoguecse_tf.training.train_log import TRAIN_LOG_FILE, append_log, logged_evaluation, open_logs

CHECKPOINT_DIR = "checkpoints"


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    output_dir: str
    num_train_steps: int
    save_checkpoints_steps: int = 1000
    log_steps: int = 10
    keep_checkpoint_max: int = 3
    eval_steps: int = 0  # evaluate every this many steps (0: only at the end)
    jit_compile: bool = False


class NonFiniteLossError(FloatingPointError):
    pass


def build_train_step(strategy, model, optimizer, step_fn, step: tf.Variable, jit_compile: bool = False,
                     replica_gradients=None):
    """The graph function of one training step: `iterator -> (global loss, metrics)`.

    `jit_compile` compiles each replica's forward and backward pass with XLA; the
    optimizer update stays outside, because under MirroredStrategy it aggregates
    gradients across replicas, which XLA cannot compile. `replica_gradients`, `(model,
    optimizer, batch) -> (loss, metrics, gradients)`, computes each replica's gradient instead
    of one tape over `step_fn` (in several passes: `accumulation`, `grad_cache`).
    """

    def compute_gradients(batch):
        if replica_gradients is not None:
            return replica_gradients(model, optimizer, batch)
        with tf.GradientTape() as tape:
            loss, metrics = step_fn(model, batch, True)
            # The identity unless the optimizer does loss scaling (mixed precision).
            scaled_loss = optimizer.scale_loss(loss)
        return loss, metrics, tape.gradient(scaled_loss, model.trainable_variables)

    if jit_compile:
        compute_gradients = tf.function(compute_gradients, jit_compile=True)

    def replica_step(batch):
        loss, metrics, gradients = compute_gradients(batch)
        variables = model.trainable_variables
        # Weights the objective never touches (e.g. BERT's pooler under mean pooling) get no
        # gradient; this runs once, at tracing, so the note appears once per run.
        unused = [v.path for g, v in zip(gradients, variables) if g is None]
        if unused:
            logging.info("not updated by this objective: %s", unused)
        optimizer.apply_gradients([(g, v) for g, v in zip(gradients, variables) if g is not None])
        return loss, metrics

    @tf.function
    def train_step(iterator):
        loss, metrics = strategy.run(replica_step, args=(next(iterator),))
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
        metrics = {k: strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None) for k, v in metrics.items()}
        step.assign_add(1)
        return loss, metrics

    return train_step


def writes_final_encoder(strategy: tf.distribute.Strategy, logs: dict | None, encoder_dir: str) -> bool:
    """Whether a training stage, after `run_training_loop` returned `logs`, writes `encoder_dir`.

    Only the chief writes. A finished run restarted (`logs` None) keeps its encoder, written
    atomically so present means complete, and the final logs recorded in it. Saving reads
    each weight's local copy: no collective op the other workers must join.
    """
    return strategy.extended.should_checkpoint and not (logs is None and os.path.isdir(encoder_dir))


def restore_training_checkpoint(checkpoint: tf.train.Checkpoint, path: str) -> None:
    """Restores every object of `checkpoint` from `path`, which must hold them all.

    Checkpoints written before the dropout state was saved (no `random_state`) still
    resume, with fresh dropout masks, so a run in progress survives the upgrade.
    """
    saved = {name.split("/", 1)[0] for name, _ in tf.train.list_variables(path)}
    if "random_state" in saved:
        checkpoint.restore(path).assert_existing_objects_matched()
        return
    logging.warning("%s holds no dropout state (written by an older version); dropout restarts fresh", path)
    partial = tf.train.Checkpoint(**{name: getattr(checkpoint, name) for name in ("model", "optimizer", "step")})
    partial.restore(path).assert_existing_objects_matched()


def run_training_loop(strategy, model, optimizer, dataset_fn, step_fn, config: LoopConfig,
                      verbose: bool = True, on_log=None, evaluate=None, replica_gradients=None,
                      check_encoder=None) -> dict:
    """Trains `model` to `config.num_train_steps`, resuming from the latest checkpoint.

    Args:
      dataset_fn: `skip_batches -> tf.data.Dataset` of global batches.
      step_fn: `(model, batch, training) -> (scaled_loss, metrics)` run per replica, where
        `scaled_loss` is this replica's share of the global-batch mean (its gradients are
        summed across replicas) and `metrics` maps names to replica-local means.
      verbose: show progress on stderr (`progress.Progress`): a bar on a terminal, else a plain
        line per logging step.
      on_log: optional callback `(step, logs)` at every logging step.
      evaluate: optional `step -> dict` of metrics, run every `config.eval_steps` and at
        the end, and first of all on a resume at such a step whose evaluation the train log
        lacks (a kill during it); its values go to TensorBoard under `eval/` and into the
        returned logs.
        Only the chief evaluates: it alone writes the results, and evaluation must not run
        collective ops, which the other workers would not join.
      replica_gradients: optional `(model, optimizer, batch) -> (loss, metrics, gradients)`
        computing each replica's gradient instead of one tape over `step_fn` (`build_train_step`).
      check_encoder: optional `(step, learning_rate or None) -> None`, called when training
        starts and at every logging and checkpoint step, before the checkpoint is written; it
        raises to stop a run whose encoder collapsed or exploded (`health.EncoderHealth.check`).
    Returns the logs (loss, metrics, learning rate, evaluation) of the last step, or None
    when the checkpoints were already at `num_train_steps`.
    """
    with strategy.scope():
        # Slots built up front, as mirrored variables: built lazily inside `strategy.run`
        # they would be created per replica inside a graph branch.
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    # Dropout masks come from Keras SeedGenerators, whose states are in `model.variables` but
    # not in `model.weights`, the part of a model its checkpoint holds: without them a resumed
    # run would replay the masks of the first steps instead of those of the steps it resumes.
    random_state = random_state_variables(model)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step, random_state=random_state)
    checkpoint_dir = os.path.join(config.output_dir, CHECKPOINT_DIR)
    scratch_dir = worker_scratch_dir(strategy, config.output_dir)
    if scratch_dir is None:
        manager = tf.train.CheckpointManager(checkpoint, checkpoint_dir, max_to_keep=config.keep_checkpoint_max)
    else:
        # Saving can run collective ops (e.g. to read sync-on-read variables), so every
        # worker saves; the others' copies are thrown away. A killed run may have left some.
        if tf.io.gfile.exists(scratch_dir):
            tf.io.gfile.rmtree(scratch_dir)
        manager = tf.train.CheckpointManager(checkpoint, os.path.join(scratch_dir, CHECKPOINT_DIR), max_to_keep=1)
    # Every worker resumes from the chief's checkpoints, the only ones kept.
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if latest:
        restore_training_checkpoint(checkpoint, latest)
        logging.info("resumed from %s at step %d", latest, int(step.numpy()))
    start_step = int(step.numpy())
    if start_step >= config.num_train_steps:
        logging.info("already at step %d >= num_train_steps %d", start_step, config.num_train_steps)
        return None

    if check_encoder is not None:
        check_encoder(start_step, None)
    iterator = iter(distribute_global_batches(strategy, lambda: dataset_fn(start_step)))
    train_step = build_train_step(strategy, model, optimizer, step_fn, step, config.jit_compile, replica_gradients)

    writer = text_log = None
    progress = Progress(config.num_train_steps, "step") if verbose else None
    logs = {}

    def evaluation_due(current):
        return evaluate is not None and strategy.extended.should_save_summary and (
            current == config.num_train_steps or (config.eval_steps and current % config.eval_steps == 0))

    def run_evaluation(current):
        results = evaluate(current)
        logging.info("evaluation at step %d: %s", current, ", ".join(f"{k}={v:.2f}" for k, v in results.items()))
        with writer.as_default(step=current):
            for name, value in results.items():
                tf.summary.scalar(f"eval/{name}", value)
        logged = {f"eval_{k}": v for k, v in results.items()}
        append_log(text_log, current, logged)
        return logged

    started = time.perf_counter()
    try:
        if start_step and evaluation_due(start_step):
            writer, text_log = open_logs(strategy, config.output_dir, start_step)
            # A run killed while evaluating resumes at the checkpoint written just before: evaluate it.
            if not logged_evaluation(os.path.join(config.output_dir, TRAIN_LOG_FILE), start_step):
                run_evaluation(start_step)
        while int(step.numpy()) < config.num_train_steps:
            loss, metrics = train_step(iterator)
            current = int(step.numpy())
            loss_value = float(loss.numpy())
            if not np.isfinite(loss_value):
                raise NonFiniteLossError(
                    f"loss became {loss_value} at step {current}; stopped without saving, the last good "
                    f"checkpoint ({tf.train.latest_checkpoint(checkpoint_dir)}) stays the latest"
                )
            if check_encoder is not None and (current % config.log_steps == 0 or current == config.num_train_steps
                                              or current % config.save_checkpoints_steps == 0):
                check_encoder(current, float(keras.ops.convert_to_numpy(optimizer.learning_rate)))
            if writer is None:
                # Opened once a step has run, so that a run failing before (e.g. while its step
                # is traced) leaves no log folder or empty log behind.
                writer, text_log = open_logs(strategy, config.output_dir, start_step)
            logs = {"loss": loss_value, **{k: float(v.numpy()) for k, v in metrics.items()}}
            if current % config.log_steps == 0 or current == config.num_train_steps:
                # Keras evaluates the schedule at its own iteration count: the rate of the next step.
                logs["learning_rate"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
                logs["steps_per_second"] = (current - start_step) / (time.perf_counter() - started)
                with writer.as_default(step=current):
                    for name, value in logs.items():
                        tf.summary.scalar(name, value)
                append_log(text_log, current, logs)
                if on_log is not None:
                    on_log(current, logs)
            if progress is not None:
                progress.update(current, logs, log="learning_rate" in logs)
            if current % config.save_checkpoints_steps == 0 or current == config.num_train_steps:
                manager.save(checkpoint_number=current)
            if evaluation_due(current):
                logs = {**logs, **run_evaluation(current)}
        writer.flush()
    finally:
        if text_log is not None:
            text_log.close()
    if scratch_dir is not None:
        tf.io.gfile.rmtree(scratch_dir)
    return logs
