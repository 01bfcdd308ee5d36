"""Benchmark 8 and its companions: the training steps of the objectives, timed, profiled and varied.

`--mode` picks the measurement; each writes benchmarks/results/<mode>.json by default:

* `objective_steps` (the default): every objective's training step, TensorFlow vs its PyTorch peer,
  like for like. Per objective, at its English CPU preset's shape on MiniLM (`objective_pairs.PRESETS`:
  batch, lengths, turns, negatives, frozen layers, optimizer): the library's step, built as
  `stage.run_stage` builds it, and `torch_peer`'s on the same weights, heads and synthetic batch
  (`objective_pairs.build_steps`). Before any timing the two first-step losses, with dropout 0 on
  both sides, must agree within `--max_loss_diff`; then the two steps run in turn, `--repeats`
  times `--steps_per_repeat` steps, each side stepping on one fixed batch (no input pipeline).
  Padding, the same on both sides, in one or both regimes (`--padding`): `buckets`, the preset's
  `num_length_buckets` (4), the training default: sequences sorted by length and encoded in that
  many groups, each cut to its longest, the peer bucketing alike; `padded`, `num_length_buckets=1`,
  every sequence at max_seq_length on both sides. dial2vec's model has no length buckets (its
  records hold the first max_seq_length tokens of a dialogue, and most SGD dialogues are longer):
  its synthetic dialogues fill every position and it runs `padded` only. Dropout: 0 on both sides
  for the loss check and for timing, except SimCSE, whose augmentation is dropout: its loss is
  checked at dropout 0 (the two views of a pair then identical) and it is timed on a second pair
  of steps at the encoder's own rate (MiniLM's 0.1) on both sides. `--markdown_from=FILE` prints
  the README table of a results file and runs nothing.

  `--precision=float32,bfloat16` also times bfloat16, like for like (issue 51): what the library's
  bfloat16 buys over what a release user runs (PyTorch in float32), over PyTorch's own bfloat16
  and over its own float32 step. Per objective and regime it builds a second pair on the same
  weights, heads and batch: the TensorFlow step built in bfloat16 as `stage.run_stage` builds it
  with `--precision=bfloat16` (the backbone in bfloat16, variables float32, heads, similarities
  and losses float32), and the PyTorch peer with its BERT under
  `torch.autocast("cpu", dtype=torch.bfloat16)`, the fair peer (heads and loss float32 too:
  `torch_peer`). Before timing, both bfloat16 first-step losses must be within
  `--max_loss_rel_diff_bfloat16` of TensorFlow's float32 loss (relative). Then the four steps
  (TF and PyTorch in float32, TF and PyTorch in bfloat16) run in turn, and each regime gains
  `bfloat16`: its losses, medians and the three speed ratios of TF's bfloat16 step; the float32
  keys keep their meaning, and `--markdown_from` prints the bfloat16 columns too. The run writes
  benchmarks/results/objective_steps_bfloat16.json unless told, leaving the float32 file alone.
  bfloat16 is refused in one line on a CPU without bfloat16 arithmetic
  (`dialoguecse_tf/precision.py`), where it would be emulated.
* `train_step` (benchmark 2): the DialogueCSE contrastive step of the paper's equations (variant
  `paper_text`, I2 aggregation, NT-Xent) at the flags' shape (`--train_batch_size`,
  `--num_context_turns`, `--num_negatives`, `--max_seq_length`, `--num_frozen_layers`,
  `--temperature`), the library's own step plain, under XLA and with `--num_length_buckets`,
  against `torch_peer.TorchDialogueCSE` (`--frameworks`), on a synthetic batch or one of
  `--train_file`'s records. Dropout is 0 on both sides and the first-step losses must agree.
  `scaling.py` runs it in a fresh process per setting.
* `step_profile`: where the TensorFlow step of each of `--objectives` spends its time. Builds the
  step `objective_steps` times (dropout 0), runs `--warmup_steps`, then traces `--steps` steps with
  `tf.profiler.experimental` and reads the trace's framework op statistics (the profiler's own
  `framework_op_stats` tool). Self-times are summed over the threads that ran an op, so the shares
  are of the threads' busy time, not of the wall time; idle thread time is left out. The results
  hold the share of each op type, and the ops grouped by their place in the model with the layer
  index removed (the six layers' `query` weight gradients are one row), in milliseconds per step.
  Each profile also holds the step's wall time (`--steps` untraced steps after the warm-up). The
  framework op statistics leave out XLA-compiled clusters (bfloat16's islands,
  `encoder.backbone.set_compiled_elementwise`): their time is in the wall time, not the busy time.
  `--precision=float32,bfloat16` profiles each step in both (step_profile_bfloat16.json).
* `step_variants`: one objective's TensorFlow step (one of `--objectives`, one `--padding`) under
  TensorFlow's speed settings, which must be chosen before TensorFlow starts, hence one fresh
  process each: `default` (oneDNN kernels, inter- and intra-op threads = cores), `xla` (the step
  compiled by XLA), `inter_op_1` (one inter-op thread, so independent ops do not share the cores),
  `onednn_off` (`TF_ENABLE_ONEDNN_OPTS=0`, Eigen's kernels). Each process runs one step (tracing)
  and then `--steps` timed steps; the results hold their median and minimum.

  python -m benchmarks.objective_steps                                          # benchmark 8
  python -m benchmarks.objective_steps --precision=float32,bfloat16             # and in bfloat16
  python -m benchmarks.objective_steps --mode=train_step                        # benchmark 2
  python -m benchmarks.objective_steps --mode=step_profile --objectives=dse,dial2vec --padding=padded
  python -m benchmarks.objective_steps --mode=step_profile --objectives=dialoguecse --precision=float32,bfloat16
  python -m benchmarks.objective_steps --mode=step_variants --objectives=dse --padding=padded --steps=6
"""

