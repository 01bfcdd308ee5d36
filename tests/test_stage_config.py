"""stage_config: a run's config.json record, the settings digest its encoder records and the
comparison that decides whether a run folder resumes, both on what changes the trained weights."""

import json
import os
import subprocess
import sys

import pytest

from dialoguecse_tf import stage_config
from dialoguecse_tf.experiments.tools import TOOLS


def _record(**changes):
    """A config.json as versions before the removal of reuse_runs_under wrote it (in part)."""
    record = {"objective": "dse", "options": {"temperature": 0.05}, "train_file": ["/r/pairs-*"],
              "init_checkpoint": "/start", "output_dir": "/run", "learning_rate": 3e-5, "log_steps": 10,
              "save_checkpoints_steps": 100, "num_warmup_steps": 0, "warmup_proportion": 0.0,
              "reuse_runs_under": [], "eval_dialogue_file": None}
    record.update(changes)
    return record


def test_the_digest_ignores_where_and_how_often_but_not_what():
    base = stage_config.settings_digest(_record())
    # Pinned: encoders written before record it, and an export's model card compares it.
    assert base == "6d1447fc2c4f9f7c"
    assert stage_config.settings_digest(_record(output_dir="elsewhere", log_steps=1, save_checkpoints_steps=7,
                                                tpu_address="t", reuse_runs_under=["runs"])) == base
    assert stage_config.settings_digest({k: v for k, v in _record().items() if k != "reuse_runs_under"}) == base
    assert stage_config.settings_digest(_record(learning_rate=6e-5)) != base
    assert stage_config.settings_digest(_record(options={"temperature": 0.1})) != base
    assert stage_config.settings_digest(_record(train_file=["/moved/pairs-*"])) != base


def test_the_digest_of_a_record_as_the_stage_writes_it_is_unchanged():
    objective, config = stage_config.configure("dse", temperature=0.05, train_file=("/r/pairs-*",),
                                               init_checkpoint="/start", output_dir="/run", learning_rate=3e-5)
    record = stage_config.stage_record(objective, config.resolved(objective))
    assert stage_config.settings_digest(record) == "b43affc47e80b671"
    assert stage_config.settings_digest(json.loads(json.dumps(record))) == "b43affc47e80b671"


def test_warmup_steps_derived_from_the_proportion_do_not_count():
    given = stage_config.settings_digest(_record(warmup_proportion=0.1, num_warmup_steps=0))
    assert stage_config.settings_digest(_record(warmup_proportion=0.1, num_warmup_steps=30)) == given
    assert stage_config.settings_digest(_record(num_warmup_steps=30)) != stage_config.settings_digest(_record())


def test_eval_steps_and_added_settings_count_only_where_they_change_the_run():
    base = stage_config.settings_digest(_record(eval_steps=0))
    assert stage_config.settings_digest(_record(eval_steps=100)) == base
    assert stage_config.settings_digest(_record(eval_steps=100, eval_dialogue_file="/dev")) != \
        stage_config.settings_digest(_record(eval_steps=0, eval_dialogue_file="/dev"))
    assert stage_config.settings_digest(_record(eval_task=[], eval_suite=None)) == stage_config.settings_digest(
        _record())
    # Passes draw their own dropout masks, so a batch split into passes is another run.
    assert stage_config.settings_digest(_record(max_examples_per_pass=0)) == stage_config.settings_digest(_record())
    assert stage_config.settings_digest(_record(max_examples_per_pass=4)) != stage_config.settings_digest(_record())


def test_differing_settings_name_what_changes_the_weights_old_to_new():
    old = _record()
    new = _record(learning_rate=1e-3, log_steps=1, output_dir="/other", options={"temperature": 0.1})
    assert stage_config.differing_settings(old, new) == [("learning_rate", 3e-5, 1e-3), ("temperature", 0.05, 0.1)]
    assert stage_config.differing_settings(old, {k: v for k, v in old.items() if k != "reuse_runs_under"}) == []
    # A proportion on either side decides the warmup steps; eval_steps counts only with a set.
    assert stage_config.differing_settings(_record(warmup_proportion=0.1, num_warmup_steps=0),
                                           _record(warmup_proportion=0.1, num_warmup_steps=30)) == []
    assert stage_config.differing_settings(_record(), _record(warmup_proportion=0.1, num_warmup_steps=30)) == [
        ("warmup_proportion", 0.0, 0.1)]
    assert stage_config.differing_settings(_record(eval_steps=0), _record(eval_steps=10)) == []
    assert stage_config.differing_settings(_record(eval_steps=0, eval_sts_file="/sts"),
                                           _record(eval_steps=10, eval_sts_file="/sts")) == [("eval_steps", 0, 10)]


