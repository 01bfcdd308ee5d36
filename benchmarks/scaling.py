"""Benchmarks 3 and 7: time and peak memory of a training step as its sizes grow, one fresh process
per setting (so its peak memory is its own).

`--objective=dialoguecse` (benchmark 3, the default, benchmarks/results/scaling.json): each setting
runs `objective_steps.py --mode=train_step` and varies one of `num_context_turns` (1..5),
`num_negatives` (1, 4, 9, 19) and `max_seq_length` (32, 64, 128) from the paper's setting (3 turns,
9 negatives, L=50). A step encodes B * (T + K) distinct sequences (T context turns, K = negatives + 1
candidates); the table fits step time = a + b * sequences over the turns and negatives settings and
reports how well a straight line explains it, and the cost per token for the length settings.

`--objective=dial2vec` (benchmark 7, benchmarks/results/dial2vec_step.json): the library's own step
(`training.loop.build_train_step` around the `dial2vec` objective's model and loss) at the CPU
preset `cpu_dial2vec` (experiments/dial2vec_sgd_minilm.yaml): MiniLM, batch 4 dialogues with 4
negatives each (20 sequences), window 10, the bottom 3 of 6 layers frozen, at each of `--lengths`
on synthetic dialogues that fill the length (turns of 8-24 tokens, roles alternating). dial2vec's
sequences are whole dialogues, an order of magnitude longer than DialogueCSE's utterances, and its
correlation matrix is L x L per sequence.
"""

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from absl import app, flags

from benchmarks import common

flags.DEFINE_enum("objective", "dialoguecse", ["dialoguecse", "dial2vec"],
                  "Whose step to time: DialogueCSE's over turns, negatives and lengths, or dial2vec's over --lengths.")
flags.DEFINE_list("num_context_turns", ["1", "2", "3", "4", "5"], "--objective=dialoguecse: turn counts to time.")
flags.DEFINE_list("num_negatives", ["1", "4", "9", "19"], "--objective=dialoguecse: negative counts to time.")
flags.DEFINE_list("max_seq_length", ["32", "64", "128"], "--objective=dialoguecse: sequence lengths to time.")
flags.DEFINE_string("framework", "tf", "--objective=dialoguecse: which framework of objective_steps.py "
                    "--mode=train_step to time (tf, tf_xla or torch).")
common.define_flags(repeats=3, steps_per_repeat=2, hf_folder=True)

flags.DEFINE_list("lengths", ["128", "192", "256", "512"], "--objective=dial2vec: dialogue lengths (tokens) to time.")
flags.DEFINE_integer("single_length", None, "Internal (--objective=dial2vec): time this one length in this process.")
flags.DEFINE_integer("train_batch_size", 4, "--objective=dial2vec: dialogues per step.")
flags.DEFINE_integer("dial2vec_negatives", 4, "--objective=dial2vec: negatives per dialogue.")
flags.DEFINE_integer("num_frozen_layers", 3, "--objective=dial2vec: bottom layers kept fixed.")
flags.DEFINE_integer("random_seed", 0, "--objective=dial2vec: seed of the synthetic dialogues.")

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


def run_dialoguecse() -> None:
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


def synthetic_batch(batch_size, samples, length, seed):
    import numpy as np

    from dialoguecse_tf.records.dialogues import (DIALOGUE_INPUT_IDS, DIALOGUE_INPUT_MASK, DIALOGUE_ROLE_IDS,
                                                  DIALOGUE_TURN_IDS)

    rng = np.random.default_rng(seed)
    shape = (batch_size, samples, length)
    ids, roles, turns = (np.zeros(shape, np.int32) for _ in range(3))
    for index in np.ndindex(batch_size, samples):
        position, turn = 1, 0
        ids[index][0] = 2
        while position < length:
            size = min(int(rng.integers(8, 25)), length - position)
            ids[index][position:position + size] = rng.integers(1000, 20000, size=size)
            roles[index][position:position + size] = turn % 2
            turns[index][position:position + size] = turn
            position += size
            turn += 1
    return {DIALOGUE_INPUT_IDS: ids, DIALOGUE_INPUT_MASK: np.ones(shape, np.int32),
            DIALOGUE_ROLE_IDS: roles, DIALOGUE_TURN_IDS: turns}


