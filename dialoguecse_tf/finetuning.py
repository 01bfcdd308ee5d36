"""The contrastive stage (paper, section 4): training DialogueCSE and the siamese baselines.

Both models read the same contrastive records and share this stage's loop; the output is
the fine-tuned BERT alone (MGE and matching layers exist only for training), written as a
project checkpoint in `output_dir/encoder`.
"""

import dataclasses
import os

import keras
import tensorflow as tf

from dialoguecse_tf import schema, training
from dialoguecse_tf.checkpoints import load_or_initialize, save_checkpoint
from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.models.dialoguecse import DialogueCSEModel
from dialoguecse_tf.models.layers import DEFAULT_ATTENTION_HIDDEN_SIZE
from dialoguecse_tf.sentence_encoder import SentenceEncoder

ENCODER_DIR = "encoder"


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    train_file: tuple
    output_dir: str
    init_checkpoint: str | None = None
    bert_config_file: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool = True
    eval_select_file: str | None = None
    eval_sts_file: str | None = None
    eval_steps: int = 0
    model_type: str = "dialoguecse"
    aggregation: str = "mean"
    attention_hidden_size: int = DEFAULT_ATTENTION_HIDDEN_SIZE
    matching_hidden_size: int = 256
    temperature: float = 0.1
    num_negatives: int = 9
    num_context_turns: int = 3
    num_frozen_layers: int = 6
    max_seq_length: int = 50
    train_batch_size: int = 20
    learning_rate: float = 5e-5
    num_train_steps: int | None = None
    num_train_epochs: float | None = None
    num_warmup_steps: int = 0
    max_train_examples: int = 0
    save_checkpoints_steps: int = 1000
    log_steps: int = 10
    random_seed: int = 12345
    distribution_strategy: str = "one_device"
    tpu_address: str = ""
    num_length_buckets: int = 4
    jit_compile: bool = False
    mixed_precision: bool = False


MODEL_TYPES = ("dialoguecse", "siamese_s", "siamese_m")


def build_model(config: FinetuneConfig, bert_config, cls_id: int):
    if config.model_type == "dialoguecse":
        return DialogueCSEModel(
            bert_config, aggregation=config.aggregation, temperature=config.temperature,
            num_frozen_layers=config.num_frozen_layers, attention_hidden_size=config.attention_hidden_size,
            num_length_buckets=config.num_length_buckets,
        )
    if config.model_type in ("siamese_s", "siamese_m"):
        from dialoguecse_tf.models.siamese import SiameseBertModel

        return SiameseBertModel(
            bert_config, num_frozen_layers=config.num_frozen_layers,
            matching_hidden_size=config.matching_hidden_size, cls_id=cls_id,
        )
    raise ValueError(f"model_type must be one of {MODEL_TYPES}, got {config.model_type!r}")


def select_context_turns(batch: dict, num_context_turns: int) -> dict:
    """Keeps each record's `num_context_turns` context turns nearest to the response.

    Records written with more turns than a run uses (e.g. 5 for the paper's Figure 2 sweep)
    serve every smaller setting: turns are ranked by distance from the response, the turn
    before winning a tie, and the kept ones stay in dialogue order.
    """
    offsets = batch[schema.CONTEXT_TURN_OFFSET]
    if offsets.shape[1] == num_context_turns:
        return batch
    distance = tf.abs(offsets) * 2 + tf.cast(offsets > 0, offsets.dtype)
    distance = tf.where(batch[schema.CONTEXT_TURN_MASK] > 0, distance, tf.reduce_max(distance) + 1000)
    _, nearest = tf.math.top_k(-distance, k=num_context_turns)
    nearest = tf.sort(nearest, axis=-1)
    turn_features = (schema.CONTEXT_INPUT_IDS, schema.CONTEXT_INPUT_MASK, schema.CONTEXT_TURN_MASK,
                     schema.CONTEXT_TURN_OFFSET)
    return {**batch, **{name: tf.gather(batch[name], nearest, batch_dims=1) for name in turn_features}}


def select_negatives(batch: dict, num_negatives: int) -> dict:
    """Keeps the true response and the first `num_negatives` negatives of each record.

    Records may carry more negatives than a run uses (the authors' files carry 49), so one
    set of records serves every point of the paper's negatives sweep (Table 4).
    """
    keep = num_negatives + 1
    return {
        **batch,
        schema.CANDIDATE_INPUT_IDS: batch[schema.CANDIDATE_INPUT_IDS][:, :keep],
        schema.CANDIDATE_INPUT_MASK: batch[schema.CANDIDATE_INPUT_MASK][:, :keep],
    }


