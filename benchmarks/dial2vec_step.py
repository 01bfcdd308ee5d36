"""Benchmark 7: dial2vec training step time and memory on CPU, as the dialogue length grows.

The step is the library's own (`training.loop.build_train_step` around the `dial2vec` objective's
model and loss) at the CPU preset `cpu_dial2vec` (experiments/dial2vec_sgd_minilm.yaml):
MiniLM, batch 4 dialogues with 4 negatives each (20 sequences), window 10, the bottom 3 of 6
layers frozen. Each length in `--lengths` runs in a fresh process (its peak memory is its own)
on synthetic dialogues that fill the length (turns of 8-24 tokens, roles alternating).
dial2vec's sequences are whole dialogues, an order of magnitude longer than DialogueCSE's
utterances, and its correlation matrix is L x L per sequence.
"""

import json
import subprocess
import sys

from absl import app, flags

from benchmarks import common

flags.DEFINE_list("lengths", ["128", "192", "256", "512"], "Dialogue lengths (tokens) to time.")
flags.DEFINE_integer("single_length", None, "Internal: time this one length in this process.")
flags.DEFINE_integer("train_batch_size", 4, "Dialogues per step.")
flags.DEFINE_integer("num_negatives", 4, "Negatives per dialogue.")
flags.DEFINE_integer("num_frozen_layers", 3, "Bottom layers kept fixed.")
common.define_flags(repeats=3, steps_per_repeat=2)
flags.DEFINE_integer("random_seed", 0, "Seed of the synthetic dialogues.")

FLAGS = flags.FLAGS


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


def time_one_length(length):
    import tensorflow as tf

    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint
    from dialoguecse_tf.stage import TrainConfig, configure
    from dialoguecse_tf.training.loop import build_train_step
    from dialoguecse_tf.training.strategy import create_strategy

    loaded = load_checkpoint(common.default_hf_folder(), max_seq_length=length)
    objective, _ = configure("dial2vec", num_negatives=FLAGS.num_negatives, num_frozen_layers=FLAGS.num_frozen_layers)
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

    batch = synthetic_batch(FLAGS.train_batch_size, FLAGS.num_negatives + 1, length, FLAGS.random_seed)
    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch).repeat()))
    train_step = build_train_step(strategy, model, optimizer, step_fn, step)
    rss_before = common.peak_rss_mib()
    first_loss = float(train_step(iterator)[0])
    times = common.time_alternating({"step": lambda: [train_step(iterator) for _ in range(FLAGS.steps_per_repeat)]},
                                    FLAGS.repeats, warmup=0)["step"]
    summary = common.summarize([t / FLAGS.steps_per_repeat for t in times])
    sequences = FLAGS.train_batch_size * (FLAGS.num_negatives + 1)
    return {"max_seq_length": length, "sequences_per_step": sequences, "tokens_per_step": sequences * length,
            "step_s": summary["median_s"], "min_s": summary["min_s"], "max_s": summary["max_s"],
            "dialogues_per_s": FLAGS.train_batch_size / summary["median_s"], "first_loss": first_loss,
            "rss_before_first_step_mib": rss_before, "peak_rss_mib": common.peak_rss_mib()}


def main(argv):
    del argv
    if FLAGS.single_length:
        print(json.dumps(time_one_length(FLAGS.single_length)))
        return
    rows = []
    for length in map(int, FLAGS.lengths):
        finished = subprocess.run([sys.executable, "-m", "benchmarks.dial2vec_step", f"--single_length={length}",
                                   f"--train_batch_size={FLAGS.train_batch_size}",
                                   f"--num_negatives={FLAGS.num_negatives}",
                                   f"--num_frozen_layers={FLAGS.num_frozen_layers}",
                                   f"--steps_per_repeat={FLAGS.steps_per_repeat}", f"--repeats={FLAGS.repeats}"],
                                  capture_output=True, text=True, cwd=common.REPO_ROOT)
        if finished.returncode != 0:
            raise SystemExit(f"error: length {length} failed: {finished.stderr.strip().splitlines()[-1:]}")
        row = json.loads(finished.stdout.strip().splitlines()[-1])
        print(f"L={length}: {row['step_s']:.2f} s/step, peak RSS {row['peak_rss_mib']:.0f} MiB", flush=True)
        rows.append(row)
    common.print_table(
        f"dial2vec training step: {FLAGS.train_batch_size} dialogues x {FLAGS.num_negatives + 1} sequences, "
        f"median of {FLAGS.repeats} x {FLAGS.steps_per_repeat}",
        ["L", "s/step", "dialogues/s", "peak RSS MiB"],
        [[row["max_seq_length"], row["step_s"], row["dialogues_per_s"], row["peak_rss_mib"]] for row in rows])
    common.write_results(common.results_path(FLAGS.output_json, "dial2vec_step"), {
        "benchmark": "dial2vec_step",
        "settings": {"hf_folder": common.default_hf_folder(), "train_batch_size": FLAGS.train_batch_size,
                     "num_negatives": FLAGS.num_negatives, "num_frozen_layers": FLAGS.num_frozen_layers,
                     "window": 10, "steps_per_repeat": FLAGS.steps_per_repeat, "repeats": FLAGS.repeats},
        "results": rows,
    })


if __name__ == "__main__":
    app.run(main)
