"""Benchmark 2: DialogueCSE contrastive training steps/s, TensorFlow vs a PyTorch peer.

The TensorFlow side is the library's own step (`training.loop.build_train_step` around the
`dialoguecse` objective's model and loss in its `paper_text` variant, `DialogueCSEModel` and
NT-Xent, the code `stage.run_stage` runs);
the PyTorch side is `torch_peer.TorchDialogueCSE` on `transformers.BertModel`: same
weights (one HuggingFace folder), same batch, turns, negatives, frozen layers,
temperature and optimizer. Before timing, the first step's losses must agree.

Dropout is set to 0 on both sides so the two compute the same numbers; the input
pipeline is left out (each side steps on one fixed batch), so the figure is the model's.
"""

import os

from absl import app, flags

from benchmarks import common

FRAMEWORKS = ("tf", "tf_xla", "tf_buckets", "torch")

common.define_flags(repeats=5, steps_per_repeat=3, hf_folder=True)
flags.DEFINE_string("train_file", None, "Contrastive TFRecords (glob) to take the batch from; default: "
                    "synthetic ids with lengths uniform in [max_seq_length / 4, max_seq_length].")
flags.DEFINE_integer("train_batch_size", 20, "Examples per step (paper: 20).")
flags.DEFINE_integer("num_context_turns", 3, "Context turns per example (paper: 3).")
flags.DEFINE_integer("num_negatives", 9, "Negatives per example (paper: 9).")
flags.DEFINE_integer("max_seq_length", 50, "Tokens per sequence (paper: 50).")
flags.DEFINE_integer("num_frozen_layers", 3, "Bottom layers kept fixed (paper: 6 of 12; here half of MiniLM's 6).")
flags.DEFINE_float("temperature", 0.1, "NT-Xent temperature.")
flags.DEFINE_integer("num_length_buckets", 4, "Length groups of the `tf_buckets` candidate (the fast path).")
flags.DEFINE_list("frameworks", list(FRAMEWORKS), f"Which of {FRAMEWORKS} to time.")
flags.DEFINE_float("max_loss_diff", 1e-4, "Largest allowed difference between the first-step losses.")
flags.DEFINE_integer("random_seed", 0, "Seed of the synthetic batch.")

FLAGS = flags.FLAGS


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


def main(argv):
    del argv
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


if __name__ == "__main__":
    app.run(main)
