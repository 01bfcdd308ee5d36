"""The training loop the one training stage runs: strategy, optimizers, checkpoints, logging.

A custom loop (as in Model Garden) rather than `Model.fit`, because a run killed at any step
must resume at exactly that step with its optimizer state, on any `tf.distribute` strategy:
the step counter, model and optimizer live in one `tf.train.Checkpoint`, and the input
pipeline is deterministic for a seed, so a restarted run skips the batches already seen.
"""

import dataclasses
import json
import math
import os
import time

import keras
import numpy as np
import tensorflow as tf

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")
CHECKPOINT_DIR = "checkpoints"
TENSORBOARD_DIR = "tensorboard"
# The logged scalars as JSON Lines, one {"step": n, ...} per logging step and per evaluation:
# TensorBoard's event files are not a format to commit or diff, this is.
TRAIN_LOG_FILE = "train_log.jsonl"


def create_strategy(distribution_strategy: str, tpu_address: str = "") -> tf.distribute.Strategy:
    """Model Garden's strategy names; `mirrored` uses every local GPU (or the CPU devices)."""
    if distribution_strategy == "one_device":
        device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if distribution_strategy == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            return tf.distribute.MirroredStrategy([d.name for d in gpus])
        # Collective all-reduce keys restart with each CPU MirroredStrategy and clash when a
        # process builds several; reducing through one device has no such shared state.
        return tf.distribute.MirroredStrategy(
            [d.name for d in tf.config.list_logical_devices("CPU")],
            cross_device_ops=tf.distribute.ReductionToOneDevice(),
        )
    if distribution_strategy == "multi_worker_mirrored":
        # The cluster comes from TF_CONFIG. This must run before any TensorFlow op: the
        # strategy configures the runtime's collective ops, which TF allows only at start-up.
        return tf.distribute.MultiWorkerMirroredStrategy()
    if distribution_strategy == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"distribution_strategy must be one of {STRATEGIES}, got {distribution_strategy!r}")


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into logical devices so MirroredStrategy can run replicas on CPU.

    Must run before TensorFlow initialises its devices (before any op executes).
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's schedule: linear warmup to `learning_rate`, then linear decay to 0."""

    def __init__(self, learning_rate: float, num_warmup_steps: int, num_train_steps: int):
        self.learning_rate = learning_rate
        self.num_warmup_steps = num_warmup_steps
        self.num_train_steps = num_train_steps

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        peak = tf.constant(self.learning_rate, tf.float32)
        decay_steps = max(self.num_train_steps - self.num_warmup_steps, 1)
        decayed = peak * tf.maximum(0.0, 1.0 - (step - self.num_warmup_steps) / decay_steps)
        if self.num_warmup_steps <= 0:
            return decayed
        warm = peak * (step + 1.0) / self.num_warmup_steps
        return tf.where(step < self.num_warmup_steps, warm, decayed)

    def get_config(self):
        return {
            "learning_rate": self.learning_rate,
            "num_warmup_steps": self.num_warmup_steps,
            "num_train_steps": self.num_train_steps,
        }


def enable_mixed_precision() -> None:
    """float16 compute with float32 weights for every model built afterwards (GPU only).

    CPUs have no fast float16 matrix units, so there it would only cost accuracy.
    """
    if not tf.config.list_logical_devices("GPU"):
        raise ValueError("mixed_precision needs a GPU: on CPU float16 is slower than float32")
    keras.mixed_precision.set_dtype_policy("mixed_float16")


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class ExponentialDecayFloor(keras.optimizers.schedules.LearningRateSchedule):
    """`max(learning_rate * decay_rate ** (step / decay_steps), min_learning_rate)`, continuous,
    no warmup: the DialogueCSE authors' schedule (wrapper_bert.py:217-219)."""

    def __init__(self, learning_rate: float, decay_rate: float, decay_steps: int, min_learning_rate: float):
        self.learning_rate = learning_rate
        self.decay_rate = decay_rate
        self.decay_steps = decay_steps
        self.min_learning_rate = min_learning_rate

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        decayed = self.learning_rate * tf.pow(tf.constant(self.decay_rate, tf.float32), step / self.decay_steps)
        return tf.maximum(decayed, self.min_learning_rate)

    def get_config(self):
        return {"learning_rate": self.learning_rate, "decay_rate": self.decay_rate,
                "decay_steps": self.decay_steps, "min_learning_rate": self.min_learning_rate}