def time_dial2vec_length(length):
    import tensorflow as tf

    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint
    from dialoguecse_tf.stage import TrainConfig, configure
    from dialoguecse_tf.training.loop import build_train_step
    from dialoguecse_tf.training.strategy import create_strategy

    loaded = load_checkpoint(FLAGS.hf_folder or common.default_hf_folder(), max_seq_length=length)
    objective, _ = configure("dial2vec", num_negatives=FLAGS.dial2vec_negatives,
                             num_frozen_layers=FLAGS.num_frozen_layers)
    strategy = create_strategy("one_device")
    with strategy.scope():
        backbone = build_backbone(loaded.config)
        model = objective.build_model(backbone, loaded.config, loaded.tokenizer, 1)
        backbone.set_weights(loaded.backbone.get_weights())
        optimizer = objective.create_optimizer(TrainConfig(learning_rate=2e-5), 10**6, model)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64)

    def step_fn(model, batch, training_):
        return objective.compute_loss(model, batch, training_, FLAGS.train_batch_size)

    batch = synthetic_batch(FLAGS.train_batch_size, FLAGS.dial2vec_negatives + 1, length, FLAGS.random_seed)
    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch).repeat()))
    train_step = build_train_step(strategy, model, optimizer, step_fn, step)
    rss_before = common.peak_rss_mib()
    first_loss = float(train_step(iterator)[0])
    times = common.time_alternating({"step": lambda: [train_step(iterator) for _ in range(FLAGS.steps_per_repeat)]},
                                    FLAGS.repeats, warmup=0)["step"]
    summary = common.summarize([t / FLAGS.steps_per_repeat for t in times])
    sequences = FLAGS.train_batch_size * (FLAGS.dial2vec_negatives + 1)
    return {"max_seq_length": length, "sequences_per_step": sequences, "tokens_per_step": sequences * length,
            "step_s": summary["median_s"], "min_s": summary["min_s"], "max_s": summary["max_s"],
            "dialogues_per_s": FLAGS.train_batch_size / summary["median_s"], "first_loss": first_loss,
            "rss_before_first_step_mib": rss_before, "peak_rss_mib": common.peak_rss_mib()}


def run_dial2vec() -> None:
    folder = FLAGS.hf_folder or common.default_hf_folder()
    rows = []
    for length in map(int, FLAGS.lengths):
        finished = subprocess.run([sys.executable, "-m", "benchmarks.scaling", "--objective=dial2vec",
                                   f"--single_length={length}", f"--hf_folder={folder}",
                                   f"--train_batch_size={FLAGS.train_batch_size}",
                                   f"--dial2vec_negatives={FLAGS.dial2vec_negatives}",
                                   f"--num_frozen_layers={FLAGS.num_frozen_layers}",
                                   f"--steps_per_repeat={FLAGS.steps_per_repeat}", f"--repeats={FLAGS.repeats}"],
                                  capture_output=True, text=True, cwd=common.REPO_ROOT)
        if finished.returncode != 0:
            raise SystemExit(f"error: length {length} failed: {finished.stderr.strip().splitlines()[-1:]}")
        row = json.loads(finished.stdout.strip().splitlines()[-1])
        print(f"L={length}: {row['step_s']:.2f} s/step, peak RSS {row['peak_rss_mib']:.0f} MiB", flush=True)
        rows.append(row)
    common.print_table(
        f"dial2vec training step: {FLAGS.train_batch_size} dialogues x {FLAGS.dial2vec_negatives + 1} sequences, "
        f"median of {FLAGS.repeats} x {FLAGS.steps_per_repeat}",
        ["L", "s/step", "dialogues/s", "peak RSS MiB"],
        [[row["max_seq_length"], row["step_s"], row["dialogues_per_s"], row["peak_rss_mib"]] for row in rows])
    common.write_results(common.results_path(FLAGS.output_json, "dial2vec_step"), {
        "benchmark": "dial2vec_step",
        "settings": {"hf_folder": folder, "train_batch_size": FLAGS.train_batch_size,
                     "num_negatives": FLAGS.dial2vec_negatives, "num_frozen_layers": FLAGS.num_frozen_layers,
                     "window": 10, "steps_per_repeat": FLAGS.steps_per_repeat, "repeats": FLAGS.repeats},
        "results": rows,
    })


def main(argv):
    del argv
    if FLAGS.single_length:
        print(json.dumps(time_dial2vec_length(FLAGS.single_length)))
        return
    {"dialoguecse": run_dialoguecse, "dial2vec": run_dial2vec}[FLAGS.objective]()


if __name__ == "__main__":
    app.run(main)