def contrastive_step(global_batch_size: int):
    def step_fn(model, batch, training):
        outputs = model(batch, training=training)
        similarities = outputs["similarities"]
        loss = tf.nn.compute_average_loss(outputs["per_example_loss"], global_batch_size=global_batch_size)
        metrics = {
            "positive_similarity": tf.reduce_mean(similarities[:, 0]),
            "positive_ranked_first": tf.reduce_mean(
                tf.cast(tf.equal(tf.argmax(similarities, axis=-1), 0), tf.float32)
            ),
        }
        return loss, metrics

    return step_fn


def make_evaluator(config: FinetuneConfig, model, tokenizer):
    """Evaluates the encoder being trained with the evaluation stage's own metrics."""
    if not (config.eval_select_file or config.eval_sts_file):
        return None
    from dialoguecse_tf.data.sr_builder import read_select_file
    from dialoguecse_tf.evaluation.evaluate import evaluate_sr, evaluate_sts
    from dialoguecse_tf.evaluation.sts import read_sts_file

    rows = read_select_file(config.eval_select_file) if config.eval_select_file else None
    pairs = read_sts_file(config.eval_sts_file) if config.eval_sts_file else None

    def evaluate(step):
        encoder = SentenceEncoder(model.backbone, tokenizer, pooling="mean")
        results = {}
        if rows is not None:
            results.update(evaluate_sr(encoder.encode, rows))
        if pairs is not None:
            results.update(evaluate_sts(encoder.encode, pairs))
        return {k: float(v) for k, v in results.items() if isinstance(v, (int, float))}

    return evaluate


def run_finetuning(config: FinetuneConfig, strategy=None, verbose: bool = True, on_log=None) -> dict:
    """Runs (or resumes) the contrastive stage; writes the encoder to `output_dir/encoder`."""
    # First: MultiWorkerMirroredStrategy has to exist before any op runs, and checking
    # the records runs some.
    strategy = strategy or training.create_strategy(config.distribution_strategy, config.tpu_address)
    files, spec, stats = schema.resolve_records(config.train_file, schema.RECORD_TYPE_CONTRASTIVE)
    schema.check_compatible(spec, max_seq_length=config.max_seq_length)
    for name in ("num_negatives", "num_context_turns"):
        if getattr(config, name) > getattr(spec, name):
            raise ValueError(
                f"{name}={getattr(config, name)} but the records in {os.path.dirname(files[0])} carry only "
                f"{getattr(spec, name)} (see {schema.RECORDS_INFO_FILE})"
            )
    num_train_steps = training.resolve_num_train_steps(
        config.num_train_steps, config.num_train_epochs,
        min(int(stats["samples_written"]), config.max_train_examples or int(stats["samples_written"])),
        config.train_batch_size
    )
    keras.utils.set_random_seed(config.random_seed)
    # Under MultiWorkerMirroredStrategy only the chief writes the run's outputs.
    chief = strategy.extended.should_checkpoint
    os.makedirs(config.output_dir, exist_ok=True)
    if chief:
        write_config(config, config.output_dir)

    if config.mixed_precision:
        training.enable_mixed_precision()
    start = load_or_initialize(config.init_checkpoint, config.bert_config_file, config.vocab_file,
                               config.do_lower_case, config.max_seq_length)
    with strategy.scope():
        model = build_model(config, start.config, start.tokenizer.cls_id)
        if start.backbone is not None:
            model.backbone.set_weights(start.backbone.get_weights())
        optimizer = training.create_optimizer(config.learning_rate, num_train_steps, config.num_warmup_steps,
                                              loss_scaling=config.mixed_precision)

    def dataset_fn(skip_batches):
        dataset = schema.read_dataset(files, spec, shuffle_files=True, seed=config.random_seed)
        if config.max_train_examples:
            # A fixed subset for the training-data-scale study (Figure 3): cached, so every
            # epoch sees the same examples.
            dataset = dataset.take(config.max_train_examples).cache()
        batches = training.make_dataset(dataset, config.train_batch_size, config.random_seed, skip_batches)
        # SiameseBERT_S matches the response with the single nearest context utterance.
        turns = 1 if config.model_type == "siamese_s" else config.num_context_turns
        return batches.map(lambda batch: select_negatives(select_context_turns(batch, turns), config.num_negatives))

    loop = training.LoopConfig(config.output_dir, num_train_steps, config.save_checkpoints_steps,
                               config.log_steps, eval_steps=config.eval_steps, jit_compile=config.jit_compile)
    logs = training.run_training_loop(
        strategy, model, optimizer, dataset_fn, contrastive_step(config.train_batch_size), loop,
        verbose, on_log, make_evaluator(config, model, start.tokenizer),
    )
    encoder_dir = os.path.join(config.output_dir, ENCODER_DIR)
    if training.writes_final_encoder(strategy, logs, encoder_dir):
        save_checkpoint(
            encoder_dir, model.backbone, start.config, start.tokenizer,
            metadata={"stage": "finetune", "model_type": config.model_type, "aggregation": config.aggregation,
                      "num_train_steps": num_train_steps, "final_logs": logs or {}},
        )
    return logs or {}