class _GlobalBatchClipping:
    """Makes an optimizer's `global_clipnorm` apply to the global batch's gradient.

    Keras clips in `apply`, before the TensorFlow backend sums the replicas' gradients, so
    with several replicas each replica's share is clipped on its own and training departs
    from one device's as soon as clipping acts. Here each replica scales its share by the
    factor the summed gradient calls for, which makes the sum the clipped global gradient,
    at the cost of one more all-reduce of the gradients per step.
    """

    def _clip_gradients(self, grads):
        context = tf.distribute.get_replica_context()
        if not self.global_clipnorm or context is None or context.num_replicas_in_sync == 1:
            return super()._clip_gradients(grads)
        norm = tf.linalg.global_norm(context.all_reduce(tf.distribute.ReduceOp.SUM, grads))
        # Keras's own formula, including the NaN scale for a non-finite norm.
        scale = self.global_clipnorm * tf.minimum(1.0 / norm, 1.0 / self.global_clipnorm) + (norm - norm)
        return [g * scale for g in grads]


class GlobalBatchClippingAdamW(_GlobalBatchClipping, keras.optimizers.AdamW):
    """AdamW with `_GlobalBatchClipping`."""


class GlobalBatchClippingAdam(_GlobalBatchClipping, keras.optimizers.Adam):
    """Adam with `_GlobalBatchClipping`."""


def create_optimizer(learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                     weight_decay: float = 0.01, loss_scaling: bool = False,
                     epsilon: float = 1e-6) -> keras.optimizers.Optimizer:
    """AdamW as in BERT: no decay on LayerNorm and biases, epsilon 1e-6, clip norm 1.

    `weight_decay` and `epsilon` differ for objectives trained with HuggingFace's Trainer
    defaults (0.0 and 1e-8, e.g. SimCSE).

    `loss_scaling` (for mixed precision) wraps it in dynamic loss scaling, so small float16
    gradients do not flush to zero; steps with non-finite gradients are skipped.
    """
    optimizer = GlobalBatchClippingAdamW(
        learning_rate=WarmupLinearDecay(learning_rate, num_warmup_steps, num_train_steps),
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=epsilon,
        global_clipnorm=1.0,
    )
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scaling else optimizer


def create_released_optimizer(learning_rate: float, decay_rate: float, decay_steps: int,
                              min_learning_rate: float, clip_norm: float,
                              loss_scaling: bool = False) -> keras.optimizers.Optimizer:
    """The DialogueCSE authors' optimizer: plain Adam (beta 0.9 / 0.999, epsilon 1e-8, no
    weight decay, wrapper_bert.py:222), `ExponentialDecayFloor`, global-norm clipping
    (3.0 in the release, l.360)."""
    optimizer = GlobalBatchClippingAdam(
        learning_rate=ExponentialDecayFloor(learning_rate, decay_rate, decay_steps, min_learning_rate),
        beta_1=0.9, beta_2=0.999, epsilon=1e-8, global_clipnorm=clip_norm,
    )
    return keras.optimizers.LossScaleOptimizer(optimizer) if loss_scaling else optimizer


def resolve_num_train_steps(num_train_steps: int | None, num_train_epochs: float | None,
                            num_examples: int, train_batch_size: int) -> int:
    """Steps from either flag; epochs may be fractional (the paper pretrains ~0.5 epoch)."""
    if (num_train_steps is None) == (num_train_epochs is None):
        raise ValueError("set exactly one of num_train_steps and num_train_epochs")
    if num_train_steps is None:
        num_train_steps = math.ceil(num_train_epochs * num_examples / train_batch_size)
    if num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
    return num_train_steps


def make_dataset(dataset: tf.data.Dataset, global_batch_size: int, seed: int,
                 skip_batches: int = 0, shuffle_buffer: int = 10000, prefetch: bool = True,
                 distinct_batches: bool = False) -> tf.data.Dataset:
    """Repeats, shuffles (seeded), batches and skips the batches a resumed run has seen.

    `distinct_batches` batches each epoch on its own (its last partial batch dropped) before
    repeating, so no batch holds one record twice, which objectives with in-batch negatives
    need; by default the stream is repeated first and a batch may straddle two epochs.
    `prefetch` prepares the next batches while a step runs.
    """
    if distinct_batches:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(global_batch_size, drop_remainder=True).repeat()
    else:
        dataset = dataset.repeat().shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(global_batch_size, drop_remainder=True)
    dataset = dataset.skip(skip_batches)
    return dataset.prefetch(tf.data.AUTOTUNE) if prefetch else dataset