import collections
import gc
import glob
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import common

MODES = ("objective_steps", "train_step", "step_profile", "step_variants")
PADDINGS = ("buckets", "padded")  # objective_pairs.PADDINGS, without importing TensorFlow for --help
FRAMEWORKS = ("tf", "tf_xla", "tf_buckets", "torch")
VARIANTS = ("default", "xla", "inter_op_1", "onednn_off")

flags.DEFINE_enum("mode", "objective_steps", MODES, "What to measure (the module docstring describes each).")
flags.DEFINE_list("objectives", ["dialoguecse", "siamese_m", "dse", "dial2vec", "simcse"],
                  "Objectives to time or profile (keys of objective_pairs.PRESETS); --mode=step_variants takes one.")
flags.DEFINE_list("padding", list(PADDINGS), f"Padding regimes, each the same on both sides: {PADDINGS}; "
                  "--mode=step_variants takes one.")
common.define_flags(repeats=5, steps_per_repeat=3, hf_folder=True, machine_note=True, precision=True)
flags.DEFINE_float("max_loss_diff", 1e-4, "Largest allowed difference between the float32 first-step losses.")
flags.DEFINE_float("max_loss_rel_diff_bfloat16", 2e-2,
                   "--precision=bfloat16: largest allowed relative difference of each bfloat16 first-step loss "
                   "(TF's step in bfloat16, PyTorch's with its BERT under autocast) from TF's float32 loss. bfloat16 "
                   "keeps 8 significant bits and its rounding adds up over the layers, so its losses part from "
                   "float32's by far more than --max_loss_diff allows; this allows twice the library's own bound "
                   "for them (1e-2, tests/objectives/test_objectives.py), as PyTorch rounds in other places.")
flags.DEFINE_integer("random_seed", 0, "Seed of the synthetic batches.")
flags.DEFINE_string("markdown_from", None, "Print the README table of this objective_steps results file and exit.")
flags.DEFINE_string("train_file", None, "--mode=train_step: contrastive TFRecords (glob) to take the batch from; "
                    "default: synthetic ids with lengths uniform in [max_seq_length / 4, max_seq_length].")
flags.DEFINE_integer("train_batch_size", 20, "--mode=train_step: examples per step (paper: 20).")
flags.DEFINE_integer("num_context_turns", 3, "--mode=train_step: context turns per example (paper: 3).")
flags.DEFINE_integer("num_negatives", 9, "--mode=train_step: negatives per example (paper: 9).")
flags.DEFINE_integer("max_seq_length", 50, "--mode=train_step: tokens per sequence (paper: 50).")
flags.DEFINE_integer("num_frozen_layers", 3, "--mode=train_step: bottom layers kept fixed (paper: 6 of 12; here "
                     "half of MiniLM's 6).")
