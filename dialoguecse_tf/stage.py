"""The one training stage: any registered objective, from records to a written encoder.

`run_stage(objective, config)` does what every training run needs, in this order: resolve the
config (the objective's defaults), check it (before anything is built), build the distribution
strategy, the training data and the model (the backbone from a checkpoint or from scratch, the
objective's model around it, the optimizer), train (`training.loop`: resumable, with optional
periodic evaluation keeping the best encoder), and write the final encoder beside the run's
`config.json`. Everything objective-specific sits behind `objectives.Objective`.
"""

from __future__ import annotations

import dataclasses
import functools
import glob
import json
import os
import shutil
from typing import NamedTuple

import keras
from absl import logging

from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.checkpoints import (CHECKPOINT_MARKER_FILE, RETIRED_SUFFIX, load_or_initialize,
                                                restore_retired_checkpoint, save_checkpoint)
from dialoguecse_tf.encoder.sentence import SentenceEncoder
from dialoguecse_tf.io_utils import check_output_dir, read_json_object, write_json
from dialoguecse_tf.precision import check_precision
from dialoguecse_tf.presets import PRESETS
from dialoguecse_tf.records.reader import read_dataset, resolve_records
from dialoguecse_tf.records.spec import check_compatible
# The settings live apart so that the command-line code, the runner and the exports read runs
# without the stage; callers take them here too.
from dialoguecse_tf.stage_config import (  # noqa: F401
    CONFIG_FILE, SETTINGS_DIGEST_KEY, TrainConfig, configure, differing_settings, load_stage_config,
    settings_digest, stage_record)
from dialoguecse_tf.training import loop
from dialoguecse_tf.training.accumulation import accumulated_gradients
from dialoguecse_tf.training.grad_cache import chunked_gradients
from dialoguecse_tf.training.health import EncoderHealth
from dialoguecse_tf.training.optimizers import resolve_num_train_steps
from dialoguecse_tf.training.strategy import create_strategy, make_dataset
from dialoguecse_tf.training.train_log import TENSORBOARD_DIR, TRAIN_LOG_FILE

ENCODER_DIR = "encoder"
BEST_ENCODER_DIR = "best_encoder"
# Left beside links to another run's encoders by versions that reused a finished run instead of
# training it; deleted with the run.
_FORMER_REUSE_RECORD = "reused_from.json"
# Everything a run writes into its folder, which overwrite_output_dir deletes (worker scratch
# folders too, `training.strategy.worker_scratch_dir`).
_RUN_OUTPUTS = (loop.CHECKPOINT_DIR, TENSORBOARD_DIR, TRAIN_LOG_FILE, ENCODER_DIR, BEST_ENCODER_DIR, CONFIG_FILE,
                _FORMER_REUSE_RECORD, ENCODER_DIR + RETIRED_SUFFIX, BEST_ENCODER_DIR + RETIRED_SUFFIX)


def encoder_metadata(objective, config: TrainConfig, num_train_steps: int) -> dict:
    """What every encoder a stage writes records: how it was trained, the pooling of its
    sentence embedding, which the inference path reads, and the digest of the settings it was
    trained under, which tells whether the run's config.json describes it (an export's model card)."""
    return {"stage": objective.stage_name, "objective": objective.name, **objective.metadata(),
            "pooling": objective.sentence_pooling(), "num_train_steps": num_train_steps,
            SETTINGS_DIGEST_KEY: settings_digest(stage_record(objective, config))}


def _holds_run(output_dir: str) -> bool:
    return os.path.isfile(os.path.join(output_dir, loop.CHECKPOINT_DIR, "checkpoint")) or os.path.lexists(
        os.path.join(output_dir, ENCODER_DIR))


def check_resumable(objective, config: TrainConfig) -> None:
    """Raises ValueError when `config.output_dir` holds a run (checkpoints or an encoder) whose
    config.json records other settings than `config`'s: resuming it would train one model under
    two configurations. Settings that do not change the weights may differ (`differing_settings`)."""
    if not _holds_run(config.output_dir):
        return
    start_over = ("pass the settings it was started with to resume it, --overwrite_output_dir to delete it and "
                  "train from scratch, or another --output_dir")
    path = os.path.join(config.output_dir, CONFIG_FILE)
    try:
        old_objective, old_config = load_stage_config(path)
    except (ValueError, TypeError, OSError) as error:
        raise ValueError(f"{config.output_dir} holds a trained run without a readable record of its settings "
                         f"({error}); {start_over}") from None
    differences = differing_settings(stage_record(old_objective, old_config.resolved(old_objective)),
                                     stage_record(objective, config))
    if differences:
        changes = ", ".join(f"{name} {json.dumps(old)} -> {json.dumps(new)}" for name, old, new in differences)
        raise ValueError(f"{config.output_dir} holds a run trained with other settings ({changes}); resuming "
                         f"would mix them: {start_over}")