def test_a_config_json_written_before_a_setting_was_removed_still_loads(tmp_path):
    path = tmp_path / stage_config.CONFIG_FILE
    path.write_text(json.dumps(_record(reuse_runs_under=["runs"])), encoding="utf-8")
    objective, config = stage_config.load_stage_config(str(path))
    assert objective.name == "dse" and config.learning_rate == 3e-5
    assert "reuse_runs_under" not in stage_config.stage_record(objective, config)


def test_run_keys_keep_the_removed_settings_at_the_value_every_run_had():
    settings = TOOLS["train"].effective_settings({"objective": "mlm", "train_file": "r/*", "output_dir": "o"})
    assert {name: settings[name] for name in stage_config.REMOVED_SETTINGS} == {"reuse_runs_under": ()}


def test_runs_are_read_and_digested_without_importing_the_stage(tmp_path):
    # The stage imports stage_config; the reverse would be an import cycle, and the exports'
    # model card reads runs without training code.
    code = ("import sys; from dialoguecse_tf import stage_config; import dialoguecse_tf.cli.train_flags; "
            "run = stage_config.configure('mlm', train_file=('r-*',), output_dir='o'); "
            "stage_config.settings_digest(stage_config.stage_record(*run)); "
            "print('dialoguecse_tf.stage' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_fine_tuned_evaluation_tasks_do_not_run_during_training(tmp_path):
    config = stage_config.TrainConfig(eval_task=(f"B77:intent_ft:{tmp_path}", f"DEV:sr:{tmp_path / 's.txt'}"))
    with pytest.raises(ValueError, match=r"fine-tuned evaluation tasks do not run during training: \['B77:intent_ft:"):
        config.eval_entries()


def test_precision_keeps_the_digests_and_keys_of_the_runs_made_before_it():
    # `precision` replaced `mixed_precision`: at float32 (and float16) a record and a run key say
    # what they said before it existed; bfloat16, which nothing could say before, adds itself.
    objective, config = stage_config.configure("dse", temperature=0.05, train_file=("/r/pairs-*",),
                                               init_checkpoint="/start", output_dir="/run", learning_rate=3e-5)
    record = stage_config.stage_record(objective, config.resolved(objective))
    assert record["precision"] == "float32" and "mixed_precision" not in record
    former = {**{key: value for key, value in record.items() if key != "precision"}, "mixed_precision": False}
    assert stage_config.settings_digest(record) == stage_config.settings_digest(former) == "b43affc47e80b671"
    assert stage_config.settings_digest({**record, "precision": "float16"}) == stage_config.settings_digest(
        {**former, "mixed_precision": True})
    assert stage_config.settings_digest({**record, "precision": "bfloat16"}) not in (
        stage_config.settings_digest(record), stage_config.settings_digest({**record, "precision": "float16"}))
    flags = {"objective": "mlm", "train_file": "r/*", "output_dir": "o"}
    default = TOOLS["train"].effective_settings(flags)
    assert default["mixed_precision"] is False and "precision" not in default
    assert TOOLS["train"].effective_settings({**flags, "precision": "float32"}) == default
    assert TOOLS["train"].effective_settings({**flags, "precision": "float16"}) == {**default, "mixed_precision": True}
    bfloat16 = TOOLS["train"].effective_settings({**flags, "precision": "bfloat16"})
    assert bfloat16 == {**{k: v for k, v in default.items() if k != "mixed_precision"}, "precision": "bfloat16"}
    # An evaluation's key leaves the new setting out at its default.
    assert "precision" not in TOOLS["evaluate"].effective_settings({})
    assert TOOLS["evaluate"].effective_settings({"precision": "bfloat16"})["precision"] == "bfloat16"


@pytest.mark.parametrize("former, precision", [(False, "float32"), (True, "float16")])
def test_a_config_json_written_with_mixed_precision_loads_as_its_precision(tmp_path, former, precision):
    path = tmp_path / stage_config.CONFIG_FILE
    path.write_text(json.dumps(_record(mixed_precision=former)), encoding="utf-8")
    objective, config = stage_config.load_stage_config(str(path))
    assert config.precision == precision
    resolved = stage_config.stage_record(objective, config.resolved(objective))
    assert stage_config.differing_settings(resolved, {**resolved, "precision": precision}) == []