flags.DEFINE_float("temperature", 0.1, "--mode=train_step: NT-Xent temperature.")
flags.DEFINE_integer("num_length_buckets", 4, "--mode=train_step: length groups of the `tf_buckets` candidate "
                     "(the fast path).")
flags.DEFINE_list("frameworks", list(FRAMEWORKS), f"--mode=train_step: which of {FRAMEWORKS} to time.")
flags.DEFINE_integer("warmup_steps", 2, "--mode=step_profile: steps run before tracing (the first traces the graph).")
flags.DEFINE_integer("steps", 3, "--mode=step_profile: steps traced; --mode=step_variants: timed steps per variant.")
flags.DEFINE_integer("top", 25, "--mode=step_profile: op groups kept per profile.")
flags.DEFINE_list("variants", list(VARIANTS), f"--mode=step_variants: variants to time, in this order: {VARIANTS}.")
flags.DEFINE_string("child", None, "Internal (--mode=step_variants): time this variant in this process and print "
                    "its JSON.")

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


def check_bfloat16_losses(name, regime, losses: dict, reference: float) -> dict:
    """Each bfloat16 first-step loss's difference from TF's float32 loss `reference`, relative;
    exits, naming them, where one exceeds --max_loss_rel_diff_bfloat16."""
    differences = {side: abs(loss - reference) / abs(reference) for side, loss in losses.items()}
    print(f"{name} ({regime}): bfloat16 first-step losses {losses}, relative to TF's float32 {reference:.6f}: "
          f"{differences}")
    if max(differences.values()) > FLAGS.max_loss_rel_diff_bfloat16:
        raise SystemExit(f"error: {name} ({regime}): a bfloat16 first-step loss is too far from TF's float32 one "
                         f"({differences} > --max_loss_rel_diff_bfloat16={FLAGS.max_loss_rel_diff_bfloat16}); "
                         "not timing")
    return differences


def time_objective(name, folder, regimes, precisions) -> dict:
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint

    from benchmarks import objective_pairs

    _, config = objective_pairs.preset_objective(name)
    loaded = load_checkpoint(folder, max_seq_length=config.max_seq_length)
    result = {"preset": objective_pairs.PRESETS[name]}
    for regime in regimes:
        buckets = config.num_length_buckets if regime == "buckets" else 1

        def build(dropout):
            # One pair per precision on the same weights, heads and batch: TF's step built in it,
            # the peer's BERT in float32 or under autocast in bfloat16.
            return {precision: objective_pairs.build_steps(name, folder, loaded, buckets, dropout, FLAGS.random_seed,
                                                           precision=precision)
                    for precision in precisions}

        pairs = build(0.0)
        steps = pairs["float32"]
        losses = {"tf": steps["tf"](), "torch": steps["torch"]()}  # also the warm-up (tracing)
        diff = abs(losses["tf"] - losses["torch"])
        print(f"{name} ({regime}): first-step losses {losses} (diff {diff:.2e})")
        if diff > FLAGS.max_loss_diff:
            raise SystemExit(f"error: {name} ({regime}): TF and PyTorch disagree on the first loss (diff {diff:.2e} > "
                             f"--max_loss_diff={FLAGS.max_loss_diff}); not timing")
        if "bfloat16" in pairs:
            bfloat16_losses = {side: pairs["bfloat16"][side]() for side in ("tf", "torch")}
            bfloat16_diffs = check_bfloat16_losses(name, regime, bfloat16_losses, losses["tf"])
        result.setdefault("shape", shape_of(name, config, steps["objective"], steps["batch"]))
        dropout = 0.0
        if name == "simcse":
            dropout = loaded.config.hidden_dropout_prob
            del pairs, steps
            gc.collect()
            pairs = build(dropout)
            for steps in pairs.values():
                steps["tf"](), steps["torch"]()

        def repeat(run):
            return lambda: [run() for _ in range(FLAGS.steps_per_repeat)]

        # float32's keep the names of every results file before bfloat16: "tf" and "torch".
        candidates = {side + ("" if precision == "float32" else f"_{precision}"): repeat(steps[side])
                      for precision, steps in pairs.items() for side in ("tf", "torch")}
        times = common.time_alternating(candidates, FLAGS.repeats, warmup=0)
        summary = {side: common.summarize([s / FLAGS.steps_per_repeat for s in seconds])
                   for side, seconds in times.items()}
        result[regime] = {"num_length_buckets": buckets, "timed_dropout": dropout, "first_step_losses": losses,
                          "first_step_loss_diff": diff, "tf": summary["tf"], "torch": summary["torch"],
                          "ratio_tf_over_torch": summary["torch"]["median_s"] / summary["tf"]["median_s"]}
        if "bfloat16" in pairs:
            tf_bfloat16 = summary["tf_bfloat16"]["median_s"]
            result[regime]["bfloat16"] = {
                "first_step_losses": bfloat16_losses, "first_step_loss_rel_diffs": bfloat16_diffs,
                "tf": summary["tf_bfloat16"], "torch": summary["torch_bfloat16"],
                "ratio_tf_over_torch_float32": summary["torch"]["median_s"] / tf_bfloat16,
                "ratio_tf_over_torch": summary["torch_bfloat16"]["median_s"] / tf_bfloat16,
                "ratio_tf_over_tf_float32": summary["tf"]["median_s"] / tf_bfloat16}
        del pairs, steps
        gc.collect()
    return result


