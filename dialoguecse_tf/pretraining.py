"""MLM continued pretraining (paper, section 5.3): model, loss, and the stage itself."""

import dataclasses
import os

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from dialoguecse_tf import schema, training
from dialoguecse_tf.bert_config import BertConfig
from dialoguecse_tf.checkpoints import load_or_initialize, save_checkpoint
from dialoguecse_tf.config_io import write_config
from dialoguecse_tf.encoder import activation_fn, build_backbone

ENCODER_DIR = "encoder"

# Google's names for the MLM head, as `save_checkpoint` writes them and loaders return them.
_HEAD_NAMES = {
    "cls/predictions/transform/dense/kernel": ("_intermediate_dense", "kernel"),
    "cls/predictions/transform/dense/bias": ("_intermediate_dense", "bias"),
    "cls/predictions/transform/LayerNorm/gamma": ("_intermediate_layer_norm", "gamma"),
    "cls/predictions/transform/LayerNorm/beta": ("_intermediate_layer_norm", "beta"),
    "cls/predictions/output_bias": (None, "_bias"),
}


@keras.saving.register_keras_serializable(package="dialoguecse_tf")
class BertPretrainer(keras.Model):
    """The backbone plus BERT's masked-LM head, its output projection tied to the embeddings."""

    def __init__(self, bert_config, **kwargs):
        super().__init__(**kwargs)
        if isinstance(bert_config, dict):
            bert_config = BertConfig.from_dict(bert_config)
        self.bert_config = bert_config
        self.backbone = build_backbone(bert_config)
        self.mlm_head = keras_hub.layers.MaskedLMHead(
            token_embedding=self.backbone.token_embedding,
            intermediate_activation=activation_fn(bert_config.hidden_act),
            layer_norm_epsilon=bert_config.layer_norm_eps,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=bert_config.initializer_range),
            name="mlm_head",
        )
        self.mlm_head.build((None, None, bert_config.hidden_size))

    def call(self, inputs, training=False):
        outputs = self.backbone(
            {
                "token_ids": inputs[schema.INPUT_IDS],
                "segment_ids": inputs[schema.SEGMENT_IDS],
                "padding_mask": inputs[schema.INPUT_MASK],
            },
            training=training,
        )
        return self.mlm_head(outputs["sequence_output"], mask_positions=inputs[schema.MASKED_LM_POSITIONS])

    def get_config(self):
        return {**super().get_config(), "bert_config": self.bert_config.to_dict()}

    def head_variables(self) -> dict:
        """The head's weights under Google's names (what `save_checkpoint` stores)."""
        return {name: np.asarray(_head_variable(self.mlm_head, path).numpy()) for name, path in _HEAD_NAMES.items()}

    def assign_head(self, variables: dict, source: str) -> None:
        missing = sorted(set(_HEAD_NAMES) - set(variables))
        if missing:
            raise ValueError(f"{source}: incomplete MLM head, missing {missing}")
        for name, path in _HEAD_NAMES.items():
            target = _head_variable(self.mlm_head, path)
            value = np.asarray(variables[name])
            if value.shape != tuple(target.shape):
                raise ValueError(f"{source}: mis-shaped {name}: {value.shape}, expected {tuple(target.shape)}")
            target.assign(value)


def _head_variable(head, path):
    layer_name, attribute = path
    owner = head if layer_name is None else getattr(head, layer_name)
    return getattr(owner, attribute)


