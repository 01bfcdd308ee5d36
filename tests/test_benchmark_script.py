"""run_scripts/benchmark_all.sh: a mistyped track stops the script before any work, and
TRACKS=none only merges the parts present (the step that joins parts run on different days)."""

import json
import os
import shutil
import subprocess

from conftest import REPO_ROOT

SCRIPT = str(REPO_ROOT / "run_scripts" / "benchmark_all.sh")
PART = REPO_ROOT / "results" / "benchmark" / "parts" / "zh-dial2vec" / "results.json"


def _run(tmp_path, **env):
    env = {**os.environ, "RUN_DIR": str(tmp_path / "run"), "RESULTS_DIR": str(tmp_path / "results"), **env}
    return subprocess.run(["bash", SCRIPT], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_unknown_track_is_refused_before_any_stage(tmp_path):
    done = _run(tmp_path, TRACKS="eng")
    assert done.returncode == 2
    assert "unknown track eng" in done.stderr
    assert not (tmp_path / "run").exists()


def test_tracks_none_merges_the_parts_present_without_training(tmp_path):
    part = tmp_path / "results" / "parts" / "zh-dial2vec"
    part.mkdir(parents=True)
    shutil.copy(PART, part / "results.json")
    done = _run(tmp_path, TRACKS="none")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not (tmp_path / "run" / "zh").exists() and not (tmp_path / "run" / "en").exists()
    merged = json.loads((tmp_path / "results" / "results.json").read_text())
    assert [row["model"] for row in merged["rows"]] == ["dial2vec"]
    assert "over the parts zh-dial2vec" in (tmp_path / "results" / "command.txt").read_text()
    assert (tmp_path / "results" / "results.png").stat().st_size > 0