# What a regime's `bfloat16` holds, in the results file beside `ratio`.
BFLOAT16_KEYS = ("tf = TF's step built with --precision=bfloat16, torch = the peer with its BERT under "
                 "torch.autocast('cpu', torch.bfloat16), both on the float32 pair's weights, heads and batch; their "
                 "first-step losses and those losses' differences from TF's float32 loss, relative; "
                 "ratio_tf_over_torch_float32, ratio_tf_over_torch and ratio_tf_over_tf_float32 = the median s/step "
                 "of PyTorch in float32, of PyTorch in bfloat16 and of TF in float32 over TF's in bfloat16 (> 1: TF "
                 "in bfloat16 faster)")
REGIME_TITLES = {"buckets": "length buckets (4) on both", "padded": "padded to max_seq_length on both"}
# The columns a results file that timed bfloat16 adds to the README table (`bfloat16_cells`).
BFLOAT16_COLUMNS = ("bfloat16 first-step losses TF / PyTorch", "TF bfloat16 s/step",
                    "PyTorch bfloat16 (autocast) s/step", "TF bfloat16 speed over PyTorch float32",
                    "over PyTorch bfloat16", "over TF float32")


def bfloat16_cells(row: dict) -> list:
    losses = row["first_step_losses"]
    return [f"{losses['tf']:.6f} / {losses['torch']:.6f}", f"{row['tf']['median_s']:.3f}",
            f"{row['torch']['median_s']:.3f}", f"**{row['ratio_tf_over_torch_float32']:.2f}x**",
            f"{row['ratio_tf_over_torch']:.2f}x", f"{row['ratio_tf_over_tf_float32']:.2f}x"]


