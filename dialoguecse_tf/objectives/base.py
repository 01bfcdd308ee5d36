"""The interface between the one training stage (`stage.run_stage`) and an objective.

An objective says which records it reads and checks, builds its model around a backbone the
stage gives it, prepares each global batch, computes its loss and metrics from one step
(through the functions of `losses`), and says what it adds to the written encoder. Adding an
objective is one module with a subclass decorated with `register`, plus its name in the import of
`objectives/registry.py`; the shared tests (`tests/objectives/test_objectives.py`) then run on it.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from dialoguecse_tf.config_fields import check_values

# Filled by `register` as the objective modules load; `objectives.registry` looks names up.
REGISTRY: dict[str, type] = {}


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """For an objective without options of its own."""


class Objective:
    """Base class; subclasses set the class attributes and override the methods they need.

    Attributes:
      name: registry key, the `--objective` value.
      summary: one line for `--objective`'s help.
      paper: (what the method is called, its paper's citation, a link), which the exports' model
        cards cite; () for none.
      record_type: the type of the records it trains on (a `records.<type>.RECORD_TYPE_*`).
      options_class: a frozen dataclass of its own settings (fields made with
        `config_fields.field`, so flags and help come from it).
      training_defaults: defaults of shared training settings that differ by objective
        (e.g. batch size, learning rate): the paper's values for this objective.
      stage_name: what the written encoder's metadata calls the stage ("pretrain", "finetune").
      in_batch_negatives: the other examples of a batch are the negatives, so a batch must not
        repeat an example: the stage refuses records holding fewer examples than one batch
        (repeating them to fill it would make an example its own negative).
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    paper: ClassVar[tuple] = ()
    record_type: ClassVar[str]
    options_class: ClassVar[type] = NoOptions
    training_defaults: ClassVar[dict] = {}
    stage_name: ClassVar[str] = "finetune"
    in_batch_negatives: ClassVar[bool] = False

    def __init__(self, options=None):
        """Constructor for an objective.

        Args:
          options: an instance of `options_class`, or None for its defaults.

        Raises:
          TypeError: if `options` is not an `options_class`.
          ValueError: if an option is out of its field's range or choices.
        """
        self.options = self.options_class() if options is None else options
        if not isinstance(self.options, self.options_class):
            raise TypeError(f"objective {self.name!r} takes {self.options_class.__name__}, got "
                            f"{type(self.options).__name__}")
        check_values(self.options)

    def record_requirements(self) -> dict:
        """What the records must have been written with, beyond max_seq_length.

        Returns:
          dict, keyword arguments of `records.spec.check_compatible` (e.g. MLM's
          {"max_predictions_per_seq": 10}); {} by default.
        """
        return {}

    def check_records(self, spec, records_dir: str) -> None:
        """Checks the records against the options; may remember what `metadata` reports.

        Args:
          spec: the records' spec (a `record_type` spec class, read from records_info.json).
          records_dir: str, the records' folder, for the messages.

        Raises:
          ValueError: when the records cannot serve these options (e.g. fewer negatives).
        """

    def build_model(self, backbone, bert_config, tokenizer, num_length_buckets: int):
        """The training model around `backbone`, freezing included.

        Called in the strategy's scope, before the start checkpoint's weights are set.

        Args:
          backbone: keras_hub.models.BertBackbone from `build_backbone(bert_config)`.
          bert_config: encoder.bert_config.BertConfig of the backbone.
          tokenizer: encoder.tokenization.Tokenizer of the start checkpoint.
          num_length_buckets: positive int, see `backbone.encode_sequences`.

        Returns:
          keras.Model whose call the loss methods read.
        """
        raise NotImplementedError

    def initialize_from(self, model, start) -> None:
        """Copies weights beyond the backbone's from the start checkpoint (nothing by default).

        Args:
          model: what `build_model` returned, its backbone already holding the start's weights.
          start: checkpoints.LoadedCheckpoint; its `backbone` is None when training from scratch.
        """

    def create_optimizer(self, config, num_train_steps: int, model):
        """The optimizer of `model`, built in the strategy's scope; BERT's AdamW with warmup and
        linear decay by default.

        Args:
          config: stage_config.TrainConfig; reads learning_rate, num_warmup_steps and
            precision (float16 scales the loss).
          num_train_steps: int, the steps of the run (the decay's length).
          model: what `build_model` returned.

        Returns:
          keras.optimizers.Optimizer.
        """
        from dialoguecse_tf.training import optimizers

        return optimizers.create_optimizer(config.learning_rate, num_train_steps, config.num_warmup_steps,
                                           loss_scaling=config.precision == "float16")

    def prepare_batch(self, batch: dict) -> dict:
        """Applied to each global batch of records (a tf.data map) before it is split among
        replicas; the batch itself by default.

        Args:
          batch: {feature name: Tensor of shape [B, ...]}, B the global batch size, as
            `records.reader.read_dataset` parses `record_type`'s records.

        Returns:
          dict of the same form (e.g. fewer turns or negatives kept).
        """
        return batch

    def compute_loss(self, model, batch: dict, training: bool, global_batch_size: int):
        """One replica's loss and metrics of a step, from `embed` or `example_losses`.

        Args:
          model: what `build_model` returned.
          batch: {feature name: Tensor of shape [b, ...]}, this replica's b examples.
          training: bool, whether dropout is on.
          global_batch_size: int, the examples of all replicas in one step.

        Returns:
          (loss, metrics): float32 scalar Tensor, this replica's share of the global batch's
          loss (the replicas' shares add up to it), and {name: float32 scalar Tensor}, each
          metric's mean over this replica's examples.
        """
        if self.supports_embedding_chunks():
            return self.loss_of_embeddings(self.embed(model, batch, training), global_batch_size)
        import tensorflow as tf

        from dialoguecse_tf import losses

        terms, metric_terms = self.example_losses(model, batch, training)
        denominators = losses.mean_denominators(self.example_weights(batch), tf.shape(terms)[0], global_batch_size)
        return losses.example_means(terms, metric_terms, denominators)

    # An objective defines one of two forms of its loss, which say how a batch too large for one
    # pass through the model (`--max_examples_per_pass`) is split without changing the update.

    def embed(self, model, batch: dict, training: bool):
        """The embeddings of this replica's examples, all the loss reads of the model.

        For a loss comparing the whole batch's embeddings (in-batch negatives), with
        `loss_of_embeddings`: the stage can then embed the batch in parts (GradCache,
        `training.grad_cache`).

        Args:
          model: what `build_model` returned.
          batch: {feature name: Tensor of shape [b, ...]}, this replica's b examples (or a
            part of them).
          training: bool, whether dropout is on.

        Returns:
          float Tensor of shape [b, ...], one row per example (DSE's and SimCSE's: [b, 2, E],
          the pair's two sides).
        """
        raise NotImplementedError

    def loss_of_embeddings(self, embeddings, global_batch_size: int):
        """`compute_loss`'s result from `embed`'s output.

        Args:
          embeddings: float Tensor of shape [b, ...], `embed`'s output for this replica's whole
            batch.
          global_batch_size: int, the examples of all replicas in one step.

        Returns:
          (loss, metrics), as `compute_loss`.
        """
        raise NotImplementedError

    def example_losses(self, model, batch: dict, training: bool):
        """(loss terms [b], {metric name: terms [b]}) of this replica's b examples, for a loss that
        is a sum of per-example terms (no in-batch negatives).

        The loss is the global batch's sum of the loss terms over the sum of `example_weights`,
        each metric the replica batch's sum of its terms over the replica's sum of the weights;
        an example's term is its weight times its own value (MLM: sums over its masked
        positions). The stage can then accumulate a batch's gradient a part at a time
        (`training.accumulation`).

        Args:
          model: what `build_model` returned.
          batch: {feature name: Tensor of shape [b, ...]}, this replica's b examples (or a
            part of them).
          training: bool, whether dropout is on.

        Returns:
          (terms, metric_terms): float Tensor of shape [b], and {name: float Tensor of shape
          [b]}.
        """
        raise NotImplementedError

    def example_weights(self, batch: dict):
        """Each example's weight in `example_losses`' means.

        Args:
          batch: {feature name: Tensor of shape [b, ...]}, this replica's whole batch.

        Returns:
          float Tensor of shape [b], or None (the default): every example weighs 1.
        """
        return None

    def supports_embedding_chunks(self) -> bool:
        """Whether the loss is a function of per-example embeddings (`embed`)."""
        return type(self).embed is not Objective.embed

    def supports_accumulation(self) -> bool:
        """Whether the loss is a sum of per-example terms (`example_losses`)."""
        return type(self).example_losses is not Objective.example_losses

    def trains_encoder(self) -> bool:
        """Whether a run trains some of the encoder; False for one that trains only what
        `encoder_extras` writes beside it (MLM's `head_only`)."""
        return True

    def encoder_extras(self, model) -> dict:
        """Extra keyword arguments of `checkpoints.save_checkpoint`.

        Args:
          model: the trained model `build_model` returned.

        Returns:
          dict (e.g. MLM's {"mlm_head": Google-named arrays}); {} by default.
        """
        return {}

    def metadata(self) -> dict:
        """What the written encoder records about how it was trained, beyond the objective's name.

        Returns:
          dict of JSON values, merged into the checkpoint marker's metadata; {} by default.
        """
        return {}

    def sentence_pooling(self) -> str:
        """The pooling (`pooling.POOLING_MODES`) of the written encoder's sentence embedding: the
        stage evaluates with it and records it in the encoder's metadata, where every inference
        path reads it (`checkpoints.sentence_pooling`). Mean pooling, the papers' evaluation.

        Returns:
          str, one of `pooling.POOLING_MODES`; "mean" by default.
        """
        return "mean"


def register(objective_class: type) -> type:
    """Class decorator adding an objective to the registry under its `name`.

    Args:
      objective_class: an `Objective` subclass with its class attributes set.

    Returns:
      `objective_class` itself.

    Raises:
      ValueError: if another objective is registered under the same name.
    """
    if objective_class.name in REGISTRY:
        raise ValueError(f"objective {objective_class.name!r} is registered twice")
    REGISTRY[objective_class.name] = objective_class
    return objective_class
