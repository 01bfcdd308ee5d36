"""One objective's TensorFlow training step under TensorFlow's speed settings, each in a fresh process.

The step is `objective_steps.py`'s (`objective_pairs.build_steps`: the English CPU preset on
MiniLM, a synthetic batch, dropout 0) in one padding regime; the variants are settings that must
be chosen before TensorFlow starts, hence one process each:

* `default`: TensorFlow's defaults (oneDNN kernels, inter- and intra-op threads = cores);
* `xla`: the step compiled by XLA (`--jit_compile`);
* `inter_op_1`: one inter-op thread, so independent ops do not share the cores;
* `onednn_off`: `TF_ENABLE_ONEDNN_OPTS=0`, Eigen's kernels instead of oneDNN's.

Each process runs one step (tracing) and then `--steps` timed steps; the results hold their
median and minimum.

  python -m benchmarks.step_variants --objective=dse --padding=padded
"""

import json
import os
import subprocess
import sys
import time

from absl import app, flags

from benchmarks import common

VARIANTS = ("default", "xla", "inter_op_1", "onednn_off")

flags.DEFINE_string("objective", "dse", "Objective (a key of objective_pairs.PRESETS).")
flags.DEFINE_enum("padding", "padded", ["buckets", "padded"], "Padding regime, as in objective_steps.py.")
flags.DEFINE_list("variants", list(VARIANTS), f"Variants to time, in this order: {VARIANTS}.")
flags.DEFINE_integer("steps", 6, "Timed steps per variant.")
flags.DEFINE_string("child", None, "Internal: time this variant in this process and print its JSON.")
common.define_flags(machine_note=True)

FLAGS = flags.FLAGS


def time_variant(variant: str) -> dict:
    import tensorflow as tf

    if variant == "inter_op_1":
        tf.config.threading.set_inter_op_parallelism_threads(1)
    from benchmarks import objective_pairs
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint

    _, config = objective_pairs.preset_objective(FLAGS.objective)
    buckets = config.num_length_buckets if FLAGS.padding == "buckets" else 1
    folder = common.default_hf_folder()
    loaded = load_checkpoint(folder, max_seq_length=config.max_seq_length)
    run = objective_pairs.build_steps(FLAGS.objective, folder, loaded, buckets, 0.0, 0,
                                      jit_compile=variant == "xla")["tf"]
    started = time.perf_counter()
    loss = run()
    first = time.perf_counter() - started
    seconds = []
    for _ in range(FLAGS.steps):
        started = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - started)
    return {"variant": variant, "first_step_s": round(first, 2), "first_step_loss": loss, **common.summarize(seconds)}


def main(argv):
    del argv
    if FLAGS.child:
        print("RESULT " + json.dumps(time_variant(FLAGS.child)), flush=True)
        return
    unknown = sorted(set(FLAGS.variants) - set(VARIANTS))
    if unknown:
        raise app.UsageError(f"--variants: unknown {unknown}; choose from {VARIANTS}")
    load_before = os.getloadavg()
    rows = []
    for variant in FLAGS.variants:
        env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0" if variant == "onednn_off" else "1")
        output = subprocess.run([sys.executable, "-m", "benchmarks.step_variants", f"--child={variant}",
                                 f"--objective={FLAGS.objective}", f"--padding={FLAGS.padding}",
                                 f"--steps={FLAGS.steps}"], env=env, check=True, capture_output=True, text=True,
                                cwd=common.REPO_ROOT).stdout
        rows.append(json.loads(next(line for line in output.splitlines() if line.startswith("RESULT "))[7:]))
        print(rows[-1], flush=True)
    common.print_table(f"{FLAGS.objective} ({FLAGS.padding}): TF step by variant", ["variant", "median s", "min s"],
                       [[row["variant"], row["median_s"], row["min_s"]] for row in rows])
    common.write_results(common.results_path(FLAGS.output_json, "step_variants"), {
        "benchmark": "step_variants",
        "objective": FLAGS.objective, "padding": FLAGS.padding, "steps": FLAGS.steps,
        "machine_note": FLAGS.machine_note,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "results": rows,
    })


if __name__ == "__main__":
    app.run(main)
