"""The training entry points' flags, generated from `TrainConfig` and the objectives' options.

Every training command (`train/run_training.py`, and the `pretrain/` and `finetune/` aliases)
defines its flags here, so a default or help text exists once: in the config dataclasses.
Options flags default to None, meaning "the objective's own default", because objectives may
share an option name with different defaults.
"""

from __future__ import annotations

import dataclasses

from absl import flags as absl_flags
from absl import logging

from dialoguecse_tf.cli.flag_utils import PrivateFlags, define_config_flags, define_flag, flag_value_or_none
from dialoguecse_tf.config_fields import field_kind
from dialoguecse_tf.objectives.registry import get_objective_class, objective_names
from dialoguecse_tf.presets import PRESETS, get_preset
from dialoguecse_tf.stage_config import TrainConfig, load_stage_config

# Flags defined here belong to the entry point that asks for them (its --helpshort lists them).
absl_flags.disclaim_key_flags()


def define_training_flags(flags, objectives=None, default_objective: str | None = None) -> None:
    """`--objective`, `--preset`, every `TrainConfig` field and the options of `objectives`."""
    objectives = tuple(objectives or objective_names())
    flags.DEFINE_enum("objective", default_objective, list(objectives), "Training objective: "
                      + "; ".join(f"{name}: {get_objective_class(name).summary}" for name in objectives))
    flags.DEFINE_enum("preset", None, [name for name, preset in PRESETS.items() if preset["objective"] in objectives],
                      "Named paper settings (dialoguecse_tf/presets.py); flags given on the command line win.")
    flags.DEFINE_string("config_file", None, "A training run's config.json: rerun that run with its objective, options "
                        "and settings; flags given on the command line win (e.g. --output_dir to train it anew "
                        "elsewhere). --overwrite_output_dir is never taken from it. Not with --preset.")
    define_config_flags(flags, TrainConfig)
    _define_options_flags(flags, objectives)


def _option_flag_names(flag_values) -> list:
    """The objectives' option flags this command line defines."""
    names = {f.name for name in objective_names() for f in dataclasses.fields(get_objective_class(name).options_class)}
    return sorted(name for name in names if name in flag_values)


def _define_options_flags(flags, objectives) -> None:
    seen = {}
    for name in objectives:
        options_class = get_objective_class(name).options_class
        for option in dataclasses.fields(options_class):
            seen.setdefault(option.name, []).append((name, options_class, option))
    for option_name, owners in seen.items():
        _, options_class, option = owners[0]
        defaults = ", ".join(f"{value!r} for {name}" for name, value in
                             dict.fromkeys((owner, o.default) for owner, _, o in owners))
        kind, _ = field_kind(options_class, option_name)
        define_flag(flags, option_name, kind, None, f"{option.metadata.get('help', '')} [default: {defaults}]",
                    option.metadata.get("choices"))


def recorded_settings(config_file: str) -> dict:
    """A run's config.json as one flat set of settings, as a command line gives them."""
    objective, config = load_stage_config(config_file)
    settings = {"objective": objective.name, **dataclasses.asdict(objective.options), **dataclasses.asdict(config)}
    # Starting over is a decision about the target folder, never something a rerun inherits.
    settings.pop("overwrite_output_dir")
    return settings


def stage_from_flags(flag_values):
    """(objective, TrainConfig) from parsed flags: command line > --config_file or preset > defaults."""
    if flag_values.config_file and flag_values.preset:
        raise ValueError("--config_file holds every setting of a run: give it without --preset")
    if flag_values.config_file:
        base = recorded_settings(flag_values.config_file)
    else:
        base = get_preset(flag_values.preset) if flag_values.preset else {}

    def value(name):
        if flag_values[name].present or name not in base:
            return flag_value_or_none(flag_values, name)
        return base[name]

    objective_name = value("objective")
    if not objective_name:
        raise ValueError("give --objective (or a --preset or --config_file that sets it)")
    allowed = flag_values["objective"].parser.enum_values
    if objective_name not in allowed:
        raise ValueError(f"--config_file {flag_values.config_file}: objective {objective_name!r} is not one this "
                         f"entry point trains ({', '.join(allowed)})")
    objective_class = get_objective_class(objective_name)
    own = {f.name for f in dataclasses.fields(objective_class.options_class)}
    foreign = sorted(name for name in _option_flag_names(flag_values) if flag_values[name].present and name not in own)
    if foreign:
        # Not an error: one command line often serves several objectives (e.g. a script passing
        # --temperature to every contrastive model), and the old finetuning entry point took it.
        logging.warning("objective %r has no option %s; ignored", objective_name, ", ".join("--" + n for n in foreign))
    option_values = {f.name: _tuple_if_list(value(f.name)) for f in dataclasses.fields(objective_class.options_class)}
    options = objective_class.options_class(**{k: v for k, v in option_values.items() if v is not None})
    config_values = {}
    for config_field in dataclasses.fields(TrainConfig):
        current = value(config_field.name)
        if current is None and isinstance(config_field.default, tuple):
            current = config_field.default  # an unset repeatable flag reads None, the field means ()
        config_values[config_field.name] = _tuple_if_list(current)
    if not config_values["train_file"]:
        raise ValueError("give --train_file (or --config_file of a run that sets it)")
    return objective_class(options), TrainConfig(**config_values)


def _tuple_if_list(value):
    return tuple(value) if isinstance(value, list) else value



def stage_from_args(args, objectives=None, default_objective: str | None = None):
    """(objective, TrainConfig) from command-line arguments (without the program name), parsed as
    the training entry points parse theirs, in a FlagValues of their own: for code that holds a
    command line rather than a process."""
    holder = PrivateFlags()
    define_training_flags(holder, objectives, default_objective)
    holder.values(["prog", *args])
    return stage_from_flags(holder.values)


def training_main(flags, objectives=None, default_objective: str | None = None):
    """Defines a training entry point's flags and returns its absl `main`."""
    define_training_flags(flags, objectives, default_objective)

    def main(argv):
        del argv
        from dialoguecse_tf.stage import run_stage

        objective, config = stage_from_flags(flags.FLAGS)
        if not config.output_dir:
            raise ValueError("give --output_dir (or --config_file of a run that sets it)")
        run_stage(objective, config)

    return main
