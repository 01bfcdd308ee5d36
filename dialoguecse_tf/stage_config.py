"""A training run's settings: `TrainConfig` (what every objective shares), the `config.json`
record of a run (`stage_record`) and the way back from it (`load_stage_config`, `configure`).

Two records are compared on the settings that change the trained weights: a run folder resumes
only under the settings it was started with (`differing_settings`), and an encoder records the
digest of the settings it was trained under (`settings_digest`), so its run's config.json is
known to describe it. Where the run is written, how often it logs and checkpoints, and
`num_warmup_steps` when `warmup_proportion` decides it, do not count.

Apart from `stage`, which runs them, so that the command-line code, the experiment runner and
the exports can read runs without importing the stage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

from dialoguecse_tf.config_fields import PRECISION_HELP, PRECISIONS, check_values, field
from dialoguecse_tf.evaluation.suite import SuiteEntry, parse_entry, suite_entries, suite_from_legacy
from dialoguecse_tf.evaluation.tasks.registry import get_task
from dialoguecse_tf.io_utils import read_json_object
from dialoguecse_tf.objectives.registry import get_objective_class
from dialoguecse_tf.training.strategy import STRATEGIES

CONFIG_FILE = "config.json"
# The key of `settings_digest` in a written encoder's metadata.
SETTINGS_DIGEST_KEY = "settings_digest"
# Settings runs had and have no longer, at the value every run had: config.json files written
# before still hold them, and run keys keep them (`experiments.tools`) so that runs keep their keys.
REMOVED_SETTINGS = {"reuse_runs_under": ()}
# The evaluation file settings training had before suites, and the evaluation flags they stand for.
_LEGACY_EVAL_FILES = {"eval_select_file": "select_file", "eval_sts_file": "sts_file",
                      "eval_dialogue_file": "dialogue_file"}
_NOT_TRAINING = ("output_dir", "log_steps", "save_checkpoints_steps", "tpu_address", *REMOVED_SETTINGS,
                 "overwrite_output_dir")
_SUITE_SETTINGS = ("eval_suite", "eval_task")
_EVAL_SETTINGS = (*_LEGACY_EVAL_FILES, *_SUITE_SETTINGS)
# Settings added after encoders recorded their digest, with the value at which a run trains as
# before: left out there, so that the encoders written before keep their digest.
_ADDED_SETTINGS = {"max_examples_per_pass": 0}
# `precision` replaced the boolean `mixed_precision` (float16 compute, GPU only): the value that
# setting had for each precision it could say. Records written before hold it; digests and run
# keys write these precisions in its terms (`in_former_terms`), so the encoders and runs made
# before keep their digests and keys.
FORMER_PRECISION_SETTING = "mixed_precision"
_FORMER_PRECISION = {"float32": False, "float16": True}
_DIGEST_LENGTH = 16


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """The settings every objective shares. `None` for train_batch_size and learning_rate means
    the objective's own default (`Objective.training_defaults`, the paper's value)."""

    train_file: tuple[str, ...] = field((), "Training TFRecord file or glob (written by data_prep/); repeat for several.")
    output_dir: str | None = field(None, "Run folder: checkpoints/, tensorboard/, encoder/, config.json.")
    overwrite_output_dir: bool = field(
        False, "Delete the run output_dir holds (checkpoints/, tensorboard/, train_log.jsonl, encoder/, "
        "best_encoder/, config.json) and train from scratch. Without it a folder holding a run resumes it, and only "
        "with the settings it was started with: output_dir, log_steps, save_checkpoints_steps and tpu_address "
        "may change, nothing else (num_train_steps neither: the learning rate decays to it, so "
        "a longer run is another run); other settings are refused, naming them.")
    init_checkpoint: str | None = field(None, "Checkpoint to start from: Google TF1, HuggingFace or this project's.")
    bert_config_file: str | None = field(None, "bert_config.json, only to train from a random initialisation.")
    vocab_file: str | None = field(None, "vocab.txt; with init_checkpoint, overrides the checkpoint's own.")
    do_lower_case: bool = field(True, "Lower-casing of the tokenizer when not given by init_checkpoint.")
    max_seq_length: int = field(50, "Tokens per sequence; must match the records.", minimum=3)
    train_batch_size: int | None = field(None, "Global batch size, split across replicas (default: the objective's).",
                                          minimum=1)
    learning_rate: float | None = field(
        None, "Peak AdamW learning rate, linear warmup then linear decay (default: the objective's).", minimum=0.0,
        exclusive_minimum=True)
    num_train_steps: int | None = field(None, "Training steps; set this or num_train_epochs.", minimum=1)
    num_train_epochs: float | None = field(
        None, "Epochs over the records (fractions allowed); set this or num_train_steps.", minimum=0.0,
        exclusive_minimum=True)
    num_warmup_steps: int = field(0, "Linear warmup steps.", minimum=0)
    warmup_proportion: float = field(0.0, "Warmup as a fraction of the training steps (e.g. 0.1); when set, it "
                                     "decides num_warmup_steps.", minimum=0.0, maximum=1.0)
    max_train_examples: int = field(0, "Train on only the first this many records (data-scale study); 0: all.",
                                    minimum=0)
    save_checkpoints_steps: int = field(1000, "Checkpoint every this many steps (and at the end).", minimum=1)
    log_steps: int = field(10, "TensorBoard summaries every this many steps.", minimum=1)
    random_seed: int = field(12345, "Seed for initialisation, shuffling and dropout.")
    distribution_strategy: str = field("one_device", "tf.distribute strategy (Model Garden's names).",
                                       choices=STRATEGIES)
    tpu_address: str = field("", "TPU name or address for distribution_strategy=tpu.")
    num_length_buckets: int = field(
        4, "Encode a step's sequences in this many length groups, each cut to its longest sequence "
        "(same result, less padding); 1 encodes all at max_seq_length.", minimum=1)
    jit_compile: bool = field(False, "Compile each replica's forward and backward pass with XLA "
                              "(slower on CPU, see benchmarks/README.md).")
    max_examples_per_pass: int = field(
        0, "Run each replica's batch through the model this many examples at a time, for a paper batch whose "
        "activations do not fit in memory; still one update per batch, the whole batch's (to float rounding, "
        "without dropout). Losses summed over examples accumulate the passes' gradients; in-batch negatives (dse, "
        "simcse) embed the passes, take the whole batch's loss, then embed each again to backpropagate it "
        "(GradCache: one more forward pass). See training/accumulation.py. 0: the whole batch at once.", minimum=0)
    precision: str = field("float32", "Compute precision of training: " + PRECISION_HELP + " In training float16 "
                           "adds dynamic loss scaling.", choices=PRECISIONS)
    eval_select_file: str | None = field(None, "SR set (select.txt) to evaluate on every eval_steps and at the end.")
    eval_sts_file: str | None = field(None, "D-STS set (sts.txt) to evaluate on every eval_steps and at the end.")
    eval_dialogue_file: str | None = field(None, "Labelled dialogues (an SGD folder or file) for dial2vec's "
                                           "clustering, relatedness and retrieval every eval_steps and at the end "
                                           "(interlocutor pooling, max_seq_length tokens per dialogue, truncation "
                                           "and token types as in training).")
    eval_task: tuple[str, ...] = field(
        (), "An evaluation every eval_steps and at the end, as DATASET:TASK:PATH (evaluation/suite.py; dialogue "
        "tasks read dialogues as eval_dialogue_file does); repeat for several. Instead of the eval_*_file flags.")
    eval_suite: str | None = field(
        None, "A JSON evaluation suite (a list of {\"dataset\", \"task\", \"file\"}) evaluated every eval_steps "
        "and at the end; instead of the eval_*_file flags.")
    eval_steps: int = field(0, "Evaluate every this many steps (0: only at the end); the encoder best by the "
                            "first dataset's first task's primary metric in table order (D-STS Corr., else SR MAP, "
                            "else dialogue purity) is kept in best_encoder/.", minimum=0)

    def __post_init__(self):
        check_values(self)
        given = [name for name in _LEGACY_EVAL_FILES if getattr(self, name)]
        if (self.eval_suite or self.eval_task) and given:
            raise ValueError(f"give the evaluation sets either as eval_task/eval_suite or as {', '.join(given)}, "
                             f"not both")
        for text in self.eval_task:
            parse_entry(text)

    def eval_entries(self) -> list[SuiteEntry]:
        """The evaluation suite run during training ([] for none); the eval_*_file flags give
        the dataset "dev". A fine-tuned task is refused: each of its runs trains the encoder anew
        (minutes to hours), and the training stage hands evaluations no encoder to copy."""
        if self.eval_suite or self.eval_task:
            entries = suite_entries(self.eval_suite, self.eval_task)
            fine_tuned = [str(entry) for entry in entries if get_task(entry.task).input_kind == "finetune"]
            if fine_tuned:
                raise ValueError(f"fine-tuned evaluation tasks do not run during training: {fine_tuned}; evaluate "
                                 "the written encoder with evaluation/run_evaluation.py")
            return entries
        files = {flag: (getattr(self, name) or "",) for name, flag in _LEGACY_EVAL_FILES.items()}
        return suite_from_legacy((), files) if any(path for (path,) in files.values()) else []

    def resolved(self, objective) -> "TrainConfig":
        """This config with the objective's defaults filled in."""
        defaults = {name: value for name, value in objective.training_defaults.items() if getattr(self, name) is None}
        return dataclasses.replace(self, **defaults)