def warn_unusual_learning_rate(learning_rate: float) -> None:
    """Warns when `learning_rate` is far outside the range of every preset (the papers' settings
    and the CPU presets): more than 10 times their largest or under a hundredth of their smallest."""
    rates = [preset["learning_rate"] for preset in PRESETS.values() if "learning_rate" in preset]
    low, high = min(rates), max(rates)
    if learning_rate > 10 * high or learning_rate < low / 100:
        logging.warning("learning_rate %g is far outside every preset's range (%g to %g): training may diverge or "
                        "not move; the run stops if the encoder collapses or explodes", learning_rate, low, high)


def check_something_to_train(objective, backbone, num_layers: int) -> None:
    """Raises ValueError when no weight of the encoder a run writes is trainable: the run would
    write its start unchanged (or fail with no gradient to apply), whatever it trains besides,
    unless the objective means to train only what it writes beside the encoder."""
    if backbone.trainable_variables or not objective.trains_encoder():
        return
    frozen = getattr(objective.options, "num_frozen_layers", None)
    if frozen is None:
        raise ValueError(f"{objective.name}: no weight of the encoder is trainable, so the run would write it "
                         f"unchanged")
    # Presets keep the papers' count (6 of BERT-base's 12), not their fraction.
    raise ValueError(f"num_frozen_layers={frozen} freezes every layer of this {num_layers}-layer encoder, and "
                     f"{objective.name} trains nothing else of it, so the run would write the encoder it started "
                     f"from: pass --num_frozen_layers={num_layers // 2} to freeze the bottom half, as the papers' "
                     f"6 of 12 do")


def clear_run(output_dir: str) -> None:
    """Deletes what a run wrote into `output_dir` (a reused run's links, not their targets)."""
    names = _RUN_OUTPUTS + tuple(os.path.basename(path) for path in glob.glob(os.path.join(output_dir, "workertemp_*")))
    for name in names:
        path = os.path.join(output_dir, name)
        if os.path.islink(path) or os.path.isfile(path):
            os.remove(path)
        elif os.path.isdir(path):
            shutil.rmtree(path)


def _evaluation_hook(config: TrainConfig, backbone, tokenizer, bert_config, objective, num_train_steps):
    """`step -> metrics` on the config's evaluation suite, keeping the best encoder; or None.

    With one dataset the metrics keep their names (`map`, `corr`, ...); with several they are
    named `dataset/metric`."""
    entries = config.eval_entries()
    if not entries:
        return None
    from dialoguecse_tf.encoder.dialogue import DialogueEncoder, dialogue_settings
    from dialoguecse_tf.evaluation.suite import EvaluationSuite

    suite = EvaluationSuite.from_entries(entries)
    dataset_name, primary_metric, higher_is_better = suite.primary()
    if len(suite.datasets) > 1:
        primary_metric = f"{dataset_name}/{primary_metric}"
    best = _kept_best(config.output_dir, primary_metric)

    def evaluate(step):
        encoder = SentenceEncoder(backbone, tokenizer, pooling=objective.sentence_pooling())
        # Dialogues read as the written encoder will read them (`DialogueEncoder.from_checkpoint`).
        dialogue_encoder = DialogueEncoder(backbone, tokenizer, config.max_seq_length, pooling="interlocutor",
                                           **dialogue_settings({"objective": objective.name, **objective.metadata()}))
        by_dataset = suite(encoder.encode, dialogue_encoder.encode_dialogues)
        results = (suite.flat(by_dataset) if len(by_dataset) > 1
                   else {key: float(value) for key, value in by_dataset[dataset_name].items()})
        value = results[primary_metric]
        previous = best.get("value")
        if previous is None or (value > previous if higher_is_better else value < previous):
            best.update(step=step, value=value)
            save_checkpoint(os.path.join(config.output_dir, BEST_ENCODER_DIR), backbone, bert_config, tokenizer,
                            metadata={**encoder_metadata(objective, config, num_train_steps), "step": step,
                                      "selected_by": primary_metric, "eval": results})
        return results

    return evaluate


def _kept_best(output_dir: str, primary_metric: str) -> dict:
    """`{step, value}` of the encoder an interrupted run already kept in best_encoder/, or {}.

    A resumed run measures its later evaluations against it: without it, the first evaluation
    after a restart would replace a better encoder kept before the kill."""
    if restore_retired_checkpoint(os.path.join(output_dir, BEST_ENCODER_DIR)):
        logging.warning("%s: put back %s/, which a kill while replacing it had left retired", output_dir,
                        BEST_ENCODER_DIR)
    marker = os.path.join(output_dir, BEST_ENCODER_DIR, CHECKPOINT_MARKER_FILE)
    if not os.path.exists(marker):
        return {}
    metadata = read_json_object(marker)
    return {"step": metadata["step"], "value": metadata["eval"][primary_metric]}