def markdown_table(results: dict) -> str:
    """The README table: one row per objective and padding regime, with the bfloat16 columns where
    the file timed bfloat16."""
    bfloat16 = "bfloat16" in results["settings"].get("precision", ())
    header = ["objective (preset)", "shape", "padding", "dropout timed", "first-step losses TF / PyTorch",
              "TF s/step", "PyTorch s/step", "TF speed over PyTorch", *(BFLOAT16_COLUMNS if bfloat16 else ())]
    alignment = ["---", "---", "---", "--:", "---", "--:", "--:", "--:", *(("---",) + ("--:",) * 5 if bfloat16 else ())]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(alignment) + "|"]
    for name, result in results["objectives"].items():
        shape = result["shape"]
        described = (f"batch {shape['train_batch_size']}, {shape['sequences_per_step']} sequences of <= "
                     f"{shape['max_seq_length']} (mean {shape['mean_tokens_per_sequence']:.1f})")
        for regime in PADDINGS:
            if regime not in result:
                continue
            row = result[regime]
            losses = row["first_step_losses"]
            cells = [f"{name} (`{result['preset']}`)", described, REGIME_TITLES[regime], f"{row['timed_dropout']:g}",
                     f"{losses['tf']:.6f} / {losses['torch']:.6f}", f"{row['tf']['median_s']:.3f}",
                     f"{row['torch']['median_s']:.3f}", f"**{row['ratio_tf_over_torch']:.2f}x**",
                     *(bfloat16_cells(row["bfloat16"]) if bfloat16 else ())]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_objective_steps() -> None:
    from benchmarks import objective_pairs

    objective_pairs.check_choices(FLAGS.objectives, FLAGS.padding)
    precisions = common.precisions(FLAGS.precision)
    folder = FLAGS.hf_folder or common.default_hf_folder()
    load_before = os.getloadavg()
    results = {}
    for name in FLAGS.objectives:
        # dial2vec's model encodes whole padded dialogues; it has no length buckets.
        regimes = ["padded"] if name == "dial2vec" else [r for r in PADDINGS if r in FLAGS.padding]
        results[name] = time_objective(name, folder, regimes, precisions)
    header = ["objective", "padding", "TF s/step", "torch s/step", "TF speed over torch"]
    if "bfloat16" in precisions:
        header += ["TF bf16 s/step", "torch bf16 s/step", "TF bf16 over torch", "over torch bf16", "over TF"]
    rows = []
    for name, result in results.items():
        for regime in PADDINGS:
            if regime not in result:
                continue
            row = result[regime]
            rows.append([name, regime, row["tf"]["median_s"], row["torch"]["median_s"],
                         f"{row['ratio_tf_over_torch']:.2f}x"])
            if "bfloat16" in row:
                in_bfloat16 = row["bfloat16"]
                ratios = ("ratio_tf_over_torch_float32", "ratio_tf_over_torch", "ratio_tf_over_tf_float32")
                rows[-1] += [in_bfloat16["tf"]["median_s"], in_bfloat16["torch"]["median_s"],
                             *(f"{in_bfloat16[key]:.2f}x" for key in ratios)]
    common.print_table(f"Training step, TF vs PyTorch peer: median of {FLAGS.repeats} x {FLAGS.steps_per_repeat}",
                       header, rows)
    settings = {"hf_folder": folder, "batch": "synthetic", "random_seed": FLAGS.random_seed,
                "steps_per_repeat": FLAGS.steps_per_repeat, "repeats": FLAGS.repeats,
                "max_loss_diff": FLAGS.max_loss_diff, "precision": list(precisions)}
    if "bfloat16" in precisions:
        settings["max_loss_rel_diff_bfloat16"] = FLAGS.max_loss_rel_diff_bfloat16
    payload = {
        "benchmark": "objective_steps",
        "settings": settings,
        "ratio": "ratio_tf_over_torch = PyTorch median s/step over TF's (> 1: TF faster)",
        **({"bfloat16": BFLOAT16_KEYS} if "bfloat16" in precisions else {}),
        "machine_note": FLAGS.machine_note,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "objectives": results,
        "peak_rss_mib": common.peak_rss_mib(),
    }
    common.write_results(common.results_path(FLAGS.output_json, "objective_steps", precisions), payload)
    print("\n" + markdown_table(payload))


# --mode=train_step


