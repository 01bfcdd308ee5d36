"""Entry-point helpers: a stage's config dataclass from absl flags of the same names, one-line errors."""

import dataclasses
import functools
import sys

from absl import app
from absl import flags as absl_flags

from dialoguecse_tf.config_fields import field_kind, type_hints
from dialoguecse_tf.data.readers import READERS

# Flags defined here belong to the entry point that asks for them (its --helpshort lists them).
absl_flags.disclaim_key_flags()


class PrivateFlags:
    """absl's flags module with every DEFINE and mark_flag(s)_as_required bound to one private
    FlagValues (`values`): an entry point's flags defined and parsed without touching the
    process's own, for code that holds a command line rather than a process."""

    def __init__(self):
        self.values = absl_flags.FlagValues()

    def __getattr__(self, name):
        value = getattr(absl_flags, name)
        bound = name.startswith(("DEFINE", "mark_flag"))
        return functools.partial(value, flag_values=self.values) if bound else value


def config_from_flags(config_class, flag_values, **overrides):
    """Builds `config_class` taking each field from the flag with the field's name.

    Nested dataclass fields are filled the same way, so one flag name maps to one config
    field everywhere. List-valued flags become tuples to keep configs hashable.
    """
    hints = type_hints(config_class)
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
                      "; ".join(f"{reader.name}: {reader.help}" for reader in READERS.values()) + ".")
    flags.DEFINE_bool("skip_malformed", False, "Skip malformed lines and count them instead of stopping.")
    flags.DEFINE_bool("merge_speakers", True, "Merge consecutive utterances of the same speaker (paper 5.1.1).")
    defaults = ", ".join(f"{name} {READERS[name].min_turns}" for name in sorted(READERS))
    flags.DEFINE_integer("min_turns", None, f"Drop dialogues with fewer turns; 0 keeps all. Unset: the format's "
                         f"default ({defaults}; paper 5.1.1 drops short JDDC and ECD dialogues, keeps MDC whole).")
    flags.mark_flag_as_required("input_file")


def define_flag(flags, name: str, kind: type, default, help_text: str, choices=None, repeated=False,
                as_list=False) -> None:
    """One absl flag of a config field's type; tuple fields are repeatable (or comma lists)."""
    if repeated:
        define = flags.DEFINE_list if as_list else flags.DEFINE_multi_string
        define(name, list(default or ()) or None, help_text)
    elif choices:
        flags.DEFINE_enum(name, default, list(choices), help_text)
    elif kind is bool:
        flags.DEFINE_bool(name, default, help_text)
    elif kind is int:
        flags.DEFINE_integer(name, default, help_text)
    elif kind is float:
        flags.DEFINE_float(name, default, help_text)
    else:
        flags.DEFINE_string(name, default, help_text)


def define_config_flags(flags, config_class, exclude=()) -> None:
    """One flag per field of `config_class` (made with `config_fields.field`), with the field's
    default, help and choices; tuple fields become repeatable flags, and a field without a
    default a required flag."""
    required = []
    for config_field in dataclasses.fields(config_class):
        if config_field.name in exclude:
            continue
        kind, repeated = field_kind(config_class, config_field.name)
        default = config_field.default
        if default is dataclasses.MISSING:
            default = None
            required.append(config_field.name)
        define_flag(flags, config_field.name, kind, default,
                    config_field.metadata.get("help") or config_field.name, config_field.metadata.get("choices"),
                    repeated, config_field.metadata.get("flag") == "list")
    if required:
        flags.mark_flags_as_required(required)


def flag_value_or_none(flag_values, name):
    return flag_values[name].value if name in flag_values else None


def run(main, pass_unknown=False):
    """`app.run(main)` where every expected failure, bad flags included, ends in one line.

    absl reports bad or missing flags over several lines (one per flag, then a hint); here
    they become one `error: ...` line like the errors `clear_errors` reports. With
    `pass_unknown`, flags the entry point does not define reach `main`'s argv instead of
    failing (Beam pipeline options, `--runner=...`; the stage refuses them unless it runs on Beam).
    TensorFlow's known-harmless error lines are dropped from stderr (`noise.drop_known_noise`).
    """
    from dialoguecse_tf.cli.noise import drop_known_noise

    drop_known_noise()
    app.run(clear_errors(main), flags_parser=lambda argv: _parse_flags(argv, pass_unknown))


def _parse_flags(argv, pass_unknown=False):
    try:
        return absl_flags.FLAGS(argv, known_only=pass_unknown)
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
            return f"error: {type(error).__name__}: {_one_line(error)}"

    return wrapped


# How TensorFlow's autograph opens an error raised inside a traced function; the cause is its
# last line ("ValueError: ..."), after the frames of the user's code.
_AUTOGRAPH_HEADER = "in user code:"


def _one_line(error: Exception) -> str:
    """The first line of the error's message, or the cause of an autograph error."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if lines[0] == _AUTOGRAPH_HEADER and len(lines) > 1:
        return lines[-1].removeprefix(f"{type(error).__name__}: ")
    return lines[0]