def _replica_gradients(objective, config: TrainConfig):
    """How each replica computes its gradient with `max_examples_per_pass` (None: one tape over
    the whole batch); the two ways are in `training/accumulation.py`'s docstring."""
    if not config.max_examples_per_pass:
        return None
    if objective.supports_embedding_chunks():
        split = chunked_gradients
    elif objective.supports_accumulation():
        split = accumulated_gradients
    else:
        raise ValueError(f"max_examples_per_pass={config.max_examples_per_pass}: {objective.name} defines its loss "
                         f"neither from per-example embeddings (embed) nor as a sum of per-example terms "
                         f"(example_losses), so its batch cannot be split into passes")
    return functools.partial(split, objective=objective, global_batch_size=config.train_batch_size,
                             max_examples=config.max_examples_per_pass)


class _TrainingData(NamedTuple):
    files: list  # the record files `train_file` matches
    spec: object  # their `RecordSpec`
    num_train_steps: int


class _Parts(NamedTuple):
    start: object  # the `load_or_initialize` start: config, tokenizer
    backbone: object
    model: object
    optimizer: object


def run_stage(objective, config: TrainConfig, strategy=None, verbose: bool = True, on_log=None) -> dict:
    """Runs (or resumes) `objective` under `config`; writes the trained encoder.

    Resolves the objective's defaults into `config`, checks it before anything is built (the
    output folder, the evaluation suite, a run already in the folder), builds the strategy, the
    training data and the model, trains to `num_train_steps` from the folder's latest checkpoint,
    and writes `output_dir/encoder` (a project checkpoint recording its pooling, steps and the
    digest of its settings) next to `output_dir/config.json`.

    Args:
      objective: a registered `objectives.Objective` with its options.
      config: the shared settings; `output_dir` is required.
      strategy: a `tf.distribute.Strategy`; None creates `config.distribution_strategy`'s.
      verbose: show progress on stderr (`progress`): a bar on a terminal, else a line per logging step.
      on_log: optional callback `(step, logs)` at every logging step.

    Returns:
      The last step's logs (loss, the objective's metrics, learning_rate, steps_per_second, and
      `eval_*` with an evaluation suite); {} when the run was already finished.

    Example:
      objective, config = configure("dse", train_file=("records/pairs-*",), output_dir="runs/dse",
                                    init_checkpoint="checkpoints/all-MiniLM-L6-v2", num_train_steps=100)
      logs = run_stage(objective, config)  # writes runs/dse/encoder/ and runs/dse/config.json
      logs["loss"]  # the loss of step 100
    """
    config = config.resolved(objective)
    _check_config(objective, config)
    # First: MultiWorkerMirroredStrategy has to exist before any op runs, and checking
    # the records runs some.
    strategy = strategy or create_strategy(config.distribution_strategy, config.tpu_address)
    data = _training_data(objective, config)
    config = _with_warmup_steps(config, data.num_train_steps)
    parts = _build(objective, config, strategy, data.num_train_steps)
    _start_run_folder(objective, config, strategy)
    logs = _train(objective, config, strategy, data, parts, verbose, on_log)
    _write_encoder(objective, config, strategy, parts, logs, data.num_train_steps)
    return logs or {}


def _check_config(objective, config: TrainConfig) -> None:
    """Raises on a config that would fail later, once the model is built or the run trained."""
    if not config.output_dir:
        raise ValueError("output_dir is required")
    warn_unusual_learning_rate(config.learning_rate)
    # Before anything is built: a precision this machine would emulate is refused in one line.
    check_precision(config.precision, "TPU" if config.distribution_strategy == "tpu" else None)
    check_output_dir(config.output_dir)
    config.eval_entries()
    _replica_gradients(objective, config)
    if not config.overwrite_output_dir:
        check_resumable(objective, config)


def _training_data(objective, config: TrainConfig) -> _TrainingData:
    """The records checked against the objective and the config, and the steps they give."""
    files, spec, stats = resolve_records(config.train_file, objective.record_type)
    check_compatible(spec, max_seq_length=config.max_seq_length, **objective.record_requirements())
    objective.check_records(spec, os.path.dirname(files[0]))
    num_examples = int(stats["samples_written"])
    num_used = min(num_examples, config.max_train_examples or num_examples)
    if objective.in_batch_negatives and num_used < config.train_batch_size:
        raise ValueError(f"{os.path.dirname(files[0])}: {objective.name} takes its negatives from the batch, but the "
                         f"records give {num_used} examples, fewer than one batch of {config.train_batch_size}")
    num_train_steps = resolve_num_train_steps(
        config.num_train_steps, config.num_train_epochs, num_used, config.train_batch_size,
    )
    return _TrainingData(files, spec, num_train_steps)