def distribute_global_batches(strategy: tf.distribute.Strategy, make_batches) -> tf.distribute.DistributedDataset:
    """Splits each global batch of `make_batches()` among all replicas of all workers.

    Every input pipeline (one per worker) reads the same seeded stream of global batches
    and keeps only its own contiguous slice, cut into per-replica batches, so the replicas
    together see exactly the global batch a single process would, and a resumed run skips
    the same batches on every worker. `experimental_distribute_dataset` would instead
    auto-shard by file across workers: with fewer record files than workers it fails, and
    otherwise each worker draws its share of a global batch from its own files only, a
    different stream of examples from the one a single process reads.
    """

    def replica_batches(context: tf.distribute.InputContext) -> tf.data.Dataset:
        batches = make_batches()
        global_batch_size = tf.nest.flatten(batches.element_spec)[0].shape[0]
        if global_batch_size is None:
            raise ValueError("the dataset must have a static batch size (batch with drop_remainder=True)")
        per_replica = context.get_per_replica_batch_size(global_batch_size)
        per_pipeline = global_batch_size // context.num_input_pipelines
        # Each global batch becomes one slice per pipeline, of which this one keeps its own;
        # its replicas then take its per-replica batches in turn.
        own = batches.rebatch(per_pipeline, drop_remainder=True).shard(
            context.num_input_pipelines, context.input_pipeline_id)
        own = own.rebatch(per_replica, drop_remainder=True)
        if batches.cardinality() == tf.data.INFINITE_CARDINALITY:
            # Rebatching forgets that the stream is endless; unsure of it, a multi-worker
            # strategy would hand the replicas batches of unknown size and agree across
            # workers before every step that all of them still have data.
            own = own.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
        return own.prefetch(tf.data.AUTOTUNE)

    return strategy.distribute_datasets_from_function(replica_batches)


def worker_scratch_dir(strategy: tf.distribute.Strategy, output_dir: str) -> str | None:
    """None on the chief, which writes the run's outputs; else this worker's throwaway folder.

    As in TensorFlow's multi-worker guide: a folder per worker beside the chief's outputs,
    so the workers never write the same file.
    """
    if strategy.extended.should_checkpoint:
        return None
    return os.path.join(output_dir, f"workertemp_{strategy.cluster_resolver.task_id}")


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


def build_train_step(strategy, model, optimizer, step_fn, step: tf.Variable, jit_compile: bool = False):
    """The graph function of one training step: `iterator -> (global loss, metrics)`.

    `jit_compile` compiles each replica's forward and backward pass with XLA; the
    optimizer update stays outside, because under MirroredStrategy it aggregates
    gradients across replicas, which XLA cannot compile.
    """

    def compute_gradients(batch):
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
            print(f"[train] not updated by this objective: {unused}")
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
    print(f"[train] {path} holds no dropout state (written by an older version); dropout restarts fresh")
    partial = tf.train.Checkpoint(**{name: getattr(checkpoint, name) for name in ("model", "optimizer", "step")})
    partial.restore(path).assert_existing_objects_matched()


def _open_logs(strategy, output_dir: str, start_step: int):
    """(TensorBoard writer, text log or None): only the chief writes them."""
    if not strategy.extended.should_save_summary:
        return tf.summary.create_noop_writer(), None
    return (tf.summary.create_file_writer(os.path.join(output_dir, TENSORBOARD_DIR)),
            _open_train_log(os.path.join(output_dir, TRAIN_LOG_FILE), start_step))


def _open_train_log(path: str, start_step: int):
    """Opens the log for appending: a run resumed at `start_step` adds the steps after it. The
    lines a killed run logged past its last checkpoint are dropped, since the resumed run logs
    those steps again, and so is a partial last line cut mid-write."""
    if os.path.exists(path):
        with open(path, "rb") as reader:
            lines = reader.read().split(b"\n")[:-1]  # the last piece is empty or cut mid-write
        kept = [line for line in lines if _logged_step(line) <= start_step]
        if len(kept) < len(lines) or os.path.getsize(path) != sum(len(line) + 1 for line in lines):
            with open(path + ".tmp", "wb") as writer:
                writer.writelines(line + b"\n" for line in kept)
            os.replace(path + ".tmp", path)
    return open(path, "a", encoding="utf-8")


