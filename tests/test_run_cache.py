"""run_cache: run keys follow what changes the trained weights, by content, not by location."""

import json
import os
import subprocess
import sys

import pytest

from dialoguecse_tf import run_cache


def _record(tmp_path, **changes):
    records, checkpoint = tmp_path / "records", tmp_path / "start"
    if not checkpoint.exists():
        records.mkdir()
        (records / "pairs-00000-of-00001.tfrecord").write_bytes(b"records")
        checkpoint.mkdir()
        (checkpoint / "model.safetensors").write_bytes(b"weights")
    record = {"objective": "dse", "options": {"temperature": 0.05}, "train_file": [str(records / "pairs-*")],
              "init_checkpoint": str(checkpoint), "output_dir": str(tmp_path / "run"), "learning_rate": 3e-5,
              "log_steps": 10, "save_checkpoints_steps": 100, "num_warmup_steps": 0, "warmup_proportion": 0.0,
              "reuse_runs_under": [], "eval_dialogue_file": None}
    record.update(changes)
    return record


def _stage(record):
    from dialoguecse_tf.stage import configure

    settings = {k: v for k, v in record.items() if k not in ("objective", "options")}
    return configure(record["objective"], **record["options"], **settings)


def test_key_ignores_where_and_how_often_but_not_what(tmp_path):
    base = run_cache.record_key(_record(tmp_path))
    assert run_cache.record_key(_record(tmp_path, output_dir="elsewhere", log_steps=1, save_checkpoints_steps=7,
                                        reuse_runs_under=["runs"])) == base
    assert run_cache.record_key(_record(tmp_path, learning_rate=6e-5)) != base
    assert run_cache.record_key(_record(tmp_path, options={"temperature": 0.1})) != base

    moved = tmp_path / "moved"
    (tmp_path / "records").rename(moved)
    assert run_cache.record_key(_record(tmp_path, train_file=[str(moved / "pairs-*")])) == base
    (tmp_path / "start" / "model.safetensors").write_bytes(b"other weights")
    assert run_cache.record_key(_record(tmp_path, train_file=[str(moved / "pairs-*")])) != base


def test_warmup_steps_derived_from_the_proportion_do_not_count(tmp_path):
    given = run_cache.record_key(_record(tmp_path, warmup_proportion=0.1, num_warmup_steps=0))
    assert run_cache.record_key(_record(tmp_path, warmup_proportion=0.1, num_warmup_steps=30)) == given
    assert run_cache.record_key(_record(tmp_path, num_warmup_steps=30)) != run_cache.record_key(_record(tmp_path))