def _with_warmup_steps(config: TrainConfig, num_train_steps: int) -> TrainConfig:
    """`config` with `num_warmup_steps` from `warmup_proportion`, when that is set."""
    if not config.warmup_proportion:
        return config
    if not 0 < config.warmup_proportion < 1:
        raise ValueError(f"warmup_proportion must be in (0, 1), got {config.warmup_proportion}")
    return dataclasses.replace(config, num_warmup_steps=round(config.warmup_proportion * num_train_steps))


def _build(objective, config: TrainConfig, strategy, num_train_steps: int) -> _Parts:
    """The seeded start, the objective's model around a backbone, and the optimizer."""
    keras.utils.set_random_seed(config.random_seed)
    start = load_or_initialize(config.init_checkpoint, config.bert_config_file, config.vocab_file,
                               config.do_lower_case, config.max_seq_length)
    with strategy.scope():
        # A fresh backbone even when the checkpoint brought one: the model's variables must be
        # created inside the strategy's scope. Its random initialisation is then overwritten.
        # It computes in the run's precision (its variables float32 in every one), and the
        # objective's model takes that from it (`precision`).
        backbone = build_backbone(start.config, precision=config.precision)
        model = objective.build_model(backbone, start.config, start.tokenizer, config.num_length_buckets)
        if start.backbone is not None:
            backbone.set_weights(start.backbone.get_weights())
        objective.initialize_from(model, start)
        optimizer = objective.create_optimizer(config, num_train_steps, model)
    check_something_to_train(objective, backbone, start.config.num_hidden_layers)
    return _Parts(start, backbone, model, optimizer)


def _start_run_folder(objective, config: TrainConfig, strategy) -> None:
    """Makes `output_dir` (emptied with `overwrite_output_dir`) and writes the run's config.json."""
    os.makedirs(config.output_dir, exist_ok=True)
    # Under MultiWorkerMirroredStrategy only the chief writes the run's outputs.
    if strategy.extended.should_checkpoint:
        if config.overwrite_output_dir:
            clear_run(config.output_dir)
        write_json(os.path.join(config.output_dir, CONFIG_FILE), stage_record(objective, config), sort_keys=True)


def _train(objective, config: TrainConfig, strategy, data: _TrainingData, parts: _Parts, verbose: bool,
           on_log) -> dict | None:
    """`loop.run_training_loop` on the records: the last step's logs, None if already finished."""

    def dataset_fn(skip_batches):
        dataset = read_dataset(data.files, data.spec, shuffle_files=True, seed=config.random_seed)
        if config.max_train_examples:
            # A fixed subset for the training-data-scale study (Figure 3): cached, so every
            # epoch sees the same examples.
            dataset = dataset.take(config.max_train_examples).cache()
        batches = make_dataset(dataset, config.train_batch_size, config.random_seed, skip_batches,
                               distinct_batches=objective.in_batch_negatives)
        return batches.map(objective.prepare_batch)

    def step_fn(model, batch, is_training):
        return objective.compute_loss(model, batch, is_training, config.train_batch_size)

    loop_config = loop.LoopConfig(config.output_dir, data.num_train_steps, config.save_checkpoints_steps,
                                  config.log_steps, eval_steps=config.eval_steps, jit_compile=config.jit_compile)
    evaluate = _evaluation_hook(config, parts.backbone, parts.start.tokenizer, parts.start.config, objective,
                                data.num_train_steps)
    health = EncoderHealth(parts.backbone, parts.start.tokenizer)
    return loop.run_training_loop(strategy, parts.model, parts.optimizer, dataset_fn, step_fn, loop_config, verbose,
                                  on_log, evaluate, _replica_gradients(objective, config), check_encoder=health.check)


def _write_encoder(objective, config: TrainConfig, strategy, parts: _Parts, logs: dict | None,
                   num_train_steps: int) -> None:
    """Writes `output_dir/encoder` with its metadata, unless a finished run was restarted."""
    encoder_dir = os.path.join(config.output_dir, ENCODER_DIR)
    if loop.writes_final_encoder(strategy, logs, encoder_dir):
        save_checkpoint(
            encoder_dir, parts.backbone, parts.start.config, parts.start.tokenizer,
            metadata={**encoder_metadata(objective, config, num_train_steps), "final_logs": logs or {}},
            **objective.encoder_extras(parts.model),
        )