def synthetic_batch(batch_size, turns, candidates, length, seed):
    import numpy as np

    from dialoguecse_tf.records.contrastive import (CANDIDATE_INPUT_IDS, CANDIDATE_INPUT_MASK, CONTEXT_INPUT_IDS,
                                                    CONTEXT_INPUT_MASK, CONTEXT_TURN_MASK)

    rng = np.random.default_rng(seed)

    def ids_and_mask(shape):
        lengths = rng.integers(max(length // 4, 2), length + 1, size=shape)
        mask = (np.arange(length) < lengths[..., None]).astype(np.int32)
        return rng.integers(1000, 20000, size=shape + (length,)).astype(np.int32) * mask, mask

    context_ids, context_mask = ids_and_mask((batch_size, turns))
    candidate_ids, candidate_mask = ids_and_mask((batch_size, candidates))
    return {
        CONTEXT_INPUT_IDS: context_ids, CONTEXT_INPUT_MASK: context_mask,
        CONTEXT_TURN_MASK: np.ones((batch_size, turns), np.int32),
        CANDIDATE_INPUT_IDS: candidate_ids, CANDIDATE_INPUT_MASK: candidate_mask,
    }


def dialoguecse_objective():
    """The `dialoguecse` objective as the PyTorch peer computes it (the paper's equations, I2
    aggregation) with this benchmark's settings."""
    from dialoguecse_tf.stage import configure

    objective, _ = configure("dialoguecse", variant="paper_text", aggregation="mean", temperature=FLAGS.temperature,
                             num_frozen_layers=FLAGS.num_frozen_layers, num_context_turns=FLAGS.num_context_turns,
                             num_negatives=FLAGS.num_negatives)
    return objective


def records_batch(pattern, batch_size, length):
    import tensorflow as tf

    from dialoguecse_tf.records.reader import read_dataset, resolve_records
    from dialoguecse_tf.records.spec import check_compatible

    objective = dialoguecse_objective()
    files, spec, _ = resolve_records([pattern], objective.record_type)
    check_compatible(spec, max_seq_length=length)
    objective.check_records(spec, os.path.dirname(files[0]))
    batch = next(iter(read_dataset(files, spec).batch(batch_size, drop_remainder=True)))
    batch = objective.prepare_batch(batch)
    return {name: tf.cast(value, tf.int32).numpy() for name, value in batch.items()}


def tensorflow_step(loaded, config, batch, jit_compile, num_length_buckets):
    import tensorflow as tf

    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.training.loop import build_train_step
    from dialoguecse_tf.training.optimizers import create_optimizer

    objective = dialoguecse_objective()
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0" if not tf.config.list_logical_devices("GPU") else "/gpu:0")
    with strategy.scope():
        # As `stage.run_stage`: a backbone built in the scope, the objective's model (and freezing)
        # around it, then the checkpoint's weights.
        backbone = build_backbone(config)
        model = objective.build_model(backbone, config, loaded.tokenizer, num_length_buckets)
        backbone.set_weights(loaded.backbone.get_weights())
        optimizer = create_optimizer(5e-5, num_train_steps=10**6, num_warmup_steps=0)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64)

    def step_fn(model, batch, training_):
        return objective.compute_loss(model, batch, training_, FLAGS.train_batch_size)

    iterator = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(batch).repeat()))
    train_step = build_train_step(strategy, model, optimizer, step_fn, step, jit_compile)
    return lambda: float(train_step(iterator)[0])


def torch_step(folder, batch):
    from benchmarks import torch_peer

    bert = torch_peer.load_bert(folder)
    for module in bert.modules():
        if module.__class__.__name__ == "Dropout":
            module.p = 0.0
    model = torch_peer.TorchDialogueCSE(bert, FLAGS.num_frozen_layers, FLAGS.temperature)
    return torch_peer.TrainStep(model, torch_peer.create_optimizer(model, 5e-5), batch, clip_norm=1.0)


