"""Distribution strategies (Model Garden's names) and the input pipeline that splits each seeded
global batch among the replicas of all workers (the compute precision is `precision.py`'s)."""

import os

import tensorflow as tf

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")


def create_strategy(distribution_strategy: str, tpu_address: str = "") -> tf.distribute.Strategy:
    """Model Garden's strategy names; `mirrored` uses every local GPU (or the CPU devices)."""
    if distribution_strategy == "one_device":
        device = "/gpu:0" if tf.config.list_logical_devices("GPU") else "/cpu:0"
        return tf.distribute.OneDeviceStrategy(device)
    if distribution_strategy == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            return tf.distribute.MirroredStrategy([d.name for d in gpus])
        # Collective all-reduce keys restart with each CPU MirroredStrategy and clash when a
        # process builds several; reducing through one device has no such shared state.
        return tf.distribute.MirroredStrategy(
            [d.name for d in tf.config.list_logical_devices("CPU")],
            cross_device_ops=tf.distribute.ReductionToOneDevice(),
        )
    if distribution_strategy == "multi_worker_mirrored":
        # The cluster comes from TF_CONFIG. This must run before any TensorFlow op: the
        # strategy configures the runtime's collective ops, which TF allows only at start-up.
        return tf.distribute.MultiWorkerMirroredStrategy()
    if distribution_strategy == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise ValueError(f"distribution_strategy must be one of {STRATEGIES}, got {distribution_strategy!r}")


def split_cpu(num_devices: int) -> None:
    """Splits the CPU into logical devices so MirroredStrategy can run replicas on CPU.

    Must run before TensorFlow initialises its devices (before any op executes).
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)


def make_dataset(dataset: tf.data.Dataset, global_batch_size: int, seed: int,
                 skip_batches: int = 0, shuffle_buffer: int = 10000, prefetch: bool = True,
                 distinct_batches: bool = False) -> tf.data.Dataset:
    """Repeats, shuffles (seeded), batches and skips the batches a resumed run has seen.

    `distinct_batches` batches each epoch on its own (its last partial batch dropped) before
    repeating, so no batch holds one record twice, which objectives with in-batch negatives
    need; by default the stream is repeated first and a batch may straddle two epochs.
    `prefetch` prepares the next batches while a step runs.
    """
    if distinct_batches:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(global_batch_size, drop_remainder=True).repeat()
    else:
        dataset = dataset.repeat().shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(global_batch_size, drop_remainder=True)
    dataset = dataset.skip(skip_batches)
    return dataset.prefetch(tf.data.AUTOTUNE) if prefetch else dataset


def distribute_global_batches(strategy: tf.distribute.Strategy, make_batches) -> tf.distribute.DistributedDataset:
    """Splits each global batch of `make_batches()` among all replicas of all workers.

    Every input pipeline (one per worker) reads the same seeded stream of global batches
    and keeps only its own contiguous slice, cut into per-replica batches, so the replicas
    together see exactly the global batch a single process would, and a resumed run skips
    the same batches on every worker. `experimental_distribute_dataset` would instead
    auto-shard by file across workers: with fewer record files than workers it fails, and
    otherwise each worker draws its share of a global batch from its own files only, a
    different stream of examples from the one a single process reads.
    """

    def replica_batches(context: tf.distribute.InputContext) -> tf.data.Dataset:
        batches = make_batches()
        global_batch_size = tf.nest.flatten(batches.element_spec)[0].shape[0]
        if global_batch_size is None:
            raise ValueError("the dataset must have a static batch size (batch with drop_remainder=True)")
        per_replica = context.get_per_replica_batch_size(global_batch_size)
        per_pipeline = global_batch_size // context.num_input_pipelines
        # Each global batch becomes one slice per pipeline, of which this one keeps its own;
        # its replicas then take its per-replica batches in turn.
        own = batches.rebatch(per_pipeline, drop_remainder=True).shard(
            context.num_input_pipelines, context.input_pipeline_id)
        own = own.rebatch(per_replica, drop_remainder=True)
        if batches.cardinality() == tf.data.INFINITE_CARDINALITY:
            # Rebatching forgets that the stream is endless; unsure of it, a multi-worker
            # strategy would hand the replicas batches of unknown size and agree across
            # workers before every step that all of them still have data.
            own = own.apply(tf.data.experimental.assert_cardinality(tf.data.INFINITE_CARDINALITY))
        return own.prefetch(tf.data.AUTOTUNE)

    return strategy.distribute_datasets_from_function(replica_batches)


def worker_scratch_dir(strategy: tf.distribute.Strategy, output_dir: str) -> str | None:
    """None on the chief, which writes the run's outputs; else this worker's throwaway folder.

    As in TensorFlow's multi-worker guide: a folder per worker beside the chief's outputs,
    so the workers never write the same file.
    """
    if strategy.extended.should_checkpoint:
        return None
    return os.path.join(output_dir, f"workertemp_{strategy.cluster_resolver.task_id}")
