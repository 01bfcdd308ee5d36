"""Benchmark 8: every objective's training step, TensorFlow vs its PyTorch peer, like for like.

Per objective, at its English CPU preset's shape on MiniLM (`objective_pairs.PRESETS`: batch,
lengths, turns, negatives, frozen layers, optimizer): the library's step, built as
`stage.run_stage` builds it, and `torch_peer`'s on the same weights, heads and synthetic batch
(`objective_pairs.build_steps`). Before any timing the two first-step losses, with dropout 0 on
both sides, must agree within `--max_loss_diff`; then the two steps run in turn, `--repeats`
times `--steps_per_repeat` steps, each side stepping on one fixed batch (no input pipeline).

Padding, the same on both sides, in one or both regimes (`--padding`):
* `buckets`: the preset's `num_length_buckets` (4), the training default: sequences sorted by
  length and encoded in that many groups, each cut to its longest; the peer buckets alike;
* `padded`: `num_length_buckets=1`, every sequence at max_seq_length on both sides.
dial2vec's model has no length buckets (its records hold the first max_seq_length tokens of a
dialogue, and most SGD dialogues are longer): its synthetic dialogues fill every position and it
runs `padded` only.

Dropout: 0 on both sides for the loss check and for timing, except SimCSE, whose augmentation is
dropout: its loss is checked at dropout 0 (the two views of a pair then identical) and it is timed
on a second pair of steps at the encoder's own rate (MiniLM's 0.1) on both sides.

`--markdown_from=FILE` prints the README table of a results file and runs nothing.
"""

import gc
import json
import os

from absl import app, flags

from benchmarks import common

PADDINGS = ("buckets", "padded")  # objective_pairs.PADDINGS, without importing TensorFlow for --help

flags.DEFINE_list("objectives", ["dialoguecse", "siamese_m", "dse", "dial2vec", "simcse"],
                  "Objectives to time (keys of objective_pairs.PRESETS).")
flags.DEFINE_list("padding", list(PADDINGS), f"Padding regimes, each the same on both sides: {PADDINGS}.")
common.define_flags(repeats=5, steps_per_repeat=3, hf_folder=True, machine_note=True)
flags.DEFINE_float("max_loss_diff", 1e-4, "Largest allowed difference between the first-step losses.")
flags.DEFINE_integer("random_seed", 0, "Seed of the synthetic batches.")
flags.DEFINE_string("markdown_from", None, "Print the README table of this results file and exit.")

FLAGS = flags.FLAGS


def sequences_per_step(name, batch: dict) -> int:
    """Sequences the encoder reads per step (a siamese context is one flattened sequence)."""
    from dialoguecse_tf.records.contrastive import CANDIDATE_INPUT_IDS, CONTEXT_INPUT_IDS

    if name.startswith("siamese"):
        return int(batch[CANDIDATE_INPUT_IDS].shape[0] * (1 + batch[CANDIDATE_INPUT_IDS].shape[1]))
    if CONTEXT_INPUT_IDS in batch:
        return int(sum(batch[key].shape[0] * batch[key].shape[1] for key in (CONTEXT_INPUT_IDS, CANDIDATE_INPUT_IDS)))
    first = next(iter(batch.values()))
    return int(first.shape[0] * first.shape[1])


def shape_of(name, config, objective, batch: dict) -> dict:
    masks = [value for key, value in batch.items() if key.endswith("_mask") and value.ndim == 3]
    real = sum(int(mask.sum()) for mask in masks)
    count = sum(mask.shape[0] * mask.shape[1] for mask in masks)
    options = {key: value for key, value in vars(objective.options).items()
               if key in ("num_context_turns", "num_negatives", "num_frozen_layers", "variant", "aggregation",
                          "temperature", "contrast_type", "pooler", "window")}
    return {"train_batch_size": config.train_batch_size, "max_seq_length": config.max_seq_length,
            "sequences_per_step": sequences_per_step(name, batch), "mean_tokens_per_sequence": real / count,
            "learning_rate": config.learning_rate, **options}


