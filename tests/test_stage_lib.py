"""run_scripts/stage_lib.sh: a stage runs once, a rerun reuses it and still reports its seconds."""

import os
import subprocess

_LIB = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "run_scripts", "stage_lib.sh")


def _run_stages(run_dir, script):
  return subprocess.run(
      ["bash", "-c", f'set -euo pipefail; source "{_LIB}"; timings="{run_dir}/stage_seconds.tsv"; '
       f': > "$timings"; {script}'],
      check=True, capture_output=True, text=True)


def test_rerun_reuses_finished_stage_and_repeats_its_seconds(tmp_path):
  make_out = f'stage make "{tmp_path}/out" bash -c "sleep 1; echo ran >> {tmp_path}/calls; touch {tmp_path}/out"'
  _run_stages(tmp_path, make_out)
  first = (tmp_path / "stage_seconds.tsv").read_text().split("\t")
  assert first[0] == "make" and int(first[1]) >= 1

  second = _run_stages(tmp_path, make_out)
  assert "reusing" in second.stdout
  assert (tmp_path / "calls").read_text() == "ran\n"
  assert (tmp_path / "stage_seconds.tsv").read_text() == f"make\t{int(first[1])} (reused)\n"


def test_stage_without_its_marker_runs_again(tmp_path):
  # The output exists but no marker: the stage died after writing part of it.
  (tmp_path / "out").write_text("partial")
  _run_stages(tmp_path, f'stage make "{tmp_path}/out" bash -c "echo ran >> {tmp_path}/calls"')
  assert (tmp_path / "calls").read_text() == "ran\n"