def mlm_loss_and_metrics(model, batch, training):
    """Token-level mean cross-entropy over the masked positions of the global batch.

    Each replica divides its sum by the masked-token count of the whole global batch, so
    the replicas' losses (and gradients) add up to the global mean, as on one device.
    """
    # float32 for the softmax even when the model computes in float16 (mixed precision).
    logits = tf.cast(model(batch, training=training), tf.float32)
    labels = batch[schema.MASKED_LM_IDS]
    weights = batch[schema.MASKED_LM_WEIGHTS]
    per_token = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    local_count = tf.reduce_sum(weights)
    context = tf.distribute.get_replica_context()
    global_count = context.all_reduce(tf.distribute.ReduceOp.SUM, local_count)
    loss = tf.reduce_sum(per_token * weights) / tf.maximum(global_count, 1.0)
    correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=labels.dtype), labels), tf.float32)
    accuracy = tf.reduce_sum(correct * weights) / tf.maximum(local_count, 1.0)
    return loss, {"mlm_accuracy": accuracy}


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    input_file: tuple
    output_dir: str
    bert_config_file: str | None = None
    init_checkpoint: str | None = None
    vocab_file: str | None = None
    do_lower_case: bool = True
    max_seq_length: int = 50
    max_predictions_per_seq: int = 10
    train_batch_size: int = 50
    learning_rate: float = 2e-5
    num_train_steps: int | None = None
    num_train_epochs: float | None = None
    num_warmup_steps: int = 0
    save_checkpoints_steps: int = 1000
    log_steps: int = 10
    random_seed: int = 12345
    distribution_strategy: str = "one_device"
    tpu_address: str = ""
    jit_compile: bool = False
    mixed_precision: bool = False


def run_pretraining(config: PretrainConfig, strategy=None, verbose: bool = True, on_log=None) -> dict:
    """Runs (or resumes) the MLM stage; writes the encoder checkpoint to `output_dir/encoder`."""
    # First: MultiWorkerMirroredStrategy has to exist before any op runs, and checking
    # the records runs some.
    strategy = strategy or training.create_strategy(config.distribution_strategy, config.tpu_address)
    files, spec, stats = schema.resolve_records(config.input_file, schema.RECORD_TYPE_MLM)
    schema.check_compatible(spec, max_seq_length=config.max_seq_length,
                            max_predictions_per_seq=config.max_predictions_per_seq)
    num_train_steps = training.resolve_num_train_steps(
        config.num_train_steps, config.num_train_epochs, int(stats["samples_written"]), config.train_batch_size
    )
    keras.utils.set_random_seed(config.random_seed)
    # Under MultiWorkerMirroredStrategy only the chief writes the run's outputs.
    chief = strategy.extended.should_checkpoint
    os.makedirs(config.output_dir, exist_ok=True)
    if chief:
        write_config(config, config.output_dir)

    if config.mixed_precision:
        training.enable_mixed_precision()
    with strategy.scope():
        model, tokenizer = _build_model(config)
        optimizer = training.create_optimizer(config.learning_rate, num_train_steps, config.num_warmup_steps,
                                              loss_scaling=config.mixed_precision)

    def dataset_fn(skip_batches):
        dataset = schema.read_dataset(files, spec, shuffle_files=True, seed=config.random_seed)
        return training.make_dataset(dataset, config.train_batch_size, config.random_seed, skip_batches)

    loop = training.LoopConfig(config.output_dir, num_train_steps, config.save_checkpoints_steps, config.log_steps,
                               jit_compile=config.jit_compile)
    logs = training.run_training_loop(strategy, model, optimizer, dataset_fn, mlm_loss_and_metrics, loop, verbose, on_log)
    encoder_dir = os.path.join(config.output_dir, ENCODER_DIR)
    if training.writes_final_encoder(strategy, logs, encoder_dir):
        save_checkpoint(
            encoder_dir, model.backbone, model.bert_config, tokenizer,
            metadata={"stage": "pretrain", "num_train_steps": num_train_steps, "final_logs": logs or {}},
            mlm_head=model.head_variables(),
        )
    return logs or {}


def _build_model(config: PretrainConfig):
    start = load_or_initialize(config.init_checkpoint, config.bert_config_file, config.vocab_file,
                               config.do_lower_case, config.max_seq_length)
    model = BertPretrainer(start.config)
    if start.backbone is not None:
        model.backbone.set_weights(start.backbone.get_weights())
        if start.mlm_head:
            model.assign_head(start.mlm_head, config.init_checkpoint)
        else:
            print(f"[pretrain] {config.init_checkpoint} has no MLM head: a fresh one is initialised")
    return model, start.tokenizer