def test_records_that_vanished_are_an_error_naming_the_pattern(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-"):
        run_cache.record_key(_record(tmp_path, train_file=[str(tmp_path / "nothing-*")]))


def test_finished_runs_skip_unfinished_links_and_other_json(tmp_path):
    record = _record(tmp_path)
    finished = tmp_path / "runs" / "a"
    (finished / "encoder").mkdir(parents=True)
    (finished / "config.json").write_text(json.dumps(record))
    unfinished = tmp_path / "runs" / "b"
    unfinished.mkdir()
    (unfinished / "config.json").write_text(json.dumps(record))
    (tmp_path / "runs" / "a" / "encoder" / "config.json").write_text("{}")  # e.g. a HuggingFace folder
    assert run_cache.find_finished_run(*_stage(record), [str(tmp_path / "runs")]) == str(finished)
    assert run_cache.find_finished_run(*_stage(record), [str(tmp_path / "runs")], exclude=str(finished)) is None

    run_cache.link_run(str(finished), str(tmp_path / "runs" / "c"), record, "k")
    assert (tmp_path / "runs" / "c" / "encoder").is_symlink()
    assert json.loads((tmp_path / "runs" / "c" / run_cache.REUSED_FROM_FILE).read_text())["run"] == "../a"
    assert [run for run, _ in run_cache.finished_runs([str(tmp_path / "runs")])] == [str(finished)]


def test_a_run_from_before_a_setting_existed_matches_with_its_default(tmp_path):
    record = _record(tmp_path)
    old = {key: value for key, value in record.items() if key not in ("eval_dialogue_file", "warmup_proportion")}
    (tmp_path / "runs" / "old" / "encoder").mkdir(parents=True)
    (tmp_path / "runs" / "old" / "config.json").write_text(json.dumps(old))
    assert run_cache.find_finished_run(*_stage(record), [str(tmp_path / "runs")]) == str(tmp_path / "runs" / "old")


def test_eval_steps_count_only_with_an_evaluation_set(tmp_path):
    base = run_cache.record_key(_record(tmp_path, eval_steps=0))
    assert run_cache.record_key(_record(tmp_path, eval_steps=100)) == base
    dev = tmp_path / "dev.txt"
    dev.write_text("dev")
    assert run_cache.record_key(_record(tmp_path, eval_steps=100, eval_dialogue_file=str(dev))) != \
        run_cache.record_key(_record(tmp_path, eval_steps=0, eval_dialogue_file=str(dev)))


def test_keys_of_runs_keyed_before_settings_were_added_are_unchanged(tmp_path):
    # Pinned before eval_suite, eval_task and max_examples_per_pass existed: run folders and reuse
    # are found by the key, so a setting added with its default must not move it.
    assert run_cache.run_key(*_stage(_record(tmp_path))) == "7eb0921565b8d9cb"
    dev = tmp_path / "dev.txt"
    dev.write_text("dev")
    assert run_cache.run_key(*_stage(_record(tmp_path, eval_steps=100, eval_dialogue_file=str(dev)))) == \
        "cec3c7e309a9d714"
    # Passes draw their own dropout masks, so a batch split into passes is another run.
    assert run_cache.run_key(*_stage(_record(tmp_path, max_examples_per_pass=4))) != "7eb0921565b8d9cb"


def test_an_evaluation_suite_counts_by_its_entries_and_their_bytes(tmp_path):
    from dialoguecse_tf.evaluation.suite import SuiteEntry, write_suite

    sts = tmp_path / "sts.txt"
    sts.write_text("5\ta\tb\n")
    suite_file = tmp_path / "suite.json"
    write_suite(str(suite_file), [SuiteEntry("ECD", "dsts", str(sts))])
    by_task = run_cache.run_key(*_stage(_record(tmp_path, eval_task=[f"ECD:dsts:{sts}"])))
    assert run_cache.run_key(*_stage(_record(tmp_path, eval_suite=str(suite_file)))) == by_task
    assert by_task != run_cache.run_key(*_stage(_record(tmp_path)))
    assert run_cache.run_key(*_stage(_record(tmp_path, eval_task=[f"JDDC:dsts:{sts}"]))) != by_task
    assert run_cache.run_key(*_stage(_record(tmp_path, eval_task=[f"ECD:dsts:{sts}"], eval_steps=50))) != by_task
    sts.rename(tmp_path / "moved.txt")
    assert run_cache.run_key(*_stage(_record(tmp_path, eval_task=[f"ECD:dsts:{tmp_path / 'moved.txt'}"]))) == by_task
    (tmp_path / "moved.txt").write_text("4\ta\tb\n")
    assert run_cache.run_key(*_stage(_record(tmp_path, eval_task=[f"ECD:dsts:{tmp_path / 'moved.txt'}"]))) != by_task


def test_a_tf_checkpoint_prefix_is_hashed_by_its_files(tmp_path):
    folder = tmp_path / "google"
    folder.mkdir()
    for name, data in (("bert_model.ckpt.index", b"i"), ("bert_model.ckpt.data-00000-of-00001", b"d"),
                       ("bert_config.json", b"{}"), ("vocab.txt", b"[PAD]")):
        (folder / name).write_bytes(data)
    first = run_cache.content_digest(str(folder / "bert_model.ckpt"))
    (folder / "bert_model.ckpt.data-00000-of-00001").write_bytes(b"other")
    assert run_cache.content_digest(str(folder / "bert_model.ckpt")) != first


def test_the_run_cache_keys_runs_without_importing_the_stage(tmp_path):
    # stage imports run_cache; the reverse would be an import cycle.
    (tmp_path / "r-00000-of-00001.tfrecord").write_bytes(b"")
    code = ("import sys; from dialoguecse_tf import run_cache, stage_config; import dialoguecse_tf.cli.train_flags; "
            f"run = stage_config.configure('mlm', train_file=({str(tmp_path / 'r-*')!r},), output_dir='o'); "
            "run_cache.run_key(*run); run_cache.find_finished_run(*run, []); "
            "print('dialoguecse_tf.stage' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert result.stdout.strip().splitlines()[-1] == "False"
