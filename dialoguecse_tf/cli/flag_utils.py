"""Entry-point helpers: a stage's config dataclass from absl flags of the same names, one-line errors."""

import dataclasses
import sys
import typing

from absl import app
from absl import flags as absl_flags

from dialoguecse_tf.data.readers import MIN_TURNS_BY_FORMAT, READERS


def config_from_flags(config_class, flag_values, **overrides):
    """Builds `config_class` taking each field from the flag with the field's name.

    Nested dataclass fields are filled the same way, so one flag name maps to one config
    field everywhere. List-valued flags become tuples to keep configs hashable.
    """
    hints = typing.get_type_hints(config_class)
    values = {}
    for field in dataclasses.fields(config_class):
        if field.name in overrides:
            values[field.name] = overrides[field.name]
        elif dataclasses.is_dataclass(hints[field.name]):
            values[field.name] = config_from_flags(hints[field.name], flag_values)
        elif field.name in flag_values:
            value = flag_values[field.name].value
            values[field.name] = tuple(value) if isinstance(value, list) else value
    return config_class(**values)


def define_corpus_flags(flags):
    """The input flags every data-prep entry point shares (fields of `CorpusConfig`)."""
    flags.DEFINE_multi_string("input_file", None, "Corpus file or glob (sgd: also a folder); repeat the flag "
                              "for several.")
    flags.DEFINE_enum("input_format", "jsonl", sorted(READERS),
                      "authors: DialogueCSE training format; mdc: Microsoft Dialogue Challenge TSV; "
                      "ecd: ECD response-selection release; jddc: JDDC release's chat.txt; sgd: Schema-Guided "
                      "Dialogue dialogues_*.json; jsonl: this project's format (README).")
    flags.DEFINE_bool("skip_malformed", False, "Skip malformed lines and count them instead of stopping.")
    flags.DEFINE_bool("merge_speakers", True, "Merge consecutive utterances of the same speaker (paper 5.1.1).")
    defaults = ", ".join(f"{name} {n}" for name, n in sorted(MIN_TURNS_BY_FORMAT.items()))
    flags.DEFINE_integer("min_turns", None, f"Drop dialogues with fewer turns; 0 keeps all. Unset: the format's "
                         f"default ({defaults}; paper 5.1.1 drops short JDDC and ECD dialogues, keeps MDC whole).")
    flags.mark_flag_as_required("input_file")


def define_training_flags(flags, train_batch_size: int, learning_rate: float, max_seq_length: int):
    """Flags both training stages share; defaults are the stage's paper values."""
    flags.DEFINE_string("output_dir", None, "Run folder: checkpoints/, tensorboard/, encoder/, config.json.")
    flags.DEFINE_string("init_checkpoint", None, "Checkpoint to start from: Google TF1, HuggingFace or this project's.")
    flags.DEFINE_integer("max_seq_length", max_seq_length, "Tokens per sequence; must match the records.")
    flags.DEFINE_integer("train_batch_size", train_batch_size, "Global batch size, split across replicas.")
    flags.DEFINE_float("learning_rate", learning_rate, "Peak AdamW learning rate (linear warmup, then linear decay).")
    flags.DEFINE_integer("num_train_steps", None, "Training steps; set this or num_train_epochs.")
    flags.DEFINE_float("num_train_epochs", None, "Epochs over the records (fractions allowed); set this or num_train_steps.")
    flags.DEFINE_integer("num_warmup_steps", 0, "Linear warmup steps.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps (and at the end).")
    flags.DEFINE_integer("log_steps", 10, "TensorBoard summaries every this many steps.")
    flags.DEFINE_integer("random_seed", 12345, "Seed for initialisation, shuffling and dropout.")
    flags.DEFINE_enum("distribution_strategy", "one_device",
                      ["one_device", "mirrored", "multi_worker_mirrored", "tpu"],
                      "tf.distribute strategy (Model Garden's names).")
    flags.DEFINE_string("tpu_address", "", "TPU name or address for distribution_strategy=tpu.")
    flags.DEFINE_bool("jit_compile", False, "Compile each replica's forward and backward pass with XLA "
                      "(slower on CPU, see benchmarks/README.md).")
    flags.DEFINE_bool("mixed_precision", False, "float16 compute, float32 weights and dynamic loss scaling; "
                      "GPU only.")


def run(main):
    """`app.run(main)` where every expected failure, bad flags included, ends in one line.

    absl reports bad or missing flags over several lines (one per flag, then a hint); here
    they become one `error: ...` line like the errors `clear_errors` reports.
    """
    app.run(clear_errors(main), flags_parser=_parse_flags)


def _parse_flags(argv):
    try:
        return absl_flags.FLAGS(argv)
    except absl_flags.Error as error:
        problems = "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
        sys.stderr.write(f"error: {type(error).__name__}: {problems} (--helpshort lists the flags)\n")
        sys.exit(1)


def clear_errors(main):
    """Wraps an absl `main` so expected failures end in one line on stderr and exit status 1.

    Bad paths, malformed input, inconsistent settings and a diverged loss (ValueError,
    OSError, ArithmeticError and TensorFlow's own op errors, e.g. a corrupt TFRecord) are the
    user's to fix, so a traceback would only bury the message; anything else is a bug and
    keeps its traceback.
    """

    def wrapped(argv):
        try:
            return main(argv)
        except Exception as error:  # noqa: BLE001 (re-raised below unless expected)
            expected = isinstance(error, (ValueError, OSError, ArithmeticError)) or type(
                error
            ).__module__.startswith("tensorflow")
            if not expected:
                raise
            message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            return f"error: {type(error).__name__}: {message}"

    return wrapped