def stage_record(objective, config: TrainConfig) -> dict:
    """What `config.json` holds: the objective, its options and the shared settings."""
    return {"objective": objective.name, "options": dataclasses.asdict(objective.options),
            **dataclasses.asdict(config)}


def load_stage_config(path: str):
    """(objective, TrainConfig) from a run's `config.json` (see `stage_record`)."""
    record = read_json_object(path, "a training config.json")
    if "objective" not in record or not isinstance(record.get("options"), dict):
        raise ValueError(f"{path}: not a training config.json (needs 'objective' and 'options')")
    values = {k: v for k, v in record.items() if k not in ("objective", "options", *REMOVED_SETTINGS)}
    former = values.pop(FORMER_PRECISION_SETTING, None)
    if former is not None and "precision" not in values:
        values["precision"] = "float16" if former else "float32"
    return configure(record["objective"], **record["options"], **values)


def in_former_terms(values: dict) -> dict:
    """`values` (a record's or a run key's settings) with `precision` written as the former
    `mixed_precision` where that setting could say it (float32: false, float16: true), so that
    runs and encoders made before `precision` keep their keys and digests; bfloat16 stays
    `precision`. Values without `precision` (a record written before it) are returned as they are."""
    if "precision" not in values:
        return values
    values = dict(values)
    precision = values.pop("precision")
    if precision in _FORMER_PRECISION:
        values[FORMER_PRECISION_SETTING] = _FORMER_PRECISION[precision]
    else:
        values["precision"] = precision
    return values


