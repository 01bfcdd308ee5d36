"""Training flags generated from the configs: presets, precedence, objective options."""

import functools

import pytest
from absl import flags as absl_flags

from dialoguecse_tf import stage
from dialoguecse_tf.cli.train_flags import define_training_flags, stage_from_flags
from dialoguecse_tf.presets import PRESETS


class _Flags:
    """absl's flags module with every DEFINE bound to a private FlagValues."""

    def __init__(self):
        self.values = absl_flags.FlagValues()

    def __getattr__(self, name):
        value = getattr(absl_flags, name)
        return functools.partial(value, flag_values=self.values) if name.startswith("DEFINE") else value


def _parse(*args, objectives=None, default_objective=None):
    holder = _Flags()
    define_training_flags(holder, objectives, default_objective)
    holder.values(["prog", "--train_file=records/*", "--output_dir=out", *args])
    return stage_from_flags(holder.values)


def test_a_preset_sets_values_and_the_command_line_wins():
    objective, config = _parse("--preset=paper_jddc_dialoguecse", "--learning_rate=1e-4", "--num_context_turns=2")
    assert objective.name == "dialoguecse" and objective.options.variant == "released"
    assert objective.options.aggregation == "attention" and objective.options.num_context_turns == 2
    assert config.learning_rate == 1e-4 and config.max_seq_length == 100 and config.num_warmup_steps == 0
    assert config.train_file == ("records/*",)


def test_objective_defaults_fill_what_nothing_sets():
    objective, config = _parse("--objective=mlm")
    assert config.resolved(objective).train_batch_size == 50 and config.resolved(objective).learning_rate == 2e-5
    objective, config = _parse("--objective=siamese_m", "--num_negatives=4")
    assert objective.options.num_negatives == 4 and objective.options.num_context_turns == 3
    assert config.resolved(objective).train_batch_size == 20


def test_options_of_other_objectives_are_ignored_with_a_note(capsys):
    objective, _ = _parse("--objective=siamese_s", "--temperature=0.5")
    assert not hasattr(objective.options, "temperature")
    assert "has no option --temperature; ignored" in capsys.readouterr().out


def test_an_objective_is_required():
    with pytest.raises(ValueError, match="--objective"):
        _parse()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_a_valid_configuration(name):
    preset = dict(PRESETS[name])
    objective, config = stage.configure(preset.pop("objective"), **preset)
    assert config.resolved(objective).learning_rate > 0
