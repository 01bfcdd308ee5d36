"""Benchmark 3: time per contrastive training step as turns, negatives and length grow.

Each setting runs `objective_steps.py --mode=train_step` in a fresh process (so its peak memory is its own) and
varies one of `num_context_turns` (1..5), `num_negatives` (1, 4, 9, 19) and
`max_seq_length` (32, 64, 128) from the paper's setting (3 turns, 9 negatives, L=50).
A step encodes B * (T + K) distinct sequences (T context turns, K = negatives + 1
candidates); the table fits step time = a + b * sequences over the turns and negatives
settings and reports how well a straight line explains it, and the cost per token for
the length settings.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from absl import app, flags

from benchmarks import common

flags.DEFINE_list("num_context_turns", ["1", "2", "3", "4", "5"], "Turn counts to time.")
flags.DEFINE_list("num_negatives", ["1", "4", "9", "19"], "Negative counts to time.")
flags.DEFINE_list("max_seq_length", ["32", "64", "128"], "Sequence lengths to time.")
flags.DEFINE_string("framework", "tf", "Which framework of objective_steps.py --mode=train_step to time (tf, tf_xla "
                    "or torch).")
common.define_flags(repeats=3, steps_per_repeat=2, hf_folder=True)

FLAGS = flags.FLAGS
BASE = {"num_context_turns": 3, "num_negatives": 9, "max_seq_length": 50}


def run_setting(setting: dict) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        output = os.path.join(scratch, "step.json")
        command = [sys.executable, "-m", "benchmarks.objective_steps", "--mode=train_step",
                   f"--frameworks={FLAGS.framework}", f"--repeats={FLAGS.repeats}",
                   f"--steps_per_repeat={FLAGS.steps_per_repeat}", f"--output_json={output}",
                   *(f"--{name}={value}" for name, value in setting.items())]
        if FLAGS.hf_folder:
            command.append(f"--hf_folder={FLAGS.hf_folder}")
        finished = subprocess.run(command, capture_output=True, text=True, cwd=common.REPO_ROOT)
        if finished.returncode != 0:
            raise SystemExit(f"error: {setting} failed: {finished.stderr.strip().splitlines()[-1:]}")
        with open(output, encoding="utf-8") as reader:
            result = json.load(reader)
    timing = result["results"][FLAGS.framework]
    settings = result["settings"]
    row = {**setting, "sequences_per_step": settings["sequences_per_step"],
           "tokens_per_step": settings["tokens_per_step"], "step_s": timing["median_s"],
           "sequences_per_s": timing["sequences_per_s"], "peak_rss_mib": result["peak_rss_mib"],
           "rss_before_first_step_mib": result["rss_before_first_step_mib"]}
    print(f"{setting}: {row['step_s']:.3f} s/step, peak RSS {row['peak_rss_mib']:.0f} MiB", flush=True)
    return row


def linear_fit(x, y) -> dict:
    x, y = np.asarray(x, float), np.asarray(y, float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    r_squared = 1.0 - float(residual @ residual) / float(((y - y.mean()) ** 2).sum())
    return {"seconds_per_unit": float(slope), "intercept_s": float(intercept), "r_squared": r_squared}


def main(argv):
    del argv
    sweeps = {name: [int(v) for v in getattr(FLAGS, name)] for name in BASE}
    rows = {}
    for name, values in sweeps.items():
        for value in values:
            setting = {**BASE, name: value}
            key = tuple(sorted(setting.items()))
            if key not in rows:
                rows[key] = run_setting(setting)

    def sweep_rows(name):
        return [rows[tuple(sorted({**BASE, name: v}.items()))] for v in sweeps[name]]

    at_base_length = sweep_rows("num_context_turns") + sweep_rows("num_negatives")
    fits = {
        "step_s_vs_sequences (turns and negatives, L=50)": linear_fit(
            [r["sequences_per_step"] for r in at_base_length], [r["step_s"] for r in at_base_length]),
        "step_s_vs_tokens (length sweep)": linear_fit(
            [r["tokens_per_step"] for r in sweep_rows("max_seq_length")],
            [r["step_s"] for r in sweep_rows("max_seq_length")]),
    }
    for name in sweeps:
        common.print_table(
            f"Step time vs {name} ({FLAGS.framework}; others at {BASE})",
            [name, "sequences", "tokens", "s/step", "ms/sequence", "peak RSS MiB", "RSS before MiB"],
            [[r[name], r["sequences_per_step"], r["tokens_per_step"], r["step_s"],
              1000 * r["step_s"] / r["sequences_per_step"], r["peak_rss_mib"], r["rss_before_first_step_mib"]]
             for r in sweep_rows(name)],
        )
    common.print_table("Linear fits", ["fit", "s per unit", "intercept s", "R^2"],
                       [[name, f["seconds_per_unit"], f["intercept_s"], f"{f['r_squared']:.4f}"]
                        for name, f in fits.items()])
    common.write_results(common.results_path(FLAGS.output_json, "scaling"), {
        "benchmark": "scaling",
        "settings": {"framework": FLAGS.framework, "base": BASE, "sweeps": sweeps,
                     "repeats": FLAGS.repeats, "steps_per_repeat": FLAGS.steps_per_repeat},
        "sweeps": {name: sweep_rows(name) for name in sweeps},
        "fits": fits,
    })


if __name__ == "__main__":
    app.run(main)
