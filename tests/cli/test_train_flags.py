"""Training flags generated from the configs: presets, precedence, objective options."""

import json

import pytest

from dialoguecse_tf import stage
from dialoguecse_tf.cli.train_flags import stage_from_args
from dialoguecse_tf.presets import PRESETS


def _parse(*args, objectives=None, default_objective=None):
    return stage_from_args(["--train_file=records/*", "--output_dir=out", *args], objectives, default_objective)


def test_a_preset_sets_values_and_the_command_line_wins():
    objective, config = _parse("--preset=paper_jddc_dialoguecse", "--learning_rate=1e-4", "--num_context_turns=2")
    assert objective.name == "dialoguecse" and objective.options.variant == "released"
    assert objective.options.aggregation == "attention" and objective.options.num_context_turns == 2
    assert config.learning_rate == 1e-4 and config.max_seq_length == 100 and config.num_warmup_steps == 0
    assert config.train_file == ("records/*",)


def test_every_preset_names_its_precision_and_the_command_line_wins():
    assert {name: preset["precision"] for name, preset in PRESETS.items()} == {name: "float32" for name in PRESETS}
    _, config = _parse("--preset=cpu_dse", "--precision=bfloat16")
    assert config.precision == "bfloat16"


def test_objective_defaults_fill_what_nothing_sets():
    objective, config = _parse("--objective=mlm")
    assert config.resolved(objective).train_batch_size == 50 and config.resolved(objective).learning_rate == 2e-5
    objective, config = _parse("--objective=siamese_m", "--num_negatives=4")
    assert objective.options.num_negatives == 4 and objective.options.num_context_turns == 3
    assert config.resolved(objective).train_batch_size == 20


def test_options_of_other_objectives_are_ignored_with_a_warning(caplog):
    objective, _ = _parse("--objective=siamese_s", "--temperature=0.5")
    assert not hasattr(objective.options, "temperature")
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert warnings == ["objective 'siamese_s' has no option --temperature; ignored"]


def test_an_objective_is_required():
    with pytest.raises(ValueError, match="--objective"):
        _parse()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_is_a_valid_configuration(name):
    """Known keys of its objective, each of its field's type, within its bounds (configure and
    the config classes check all three)."""
    preset = dict(PRESETS[name])
    objective, config = stage.configure(preset.pop("objective"), **preset)
    resolved = config.resolved(objective)
    assert resolved.learning_rate > 0 and resolved.train_batch_size >= 1
    for key, value in preset.items():
        where = objective.options if hasattr(objective.options, key) else config
        assert getattr(where, key) == value, key


@pytest.mark.parametrize("settings, message", [
    ({"learning_rate": -1e-5}, r"TrainConfig.learning_rate must be greater than 0.0"),
    ({"learning_rate": float("nan")}, r"TrainConfig.learning_rate must be a finite number"),
    ({"train_batch_size": 0}, r"TrainConfig.train_batch_size must be at least 1"),
    ({"train_batch_size": 8.0}, r"TrainConfig.train_batch_size must be an integer"),
    ({"num_train_steps": True}, r"TrainConfig.num_train_steps must be an integer"),
    ({"warmup_proportion": 1.5}, r"TrainConfig.warmup_proportion must be at most 1.0"),
    ({"distribution_strategy": "gpus"}, r"TrainConfig.distribution_strategy must be one of"),
    ({"num_negatives": 0}, r"DialogueCSEOptions.num_negatives must be at least 1"),
    ({"num_frozen_layers": "6"}, r"DialogueCSEOptions.num_frozen_layers must be an integer"),
    ({"empty_rounds": "one"}, r"DialogueCSEOptions.empty_rounds must be one of"),
    ({"lr_decay_rate": 0.0}, r"DialogueCSEOptions.lr_decay_rate must be greater than 0.0"),
    ({"window": 10}, r"objective 'dialoguecse' has no setting \['window'\]"),
])
def test_a_setting_of_the_wrong_type_range_or_objective_is_refused_by_name(settings, message):
    with pytest.raises(ValueError, match=message):
        stage.configure("dialoguecse", **{"num_train_steps": 10, **settings})