def run_train_step() -> None:
    unknown = set(FLAGS.frameworks) - set(FRAMEWORKS)
    if unknown:
        raise app.UsageError(f"--frameworks: unknown {sorted(unknown)}; choose from {FRAMEWORKS}")
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint
    from dialoguecse_tf.records.contrastive import CANDIDATE_INPUT_MASK, CONTEXT_INPUT_MASK

    folder = FLAGS.hf_folder or common.default_hf_folder()
    loaded = load_checkpoint(folder, max_seq_length=FLAGS.max_seq_length)
    config = loaded.config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    batch_size, turns, candidates = FLAGS.train_batch_size, FLAGS.num_context_turns, FLAGS.num_negatives + 1
    if FLAGS.train_file:
        batch = records_batch(FLAGS.train_file, batch_size, FLAGS.max_seq_length)
    else:
        batch = synthetic_batch(batch_size, turns, candidates, FLAGS.max_seq_length, FLAGS.random_seed)

    sequences = batch_size * (turns + candidates)
    mean_length = float((batch[CONTEXT_INPUT_MASK].sum() + batch[CANDIDATE_INPUT_MASK].sum()) / sequences)
    steps = {}
    for framework in FLAGS.frameworks:
        if framework == "torch":
            steps[framework] = torch_step(folder, batch)
        else:
            steps[framework] = tensorflow_step(
                loaded, config, batch, jit_compile=framework == "tf_xla",
                num_length_buckets=FLAGS.num_length_buckets if framework == "tf_buckets" else 1,
            )
    rss_before = common.peak_rss_mib()
    first_losses = {name: run() for name, run in steps.items()}  # also the warm-up (tracing, compiling)
    spread = max(first_losses.values()) - min(first_losses.values())
    print(f"first-step losses: {first_losses} (spread {spread:.2e})")
    if spread > FLAGS.max_loss_diff:
        raise SystemExit(f"error: the frameworks disagree on the first loss (spread {spread:.2e}); not timing")

    def repeat(run):
        return lambda: [run() for _ in range(FLAGS.steps_per_repeat)]

    times = common.time_alternating({name: repeat(run) for name, run in steps.items()}, FLAGS.repeats, warmup=0)
    results, rows = {}, []
    for name, seconds in times.items():
        summary = common.summarize([s / FLAGS.steps_per_repeat for s in seconds])
        summary.update(samples_per_s=batch_size / summary["median_s"], sequences_per_s=sequences / summary["median_s"])
        results[name] = summary
    for name, summary in results.items():
        ratio = summary["samples_per_s"] / results["torch"]["samples_per_s"] if "torch" in results else None
        summary["ratio_to_torch"] = ratio
        rows.append([name, summary["median_s"], summary["samples_per_s"], summary["sequences_per_s"],
                     f"{ratio:.2f}x" if ratio else "-"])
    common.print_table(
        f"Contrastive training step: batch {batch_size}, {turns} turns, {candidates} candidates, "
        f"L={FLAGS.max_seq_length} ({sequences} sequences/step), median of {FLAGS.repeats} x {FLAGS.steps_per_repeat}",
        ["framework", "s/step", "samples/s", "sequences/s", "vs torch"], rows,
    )
    common.write_results(common.results_path(FLAGS.output_json, "train_step"), {
        "benchmark": "train_step",
        "settings": {"hf_folder": folder, "train_file": FLAGS.train_file or "synthetic",
                     "train_batch_size": batch_size, "num_context_turns": turns,
                     "num_negatives": FLAGS.num_negatives, "max_seq_length": FLAGS.max_seq_length,
                     "num_frozen_layers": FLAGS.num_frozen_layers, "sequences_per_step": sequences,
                     "num_length_buckets": FLAGS.num_length_buckets,
                     "mean_tokens_per_sequence": mean_length,
                     "tokens_per_step": sequences * FLAGS.max_seq_length,
                     "steps_per_repeat": FLAGS.steps_per_repeat, "repeats": FLAGS.repeats},
        "first_step_losses": first_losses,
        "results": results,
        "rss_before_first_step_mib": rss_before,
        "peak_rss_mib": common.peak_rss_mib(),
    })


# --mode=step_profile


def op_rows(xplane_path: str) -> list:
    """The profiler's framework op statistics of one trace, one dict per op."""
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

    data, ok = _pywrap_profiler_plugin.xspace_to_tools_data([xplane_path], "framework_op_stats", {})
    if not ok:
        raise RuntimeError(f"the profiler could not read {xplane_path}")
    table = json.loads(data)[0]
    columns = [column["id"] for column in table["cols"]]
    return [dict(zip(columns, [cell.get("v") if cell else None for cell in row["c"]])) for row in table["rows"]]


def op_summary(rows: list, steps: int, top: int) -> dict:
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


def profile(name: str, folder: str, loaded, regime: str, precision: str = "float32") -> dict:
    import tensorflow as tf

    from benchmarks import objective_pairs

    _, config = objective_pairs.preset_objective(name)
    buckets = config.num_length_buckets if regime == "buckets" else 1
    run = objective_pairs.build_steps(name, folder, loaded, buckets, 0.0, 0, precision=precision)["tf"]
    for _ in range(FLAGS.warmup_steps):
        run()
    start = time.perf_counter()
    for _ in range(FLAGS.steps):
        run()
    wall_ms = (time.perf_counter() - start) / FLAGS.steps * 1e3
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(FLAGS.steps):
            run()
        tf.profiler.experimental.stop()
        rows = op_rows(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[-1])
    return {"num_length_buckets": buckets, "wall_ms_per_step": round(wall_ms, 1),
            **op_summary(rows, FLAGS.steps, FLAGS.top)}


