"""Benchmark 6: DSE training steps/s on CPU, one device vs two mirrored replicas.

The step is the library's own (`training.loop.build_train_step` around the `dse` objective's model
and loss, the code `stage.run_stage` runs) at the CPU preset `cpu_dse`
(experiments/dse_sgd_minilm.yaml): MiniLM, 64 pairs (128 texts) of at most 32 tokens, every
layer trained. Under the mirrored strategy each replica encodes half the pairs and gathers the
other replica's projections for the in-batch negatives (`losses.gather_across_replicas`); the
cost of that gather is measured twice: as the mirrored step's time over the one-device step's,
and on its own (the two all-gathers of [pairs / 2, 128] projections, timed under the same
strategy).

Dropout is 0 so both strategies compute the same loss, which is checked before timing.
"""


from absl import app, flags

from benchmarks import common

common.define_flags(repeats=5, steps_per_repeat=3, hf_folder=True)
flags.DEFINE_string("train_file", None, "Pair TFRecords (glob) to take the batch from; default: synthetic ids with "
                    "lengths uniform in [max_seq_length / 4, max_seq_length].")
flags.DEFINE_integer("train_batch_size", 64, "Pairs per step (CPU preset: 64; paper: 1,024).")
flags.DEFINE_integer("max_seq_length", 32, "Tokens per text (DSE: 32).")
flags.DEFINE_integer("num_length_buckets", 4, "Length groups per step (the training default).")
flags.DEFINE_integer("gather_repeats", 50, "Timed calls of the gather on its own.")
flags.DEFINE_float("max_loss_diff", 1e-4, "Largest allowed difference between the strategies' first-step losses.")
flags.DEFINE_integer("random_seed", 0, "Seed of the synthetic batch.")

FLAGS = flags.FLAGS
STRATEGIES = ("one_device", "mirrored")


