"""run_scripts/benchmark_all.sh: a mistyped track stops the script before any work,
TRACKS=none only merges the parts present (the step that joins parts run on different days), and
the --preset=paper flag sets, which no CPU machine runs, parse into the papers' configurations."""

import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import REPO_ROOT
from test_train_flags import _parse

SCRIPT = str(REPO_ROOT / "run_scripts" / "benchmark_all.sh")
PART = REPO_ROOT / "results" / "benchmark" / "parts" / "zh-dial2vec" / "results.json"


def _run(tmp_path, *args, **env):
    env = {**os.environ, "RUN_DIR": str(tmp_path / "run"), "RESULTS_DIR": str(tmp_path / "results"), **env}
    return subprocess.run(["bash", SCRIPT, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_unknown_track_is_refused_before_any_stage(tmp_path):
    done = _run(tmp_path, TRACKS="eng")
    assert done.returncode == 2
    assert "unknown track eng" in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
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


@pytest.mark.slow
def test_paper_preset_refuses_the_chinese_track_without_a_chinese_bert(tmp_path):
    done = _run(tmp_path, "--preset=paper", TRACKS="zh", ZH_INIT_CHECKPOINT="")
    assert done.returncode == 2
    assert "--preset=paper needs ZH_INIT_CHECKPOINT" in done.stderr
    assert not (tmp_path / "run" / "zh" / "mlm_records").exists()


def _paper_flag_sets():
    """(track, array name, flags) of every training flag array in the script's paper branches."""
    text = open(SCRIPT, encoding="utf-8").read()
    sets = re.findall(r"^\s*(MLM_FLAGS|DCSE|DCSE_RELEASE|SIAMESE|PAIRS|SIMCSE|DIAL2VEC)=\((--preset=paper[^)]*)\)",
                      text, re.M)
    tracks = ["zh"] * 7 + ["en"] * 7
    assert len(sets) == len(tracks), "expected the seven paper arrays of each track, zh first"
    return [(track, name, shlex.split(re.sub(r"\$\{[^}]+\}", "placeholder", flags)))
            for track, (name, flags) in zip(tracks, sets)]


# The objective and the settings each paper array must reach, as the papers give them; MiniLM
# (English track) has 6 layers, so the papers' 6 frozen layers of 12 become 3.
_EXPECTED = {
    "MLM_FLAGS": ("mlm", {}),
    "DCSE": ("dialoguecse", {"temperature": 0.1, "num_negatives": 9, "aggregation": "mean"}),
    "DCSE_RELEASE": ("dialoguecse", {"variant": "released", "temperature": 0.1, "num_negatives": 9,
                                     "aggregation": "attention"}),
    "SIMCSE": ("simcse", {"temperature": 0.05, "pooler": "cls", "mlp_only_train": True}),
    "SIAMESE": ("siamese_m", {"num_negatives": 9}),
    "PAIRS": ("dse", {"temperature": 0.05}),
    "DIAL2VEC": ("dial2vec", {"temperature": 0.2, "window": 10}),
}
_FROZEN = {("zh", "DCSE"): 6, ("zh", "DCSE_RELEASE"): 6, ("zh", "SIAMESE"): 6, ("zh", "DIAL2VEC"): 6,
           ("en", "DCSE"): 3, ("en", "DCSE_RELEASE"): 3, ("en", "SIAMESE"): 3, ("en", "DIAL2VEC"): 3}


@pytest.mark.parametrize("track,name,flags", _paper_flag_sets(), ids=lambda value: str(value)[:12])
def test_paper_preset_flag_sets_parse_into_the_papers_settings(track, name, flags):
    if name == "PAIRS":
        flags = flags + ["--contrast_type=HardNeg"]
    objective, config = _parse(*flags)
    expected_objective, options = _EXPECTED[name]
    assert objective.name == expected_objective
    for option, value in options.items():
        assert getattr(objective.options, option) == value, option
    if (track, name) in _FROZEN:
        assert objective.options.num_frozen_layers == _FROZEN[(track, name)]
    if name == "PAIRS":
        assert config.resolved(objective).train_batch_size == 1024