def run_step_profile() -> None:
    from benchmarks import objective_pairs
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint

    objective_pairs.check_choices(FLAGS.objectives, FLAGS.padding)
    precisions = common.precisions(FLAGS.precision)
    folder = FLAGS.hf_folder or common.default_hf_folder()
    load_before = os.getloadavg()
    results = {}
    for name in FLAGS.objectives:
        _, config = objective_pairs.preset_objective(name)
        loaded = load_checkpoint(folder, max_seq_length=config.max_seq_length)
        regimes = ["padded"] if name == "dial2vec" else FLAGS.padding
        for regime, precision in itertools.product(regimes, precisions):
            label = f"{name} ({regime})" if precision == "float32" else f"{name} ({regime}, {precision})"
            result = profile(name, folder, loaded, regime, precision)
            results[label] = result
            common.print_table(f"{label}: {result['wall_ms_per_step']} ms per step; busy thread time by op type",
                               ["op type", "ms", "share"], [
                [kind, value["ms_per_step"], f"{100 * value['share']:.1f} %"]
                for kind, value in list(result["by_type"].items())[:10]])
    common.write_results(common.results_path(FLAGS.output_json, "step_profile", precisions), {
        "benchmark": "step_profile",
        "settings": {"warmup_steps": FLAGS.warmup_steps, "steps": FLAGS.steps, "dropout": 0.0, "batch": "synthetic",
                     "precision": list(precisions)},
        "machine_note": FLAGS.machine_note,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "profiles": results,
    })


# --mode=step_variants


def time_variant(variant: str) -> dict:
    import tensorflow as tf

    if variant == "inter_op_1":
        tf.config.threading.set_inter_op_parallelism_threads(1)
    from benchmarks import objective_pairs
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint

    _, config = objective_pairs.preset_objective(FLAGS.objectives[0])
    buckets = config.num_length_buckets if FLAGS.padding[0] == "buckets" else 1
    folder = FLAGS.hf_folder or common.default_hf_folder()
    loaded = load_checkpoint(folder, max_seq_length=config.max_seq_length)
    run = objective_pairs.build_steps(FLAGS.objectives[0], folder, loaded, buckets, 0.0, 0,
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


def run_step_variants() -> None:
    if len(FLAGS.objectives) != 1 or len(FLAGS.padding) != 1:
        raise app.UsageError("--mode=step_variants times one objective in one padding regime: give one "
                             "--objectives and one --padding")
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
        output = subprocess.run([sys.executable, "-m", "benchmarks.objective_steps", "--mode=step_variants",
                                 f"--child={variant}", f"--objectives={FLAGS.objectives[0]}",
                                 f"--padding={FLAGS.padding[0]}", f"--steps={FLAGS.steps}",
                                 *([f"--hf_folder={FLAGS.hf_folder}"] if FLAGS.hf_folder else [])],
                                env=env, check=True, capture_output=True, text=True, cwd=common.REPO_ROOT).stdout
        rows.append(json.loads(next(line for line in output.splitlines() if line.startswith("RESULT "))[7:]))
        print(rows[-1], flush=True)
    common.print_table(f"{FLAGS.objectives[0]} ({FLAGS.padding[0]}): TF step by variant",
                       ["variant", "median s", "min s"],
                       [[row["variant"], row["median_s"], row["min_s"]] for row in rows])
    common.write_results(common.results_path(FLAGS.output_json, "step_variants"), {
        "benchmark": "step_variants",
        "objective": FLAGS.objectives[0], "padding": FLAGS.padding[0], "steps": FLAGS.steps,
        "machine_note": FLAGS.machine_note,
        "load_average_1min": {"before": load_before[0], "after": os.getloadavg()[0]},
        "results": rows,
    })


def main(argv):
    del argv
    if FLAGS.mode not in ("objective_steps", "step_profile") and FLAGS.precision != ["float32"]:
        raise app.UsageError(f"--precision: --mode={FLAGS.mode} times float32 only; bfloat16 is "
                             "--mode=objective_steps's and --mode=step_profile's")
    if FLAGS.markdown_from:
        with open(FLAGS.markdown_from, encoding="utf-8") as reader:
            print(markdown_table(json.load(reader)))
        return
    {"objective_steps": run_objective_steps, "train_step": run_train_step, "step_profile": run_step_profile,
     "step_variants": run_step_variants}[FLAGS.mode]()


if __name__ == "__main__":
    app.run(main)