def synthetic_pairs(batch_size, length, seed):
    import numpy as np

    from dialoguecse_tf.records.pairs import PAIR_INPUT_IDS, PAIR_INPUT_MASK

    rng = np.random.default_rng(seed)
    lengths = rng.integers(max(length // 4, 2), length + 1, size=(batch_size, 2))
    mask = (np.arange(length) < lengths[..., None]).astype(np.int32)
    ids = rng.integers(1000, 20000, size=(batch_size, 2, length)).astype(np.int32) * mask
    return {PAIR_INPUT_IDS: ids, PAIR_INPUT_MASK: mask}


def records_pairs(pattern, batch_size, length):
    import tensorflow as tf

    from dialoguecse_tf.records.pairs import RECORD_TYPE_PAIRS
    from dialoguecse_tf.records.reader import read_dataset, resolve_records
    from dialoguecse_tf.records.spec import check_compatible

    files, spec, _ = resolve_records([pattern], RECORD_TYPE_PAIRS)
    check_compatible(spec, max_seq_length=length)
    batch = next(iter(read_dataset(files, spec).batch(batch_size, drop_remainder=True)))
    return {name: tf.cast(value, tf.int32).numpy() for name, value in batch.items()}


def dse_step(strategy_name, loaded, config, batch):
    import keras
    import tensorflow as tf

    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.stage import TrainConfig, configure
    from dialoguecse_tf.training.loop import build_train_step
    from dialoguecse_tf.training.strategy import create_strategy

    objective, _ = configure("dse", head_learning_rate_scale=10.0, temperature=0.05, num_frozen_layers=0)
    strategy = create_strategy(strategy_name)
    # The same random projection head for both strategies.
    keras.utils.set_random_seed(FLAGS.random_seed)
    with strategy.scope():
        backbone = build_backbone(config)
        model = objective.build_model(backbone, config, loaded.tokenizer, FLAGS.num_length_buckets)
        backbone.set_weights(loaded.backbone.get_weights())
        optimizer = objective.create_optimizer(TrainConfig(learning_rate=3e-5), 10**6, model)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64)

    def step_fn(model, batch, training_):
        return objective.compute_loss(model, batch, training_, FLAGS.train_batch_size)

    dataset = tf.data.Dataset.from_tensors(batch).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    train_step = build_train_step(strategy, model, optimizer, step_fn, step)
    return strategy, lambda: float(train_step(iterator)[0])


def gather_only(strategy):
    """The mirrored step's extra communication on its own: both sides' projections gathered."""
    import tensorflow as tf

    from dialoguecse_tf.losses import gather_across_replicas

    per_replica = FLAGS.train_batch_size // strategy.num_replicas_in_sync
    local = strategy.experimental_distribute_values_from_function(
        lambda context: tf.random.normal([per_replica, 128], seed=context.replica_id_in_sync_group))

    @tf.function
    def gather(values):
        def replica_fn(value):
            first, _ = gather_across_replicas(value)
            second, _ = gather_across_replicas(value + 1.0)
            return tf.reduce_sum(first) + tf.reduce_sum(second)

        return strategy.reduce("SUM", strategy.run(replica_fn, args=(values,)), axis=None)

    return lambda: float(gather(local))


def main(argv):
    del argv
    from dialoguecse_tf.training.strategy import split_cpu

    # Before TensorFlow initialises its devices: two logical CPUs for the two replicas.
    split_cpu(2)
    from dialoguecse_tf.encoder.checkpoints import load_checkpoint
    from dialoguecse_tf.records.pairs import PAIR_INPUT_MASK

    folder = FLAGS.hf_folder or common.default_hf_folder()
    loaded = load_checkpoint(folder, max_seq_length=FLAGS.max_seq_length)
    config = loaded.config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if FLAGS.train_file:
        batch = records_pairs(FLAGS.train_file, FLAGS.train_batch_size, FLAGS.max_seq_length)
    else:
        batch = synthetic_pairs(FLAGS.train_batch_size, FLAGS.max_seq_length, FLAGS.random_seed)
    mean_length = float(batch[PAIR_INPUT_MASK].sum() / (2 * FLAGS.train_batch_size))

    strategies, steps = {}, {}
    for name in STRATEGIES:
        strategies[name], steps[name] = dse_step(name, loaded, config, batch)
    first_losses = {name: run() for name, run in steps.items()}  # also the warm-up (tracing)
    spread = max(first_losses.values()) - min(first_losses.values())
    print(f"first-step losses: {first_losses} (spread {spread:.2e})")
    if spread > FLAGS.max_loss_diff:
        raise SystemExit(f"error: the strategies disagree on the first loss (spread {spread:.2e}); not timing")

    def repeat(run):
        return lambda: [run() for _ in range(FLAGS.steps_per_repeat)]

    times = common.time_alternating({name: repeat(run) for name, run in steps.items()}, FLAGS.repeats, warmup=0)
    results = {}
    for name, seconds in times.items():
        summary = common.summarize([s / FLAGS.steps_per_repeat for s in seconds])
        summary.update(pairs_per_s=FLAGS.train_batch_size / summary["median_s"],
                       texts_per_s=2 * FLAGS.train_batch_size / summary["median_s"])
        results[name] = summary
    gather = gather_only(strategies["mirrored"])
    gather_times = common.time_alternating({"gather": gather}, FLAGS.gather_repeats, warmup=2)["gather"]
    gather_summary = common.summarize(gather_times)
    overhead = results["mirrored"]["median_s"] / results["one_device"]["median_s"]
    rows = [[name, summary["median_s"], summary["pairs_per_s"], summary["texts_per_s"]]
            for name, summary in results.items()]
    common.print_table(
        f"DSE training step: {FLAGS.train_batch_size} pairs, L={FLAGS.max_seq_length} (mean {mean_length:.1f} tokens), "
        f"median of {FLAGS.repeats} x {FLAGS.steps_per_repeat}", ["strategy", "s/step", "pairs/s", "texts/s"], rows)
    print(f"mirrored / one device: {overhead:.2f}x; the gather alone: {1000 * gather_summary['median_s']:.2f} ms")
    common.write_results(common.results_path(FLAGS.output_json, "dse_step"), {
        "benchmark": "dse_step",
        "settings": {"hf_folder": folder, "train_file": FLAGS.train_file or "synthetic",
                     "train_batch_size": FLAGS.train_batch_size, "max_seq_length": FLAGS.max_seq_length,
                     "num_length_buckets": FLAGS.num_length_buckets, "mean_tokens_per_text": mean_length,
                     "replicas_mirrored": strategies["mirrored"].num_replicas_in_sync,
                     "steps_per_repeat": FLAGS.steps_per_repeat, "repeats": FLAGS.repeats},
        "first_step_losses": first_losses,
        "results": results,
        "mirrored_over_one_device": overhead,
        "gather_only": gather_summary,
        "peak_rss_mib": common.peak_rss_mib(),
    })


if __name__ == "__main__":
    app.run(main)
