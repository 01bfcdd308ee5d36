"""Benchmark 5: batches/s of the contrastive stage's input pipeline, parallel vs sequential.

The pipeline `stage.run_stage` builds for a contrastive objective (read and parse the records,
shuffle, batch, then the objective's `prepare_batch`: select turns and negatives), timed with
and without parallel reading/parsing and prefetching, and set against the rate the training
step consumes batches (from the JSON of objective_steps.py --mode=train_step if given), to show whether input ever holds
training back.
"""

import json
import os

from absl import app, flags

from benchmarks import common

flags.DEFINE_string("train_file", None, "Contrastive TFRecords (glob).")
flags.DEFINE_string("objective", "dialoguecse", "Contrastive objective whose batch preparation is timed.")
flags.DEFINE_integer("train_batch_size", 20, "Examples per batch.")
flags.DEFINE_integer("num_context_turns", 3, "Context turns kept.")
flags.DEFINE_integer("num_negatives", 9, "Negatives kept.")
flags.DEFINE_integer("num_batches", 300, "Batches drawn per timed pass.")
common.define_flags(repeats=3)
flags.DEFINE_string("train_step_json", None, "Results of objective_steps.py --mode=train_step, for the step's "
                    "consumption rate.")
flags.mark_flag_as_required("train_file")

FLAGS = flags.FLAGS


def main(argv):
    del argv
    from dialoguecse_tf.records.reader import read_dataset, resolve_records
    from dialoguecse_tf.stage import configure
    from dialoguecse_tf.training.strategy import make_dataset

    objective, _ = configure(FLAGS.objective, num_context_turns=FLAGS.num_context_turns,
                             num_negatives=FLAGS.num_negatives)
    files, spec, _ = resolve_records([FLAGS.train_file], objective.record_type)
    objective.check_records(spec, os.path.dirname(files[0]))

    def pipeline(parallel):
        dataset = read_dataset(files, spec, shuffle_files=True, seed=1, parallel=parallel)
        batches = make_dataset(dataset, FLAGS.train_batch_size, seed=1, prefetch=parallel)
        return batches.map(objective.prepare_batch)

    def drain(parallel):
        # One long-lived iterator: the warm-up pass fills the shuffle buffer, the timed
        # passes see the steady state training sees.
        iterator = iter(pipeline(parallel))

        def run():
            for _ in range(FLAGS.num_batches):
                next(iterator)
        return run

    times = common.time_alternating({"parallel + prefetch": drain(True), "sequential": drain(False)},
                                    FLAGS.repeats, warmup=1)
    results = {}
    for name, seconds in times.items():
        summary = common.summarize(seconds)
        summary["batches_per_s"] = FLAGS.num_batches / summary["median_s"]
        results[name] = summary
    consumption = None
    if FLAGS.train_step_json:
        with open(FLAGS.train_step_json, encoding="utf-8") as reader:
            steps = json.load(reader)["results"]
        consumption = {name: 1.0 / r["median_s"] for name, r in steps.items() if name.startswith("tf")}
    rows = [[name, r["batches_per_s"], r["median_s"]] for name, r in results.items()]
    rows += [[f"training step ({name}) consumes", rate, "-"] for name, rate in (consumption or {}).items()]
    common.print_table(f"Input pipeline: {FLAGS.num_batches} batches of {FLAGS.train_batch_size}, "
                       f"median of {FLAGS.repeats}", ["setting", "batches/s", "s per pass"], rows)
    common.write_results(common.results_path(FLAGS.output_json, "input_pipeline"), {
        "benchmark": "input_pipeline",
        "settings": {"train_file": FLAGS.train_file, "objective": FLAGS.objective,
                     "train_batch_size": FLAGS.train_batch_size,
                     "num_context_turns": FLAGS.num_context_turns, "num_negatives": FLAGS.num_negatives,
                     "num_batches": FLAGS.num_batches, "repeats": FLAGS.repeats},
        "results": results,
        "training_consumes_batches_per_s": consumption,
    })


if __name__ == "__main__":
    app.run(main)
