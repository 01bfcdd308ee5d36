"""benchmarks/common.py: the harness the speed benchmarks share."""
import json
import os
import sys

import pytest

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
    # A run that times bfloat16 (and float32 beside it) leaves the float32 file the docs quote alone.
    assert common.results_path(None, "flops", ("float32", "bfloat16")) == os.path.join(
        "benchmarks", "results", "flops_bfloat16.json")
    assert common.results_path(str(tmp_path / "x.json"), "flops", ("float32", "bfloat16")) == str(tmp_path / "x.json")


def test_precisions_time_float32_always_and_refuse_bfloat16_in_one_line_without_its_arithmetic(monkeypatch):
    from absl import app

    from dialoguecse_tf import precision

    monkeypatch.setattr(precision, "cpu_bfloat16_flags", lambda: ("avx512_bf16",))
    assert common.precisions(["float32"]) == ("float32",)
    assert common.precisions(["bfloat16"]) == common.precisions(["bfloat16", "float32"]) == ("float32", "bfloat16")
    monkeypatch.setattr(precision, "cpu_bfloat16_flags", lambda: ())
    with pytest.raises(SystemExit) as refused:
        common.precisions(["float32", "bfloat16"])
    message = str(refused.value)
    assert message.startswith("error: precision bfloat16 needs a CPU with bfloat16 arithmetic") and "\n" not in message
    assert common.precisions(["float32"]) == ("float32",)
    with pytest.raises(app.UsageError, match=r"\['float16'\] is none of \('float32', 'bfloat16'\)"):
        common.precisions(["float16"])


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
    for name in ("DEFINE_string", "DEFINE_integer", "DEFINE_list"):
        define = getattr(flags, name)
        monkeypatch.setattr(common.flags, name,
                            lambda *args, _define=define, **kwargs: _define(*args, flag_values=values, **kwargs))
    common.define_flags(repeats=3, steps_per_repeat=2, hf_folder=True, precision=True)
    assert sorted(values) == ["hf_folder", "output_json", "precision", "repeats", "steps_per_repeat"]
    assert (values["repeats"].default, values["steps_per_repeat"].default, values["output_json"].default) == (3, 2, None)
    assert values["precision"].default == ["float32"]
    key_flags = {flag.name for flag in values.get_key_flags_for_module(__name__)}
    assert key_flags == {"hf_folder", "output_json", "precision", "repeats", "steps_per_repeat"}
