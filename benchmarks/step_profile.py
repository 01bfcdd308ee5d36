"""Where an objective's TensorFlow training step spends its time: TensorFlow's profiler, by op.

Builds the step `objective_steps.py` times (`objective_pairs.build_steps`: the objective's English
CPU preset on MiniLM, a synthetic batch, dropout 0), runs `--warmup_steps`, then traces
`--steps` steps with `tf.profiler.experimental` and reads the trace's framework op statistics
(the profiler's own `framework_op_stats` tool). Self-times are summed over the threads that ran
an op, so the shares are of the threads' busy time, not of the wall time; idle thread time is
left out.

For each objective and padding regime the results hold the share of each op type, and the ops
grouped by their place in the model with the layer index removed (the six layers' `query` weight
gradients are one row), each with its milliseconds per step.

  python -m benchmarks.step_profile --objectives=dse,dial2vec --padding=padded
"""

import collections
import glob
import json
import os
import re
import tempfile

from absl import app, flags

from benchmarks import common

PADDINGS = ("buckets", "padded")  # objective_pairs.PADDINGS, without importing TensorFlow for --help

flags.DEFINE_list("objectives", ["dse", "dial2vec"], "Objectives to profile (keys of objective_pairs.PRESETS).")
flags.DEFINE_list("padding", ["padded"], f"Padding regimes: {PADDINGS}.")
flags.DEFINE_integer("warmup_steps", 2, "Steps run before tracing (the first traces the graph).")
flags.DEFINE_integer("steps", 3, "Steps traced.")
flags.DEFINE_integer("top", 25, "Op groups kept per profile.")
common.define_flags(machine_note=True)

FLAGS = flags.FLAGS


def op_rows(xplane_path: str) -> list:
    """The profiler's framework op statistics of one trace, one dict per op."""
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

    data, ok = _pywrap_profiler_plugin.xspace_to_tools_data([xplane_path], "framework_op_stats", {})
    if not ok:
        raise RuntimeError(f"the profiler could not read {xplane_path}")
    table = json.loads(data)[0]
    columns = [column["id"] for column in table["cols"]]
    return [dict(zip(columns, [cell.get("v") if cell else None for cell in row["c"]])) for row in table["rows"]]


def summarize(rows: list, steps: int, top: int) -> dict:
    """Busy milliseconds per step by op type and by op group (layer index removed)."""
    busy = [row for row in rows if row["type"] != "IDLE"]
    total = sum(row["total_self_time"] for row in busy)
    by_type, by_group = collections.Counter(), collections.Counter()
    for row in busy:
        by_type[row["type"]] += row["total_self_time"]
        group = re.sub(r"transformer_layer_\d+(_\d+)?", "transformer_layer_N", row["operation"])
        by_group[(group, row["type"])] += row["total_self_time"]

    def entry(microseconds):
        return {"ms_per_step": round(microseconds / steps / 1e3, 1), "share": round(microseconds / total, 4)}

    return {"busy_thread_ms_per_step": round(total / steps / 1e3, 1),
            "by_type": {name: entry(value) for name, value in by_type.most_common()},
            "top_groups": [{"op": group, "type": kind, **entry(value)}
                           for (group, kind), value in by_group.most_common(top)]}


def profile(name: str, folder: str, loaded, regime: str) -> dict:
    import tensorflow as tf

    from benchmarks import objective_pairs

    _, config = objective_pairs.preset_objective(name)
    buckets = config.num_length_buckets if regime == "buckets" else 1
    run = objective_pairs.build_steps(name, folder, loaded, buckets, 0.0, 0)["tf"]
    for _ in range(FLAGS.warmup_steps):
        run()
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(FLAGS.steps):
            run()
        tf.profiler.experimental.stop()
        rows = op_rows(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[-1])
    return {"num_length_buckets": buckets, **summarize(rows, FLAGS.steps, FLAGS.top)}


def main(argv):
    del argv
    from benchmarks import objective_pairs
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint

    objective_pairs.check_choices(FLAGS.objectives, FLAGS.padding)
    folder = common.default_hf_folder()
    load_before = os.getloadavg()
    results = {}
    for name in FLAGS.objectives:
        _, config = objective_pairs.preset_objective(name)
        loaded = load_checkpoint(folder, max_seq_length=config.max_seq_length)
        regimes = ["padded"] if name == "dial2vec" else FLAGS.padding
        for regime in regimes:
            result = profile(name, folder, loaded, regime)
            results[f"{name} ({regime})"] = result
            common.print_table(f"{name} ({regime}): busy thread time per step by op type", ["op type", "ms", "share"], [
                [kind, value["ms_per_step"], f"{100 * value['share']:.1f} %"]
                for kind, value in list(result["by_type"].items())[:10]])
    common.write_results(common.results_path(FLAGS.output_json, "step_profile"), {
        "benchmark": "step_profile",
        "settings": {"warmup_steps": FLAGS.warmup_steps, "steps": FLAGS.steps, "dropout": 0.0, "batch": "synthetic"},
        "machine_note": FLAGS.machine_note,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "profiles": results,
    })


if __name__ == "__main__":
    app.run(main)