def time_objective(name, folder, regimes) -> dict:
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint

    from benchmarks import objective_pairs

    _, config = objective_pairs.preset_objective(name)
    loaded = load_checkpoint(folder, max_seq_length=config.max_seq_length)
    result = {"preset": objective_pairs.PRESETS[name]}
    for regime in regimes:
        buckets = config.num_length_buckets if regime == "buckets" else 1
        steps = objective_pairs.build_steps(name, folder, loaded, buckets, 0.0, FLAGS.random_seed)
        losses = {"tf": steps["tf"](), "torch": steps["torch"]()}  # also the warm-up (tracing)
        diff = abs(losses["tf"] - losses["torch"])
        print(f"{name} ({regime}): first-step losses {losses} (diff {diff:.2e})")
        if diff > FLAGS.max_loss_diff:
            raise SystemExit(f"error: {name} ({regime}): TF and PyTorch disagree on the first loss (diff {diff:.2e} > "
                             f"--max_loss_diff={FLAGS.max_loss_diff}); not timing")
        result.setdefault("shape", shape_of(name, config, steps["objective"], steps["batch"]))
        dropout = 0.0
        if name == "simcse":
            dropout = loaded.config.hidden_dropout_prob
            del steps
            gc.collect()
            steps = objective_pairs.build_steps(name, folder, loaded, buckets, dropout, FLAGS.random_seed)
            steps["tf"](), steps["torch"]()

        def repeat(run):
            return lambda: [run() for _ in range(FLAGS.steps_per_repeat)]

        times = common.time_alternating({side: repeat(steps[side]) for side in ("tf", "torch")}, FLAGS.repeats,
                                        warmup=0)
        summary = {side: common.summarize([s / FLAGS.steps_per_repeat for s in seconds])
                   for side, seconds in times.items()}
        result[regime] = {"num_length_buckets": buckets, "timed_dropout": dropout, "first_step_losses": losses,
                          "first_step_loss_diff": diff, **summary,
                          "ratio_tf_over_torch": summary["torch"]["median_s"] / summary["tf"]["median_s"]}
        del steps
        gc.collect()
    return result


REGIME_TITLES = {"buckets": "length buckets (4) on both", "padded": "padded to max_seq_length on both"}


def markdown_table(results: dict) -> str:
    """The README table: one row per objective and padding regime."""
    lines = ["| objective (preset) | shape | padding | dropout timed | first-step losses TF / PyTorch | "
             "TF s/step | PyTorch s/step | TF speed over PyTorch |", "|---|---|---|--:|---|--:|--:|--:|"]
    for name, result in results["objectives"].items():
        shape = result["shape"]
        described = (f"batch {shape['train_batch_size']}, {shape['sequences_per_step']} sequences of <= "
                     f"{shape['max_seq_length']} (mean {shape['mean_tokens_per_sequence']:.1f})")
        for regime in PADDINGS:
            if regime not in result:
                continue
            row = result[regime]
            losses = row["first_step_losses"]
            lines.append(f"| {name} (`{result['preset']}`) | {described} | {REGIME_TITLES[regime]} | "
                         f"{row['timed_dropout']:g} | {losses['tf']:.6f} / {losses['torch']:.6f} | "
                         f"{row['tf']['median_s']:.3f} | {row['torch']['median_s']:.3f} | "
                         f"**{row['ratio_tf_over_torch']:.2f}x** |")
    return "\n".join(lines)


def main(argv):
    del argv
    if FLAGS.markdown_from:
        with open(FLAGS.markdown_from, encoding="utf-8") as reader:
            print(markdown_table(json.load(reader)))
        return
    from benchmarks import objective_pairs

    objective_pairs.check_choices(FLAGS.objectives, FLAGS.padding)
    folder = FLAGS.hf_folder or common.default_hf_folder()
    load_before = os.getloadavg()
    results = {}
    for name in FLAGS.objectives:
        # dial2vec's model encodes whole padded dialogues; it has no length buckets.
        regimes = ["padded"] if name == "dial2vec" else [r for r in PADDINGS if r in FLAGS.padding]
        results[name] = time_objective(name, folder, regimes)
    rows = [[name, regime, result[regime]["tf"]["median_s"], result[regime]["torch"]["median_s"],
             f"{result[regime]['ratio_tf_over_torch']:.2f}x"]
            for name, result in results.items() for regime in PADDINGS if regime in result]
    common.print_table(f"Training step, TF vs PyTorch peer: median of {FLAGS.repeats} x {FLAGS.steps_per_repeat}",
                       ["objective", "padding", "TF s/step", "torch s/step", "TF speed over torch"], rows)
    payload = {
        "benchmark": "objective_steps",
        "settings": {"hf_folder": folder, "batch": "synthetic", "random_seed": FLAGS.random_seed,
                     "steps_per_repeat": FLAGS.steps_per_repeat, "repeats": FLAGS.repeats,
                     "max_loss_diff": FLAGS.max_loss_diff},
        "ratio": "ratio_tf_over_torch = PyTorch median s/step over TF's (> 1: TF faster)",
        "machine_note": FLAGS.machine_note,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "objectives": results,
        "peak_rss_mib": common.peak_rss_mib(),
    }
    common.write_results(common.results_path(FLAGS.output_json, "objective_steps"), payload)
    print("\n" + markdown_table(payload))


if __name__ == "__main__":
    app.run(main)
