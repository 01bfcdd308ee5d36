"""benchmarks/common.py: the harness the speed benchmarks share."""
import json
import os
import sys

from benchmarks import common
from conftest import REPO_ROOT


def test_prune_run_keeps_only_the_named_files(tmp_path):
    run = tmp_path / "runs" / "paper_simcse"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "ckpt-3.index").write_text("x")
    (run / "encoder").mkdir()
    (run / "config.json").write_text("{}")
    (run / "train_log.jsonl").write_text('{"step": 1}\n')
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "kept.txt").write_text("x")
    os.symlink(outside, run / "link")
    common.prune_run(str(run), keep=("train_log.jsonl",))
    assert sorted(os.listdir(run)) == ["train_log.jsonl"]
    assert (outside / "kept.txt").exists()
    common.prune_run(str(tmp_path / "never_written"), keep=())


def test_results_go_to_the_benchmarks_file_unless_told(tmp_path):
    assert common.results_path(None, "objective_steps_profile") == os.path.join(
        "benchmarks", "results", "objective_steps_profile.json")
    assert common.results_path(str(tmp_path / "x.json"), "flops") == str(tmp_path / "x.json")


def test_the_command_is_the_module_run_from_the_repository_root(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(REPO_ROOT / "benchmarks" / "scaling.py"), "--repeats=1",
                                      "--note=a quiet machine"])
    assert common.command_line() == "python -m benchmarks.scaling --repeats=1 '--note=a quiet machine'"


def test_a_results_file_records_environment_command_and_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(REPO_ROOT / "benchmarks" / "flops.py"), "--repeats=1"])
    path = tmp_path / "flops.json"
    common.write_results(str(path), {"benchmark": "flops", "settings": {"hf_folder": str(REPO_ROOT / "benchmarks")}})
    written = json.loads(path.read_text())
    assert list(written)[:3] == ["environment", "command", "commit"]
    assert written["command"] == "python -m benchmarks.flops --repeats=1"
    assert written["commit"] is None or len(written["commit"]) == 40
    assert written["settings"]["hf_folder"] == "benchmarks"
    for field in ("date", "machine", "cpu", "cpu_flags", "cpu_count", "tensorflow"):
        assert field in written["environment"]


def test_a_payloads_own_command_wins(tmp_path):
    path = tmp_path / "paper_shape.json"
    common.write_results(str(path), {"command": "python benchmarks/paper_shape.py && python -m benchmarks.paper_shape"})
    assert json.loads(path.read_text())["command"].startswith("python benchmarks/paper_shape.py && ")


def test_define_flags_defines_the_shared_flags_once_as_the_callers_key_flags(monkeypatch):
    from absl import flags

    values = flags.FlagValues()
    monkeypatch.setattr(common.flags, "FLAGS", values)
    for name in ("DEFINE_string", "DEFINE_integer"):
        define = getattr(flags, name)
        monkeypatch.setattr(common.flags, name,
                            lambda *args, _define=define, **kwargs: _define(*args, flag_values=values, **kwargs))
    common.define_flags(repeats=3, steps_per_repeat=2, hf_folder=True)
    assert sorted(values) == ["hf_folder", "output_json", "repeats", "steps_per_repeat"]
    assert (values["repeats"].default, values["steps_per_repeat"].default, values["output_json"].default) == (3, 2, None)
    key_flags = {flag.name for flag in values.get_key_flags_for_module(__name__)}
    assert key_flags == {"hf_folder", "output_json", "repeats", "steps_per_repeat"}