# The papers' stated settings, transcribed from the papers and the authors' scripts (not from
# presets.py): DialogueCSE section 5.3 and the release's config_bert.py; DSE App. A.2 and its
# README command; dial2vec section 4.1 and run_plato.sh.
PAPER_SETTINGS = {
    "paper_ecd_mlm": {"objective": "mlm", "learning_rate": 2e-5, "train_batch_size": 50, "max_seq_length": 50},
    "paper_jddc_mlm": {"objective": "mlm", "learning_rate": 2e-5, "train_batch_size": 50, "max_seq_length": 100},
    "paper_ecd_dialoguecse": {"objective": "dialoguecse", "variant": "released", "aggregation": "attention",
                              "learning_rate": 5e-5, "train_batch_size": 20, "max_seq_length": 50,
                              "temperature": 0.1, "num_negatives": 9, "num_context_turns": 3,
                              "num_frozen_layers": 6, "num_warmup_steps": 0},
    "paper_jddc_dialoguecse": {"max_seq_length": 100, "aggregation": "attention"},
    "paper_mdc_dialoguecse": {"max_seq_length": 50, "aggregation": "attention"},
    "paper_ecd_dialoguecse_i2": {"variant": "released", "aggregation": "mean"},
    "paper_ecd_dialoguecse_paper_text_i2": {"variant": "paper_text", "aggregation": "mean"},
    "paper_dse": {"objective": "dse", "contrast_type": "HardNeg", "temperature": 0.05, "max_seq_length": 32,
                  "train_batch_size": 1024, "learning_rate": 3e-6, "head_learning_rate_scale": 100.0,
                  "num_train_epochs": 15.0, "num_frozen_layers": 0, "random_seed": 1},
    "paper_dial2vec": {"objective": "dial2vec", "max_seq_length": 512, "train_batch_size": 5, "learning_rate": 1e-5,
                       "warmup_proportion": 0.1, "num_train_epochs": 5.0, "temperature": 0.2, "window": 10,
                       "num_negatives": 9, "num_frozen_layers": 6},
    "paper_dial2vec_tau005": {"temperature": 0.05},
}


@pytest.mark.parametrize("name", sorted(PAPER_SETTINGS))
def test_paper_presets_carry_the_papers_settings(name):
    preset = PRESETS[name]
    objective, config = stage.configure(preset["objective"], **{k: v for k, v in preset.items() if k != "objective"})
    resolved = config.resolved(objective)
    for key, want in PAPER_SETTINGS[name].items():
        got = objective.name if key == "objective" else getattr(
            objective.options if hasattr(objective.options, key) else resolved, key)
        assert got == want, (name, key, got, want)


def test_a_config_file_gives_its_runs_settings_and_the_command_line_wins(tmp_path):
    objective, config = stage.configure("dialoguecse", train_file=("records/*",), output_dir="runs/a",
                                        aggregation="mean", temperature=0.05, learning_rate=3e-5,
                                        num_train_steps=40, overwrite_output_dir=True)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(stage.stage_record(objective, config)), encoding="utf-8")
    again = stage.stage_record(*stage_from_args([f"--config_file={path}"]))
    assert again == {**stage.stage_record(objective, config), "overwrite_output_dir": False}
    moved_objective, moved = stage_from_args([f"--config_file={path}", "--output_dir=runs/b", "--temperature=0.1"])
    assert moved.output_dir == "runs/b" and moved_objective.options.temperature == 0.1
    assert moved.learning_rate == 3e-5 and moved.train_file == ("records/*",)


def test_train_file_is_required_without_a_config_file(tmp_path):
    with pytest.raises(ValueError, match="give --train_file"):
        stage_from_args(["--objective=mlm"])
    path = tmp_path / "config.json"
    path.write_text(json.dumps(stage.stage_record(*stage.configure("mlm", train_file=("r/*",), output_dir="o"))),
                    encoding="utf-8")
    with pytest.raises(ValueError, match="without --preset"):
        stage_from_args([f"--config_file={path}", "--preset=cpu_zh_mlm"])
