"""benchmarks/common.py: the helpers the speed benchmarks share."""
import importlib.util
import os

from conftest import REPO_ROOT

_SPEC = importlib.util.spec_from_file_location("benchmark_common", REPO_ROOT / "benchmarks" / "common.py")
common = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(common)


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