def _logged_step(line: bytes) -> int:
    """The step of a log line; 0 for one that is not an entry (kept: `read_train_log` names it)."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return 0


def _append_log(text_log, step: int, values: dict) -> None:
    if text_log is not None:
        text_log.write(json.dumps({"step": step, **values}) + "\n")
        text_log.flush()


def read_train_log(path: str) -> list[dict]:
    """The entries of a `train_log.jsonl`; where a resumed run logged a step again, the last wins."""
    entries: dict = {}
    with open(path, encoding="utf-8") as reader:
        for number, line in enumerate(reader, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                key = (int(entry["step"]), any(name.startswith("eval_") for name in entry))
            except (ValueError, KeyError, TypeError) as error:
                raise ValueError(f"{path}:{number}: not a train log entry ({error})") from None
            entries[key] = entry
    return [entries[key] for key in sorted(entries)]


def run_training_loop(strategy, model, optimizer, dataset_fn, step_fn, config: LoopConfig,
                      verbose: bool = True, on_log=None, evaluate=None) -> dict:
    """Trains `model` to `config.num_train_steps`, resuming from the latest checkpoint.

    Args:
      dataset_fn: `skip_batches -> tf.data.Dataset` of global batches.
      step_fn: `(model, batch, training) -> (scaled_loss, metrics)` run per replica, where
        `scaled_loss` is this replica's share of the global-batch mean (its gradients are
        summed across replicas) and `metrics` maps names to replica-local means.
      on_log: optional callback `(step, logs)` at every logging step.
      evaluate: optional `step -> dict` of metrics, run every `config.eval_steps` and at
        the end; its values go to TensorBoard under `eval/` and into the returned logs.
        Only the chief evaluates: it alone writes the results, and evaluation must not run
        collective ops, which the other workers would not join.
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
    weight_ids = {id(v) for v in model.weights}
    random_state = [v for v in model.variables if id(v) not in weight_ids]
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
        print(f"[train] resumed from {latest} at step {int(step.numpy())}")
    start_step = int(step.numpy())
    if start_step >= config.num_train_steps:
        print(f"[train] already at step {start_step} >= num_train_steps {config.num_train_steps}")
        return None

    iterator = iter(distribute_global_batches(strategy, lambda: dataset_fn(start_step)))
    train_step = build_train_step(strategy, model, optimizer, step_fn, step, config.jit_compile)

    writer = text_log = None
    progbar = None
    logs = {}
    started = time.perf_counter()
    try:
        while int(step.numpy()) < config.num_train_steps:
            loss, metrics = train_step(iterator)
            current = int(step.numpy())
            loss_value = float(loss.numpy())
            if not np.isfinite(loss_value):
                raise NonFiniteLossError(
                    f"loss became {loss_value} at step {current}; stopped without saving, the last good "
                    f"checkpoint ({tf.train.latest_checkpoint(checkpoint_dir)}) stays the latest"
                )
            if writer is None:
                # Opened once a step has run, so that a run failing before (e.g. while its step
                # is traced) leaves no log folder or empty log behind.
                writer, text_log = _open_logs(strategy, config.output_dir, start_step)
            logs = {"loss": loss_value, **{k: float(v.numpy()) for k, v in metrics.items()}}
            if current % config.log_steps == 0 or current == config.num_train_steps:
                # Keras evaluates the schedule at its own iteration count: the rate of the next step.
                logs["learning_rate"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
                logs["steps_per_second"] = (current - start_step) / (time.perf_counter() - started)
                with writer.as_default(step=current):
                    for name, value in logs.items():
                        tf.summary.scalar(name, value)
                _append_log(text_log, current, logs)
                if on_log is not None:
                    on_log(current, logs)
            if verbose and progbar is None:
                # Stateful: show each step's values, not Progbar's running averages.
                progbar = keras.utils.Progbar(config.num_train_steps, unit_name="step",
                                              stateful_metrics=list(logs) + ["learning_rate"])
            if progbar is not None:
                progbar.update(current, [(k, v) for k, v in logs.items() if k != "steps_per_second"])
            if current % config.save_checkpoints_steps == 0 or current == config.num_train_steps:
                manager.save(checkpoint_number=current)
            if evaluate is not None and strategy.extended.should_save_summary and (
                current == config.num_train_steps or (config.eval_steps and current % config.eval_steps == 0)
            ):
                results = evaluate(current)
                print(f"[eval] step {current}: " + ", ".join(f"{k}={v:.2f}" for k, v in results.items()))
                with writer.as_default(step=current):
                    for name, value in results.items():
                        tf.summary.scalar(f"eval/{name}", value)
                _append_log(text_log, current, {f"eval_{k}": v for k, v in results.items()})
                logs = {**logs, **{f"eval_{k}": v for k, v in results.items()}}
        writer.flush()
    finally:
        if text_log is not None:
            text_log.close()
    if scratch_dir is not None:
        tf.io.gfile.rmtree(scratch_dir)
    return logs