def configure(objective_name: str, **values):
    """(objective, TrainConfig) from one flat set of settings, as a command line gives them:
    each key goes to the objective's options or to `TrainConfig`; an unknown key is an error."""
    objective_class = get_objective_class(objective_name)
    option_names = {f.name for f in dataclasses.fields(objective_class.options_class)}
    config_names = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(values) - option_names - config_names)
    if unknown:
        raise ValueError(f"objective {objective_name!r} has no setting {unknown}")
    options = objective_class.options_class(**{k: v for k, v in values.items() if k in option_names})
    config = TrainConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in config_names})
    return objective_class(options), config


def _weight_settings(record: dict) -> dict:
    """The record without what does not change the weights (see the module docstring)."""
    values = {key: value for key, value in record.items() if key not in _NOT_TRAINING}
    if values.get("warmup_proportion"):
        values.pop("num_warmup_steps", None)
    if not any(values.get(key) for key in _EVAL_SETTINGS):
        values.pop("eval_steps", None)
    for key in _SUITE_SETTINGS:
        if not values.get(key):
            values.pop(key, None)
    for key, default in _ADDED_SETTINGS.items():
        if values.get(key, default) == default:
            values.pop(key, None)
    return in_former_terms(values)


def settings_digest(record: dict) -> str:
    """The digest of a config.json record's settings that change the weights, inputs as their
    paths: the encoder a run writes records it under `SETTINGS_DIGEST_KEY`.

    Args:
      record: a `stage_record`, or a config.json as read (lists for tuples), of this version or
        an earlier one.

    Returns:
      16 hex digits, equal for a record and its config.json as written.
    """
    values = _weight_settings(json.loads(json.dumps(record)))
    canonical = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:_DIGEST_LENGTH]


def differing_settings(old: dict, new: dict) -> list:
    """The settings that change the weights and differ between two config.json records.

    Args:
      old: the `stage_record` a run folder holds.
      new: the `stage_record` asked for.

    Returns:
      [(name, old value, new value)] sorted by name; the objective's options are named like the
      other settings, as their flags are.
    """

    def flat(record):
        values = {key: value for key, value in json.loads(json.dumps(record)).items() if key not in _NOT_TRAINING}
        return {**values.pop("options", {}), **values}

    old_values, new_values = flat(old), flat(new)
    both = (old_values, new_values)
    # As in `_weight_settings`, but judged on both records, so that a change shows as itself.
    if any(values.get("warmup_proportion") for values in both):
        for values in both:
            values.pop("num_warmup_steps", None)
    if not any(values.get(key) for values in both for key in _EVAL_SETTINGS):
        for values in both:
            values.pop("eval_steps", None)
    return [(name, old_values.get(name), new_values.get(name)) for name in sorted(set(old_values) | set(new_values))
            if old_values.get(name) != new_values.get(name)]
