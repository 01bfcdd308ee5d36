"""BERT's masked-LM head around a backbone: the model of MLM continued pretraining."""

import keras
import keras_hub
import numpy as np

from dialoguecse_tf.encoder.backbone import activation_fn, backbone_config, backbone_from_config, run_backbone
from dialoguecse_tf.encoder.bert_config import BertConfig
from dialoguecse_tf.records.mlm import INPUT_IDS, INPUT_MASK, MASKED_LM_POSITIONS, SEGMENT_IDS

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
    """`backbone` plus BERT's masked-LM head, its output projection tied to the embeddings.

    Example:
      >>> pretrainer = BertPretrainer(build_backbone(bert_config), bert_config)
      >>> logits = pretrainer(batch)  # a batched MlmRecordSpec dict -> [B, P, V]
    """

    def __init__(self, backbone, bert_config, **kwargs):
        """Constructor for BertPretrainer.

        Args:
          backbone: a keras-hub `BertBackbone` from `build_backbone`; the head's output
            projection is its token embedding.
          bert_config: the BertConfig (or its dict) that gives the head's activation,
            LayerNorm epsilon and initialiser range.
          **kwargs: keras.Model's (name, dtype).
        """
        super().__init__(**kwargs)
        if isinstance(bert_config, dict):
            bert_config = BertConfig.from_dict(bert_config)
        self.bert_config = bert_config
        self.backbone = backbone
        self.mlm_head = keras_hub.layers.MaskedLMHead(
            token_embedding=backbone.token_embedding,
            intermediate_activation=activation_fn(bert_config.hidden_act),
            layer_norm_epsilon=bert_config.layer_norm_eps,
            kernel_initializer=keras.initializers.TruncatedNormal(stddev=bert_config.initializer_range),
            # The backbone's precision, as the embedding table it projects onto: its logits are
            # cast to float32 before the softmax (`losses.masked_lm_per_token_loss`).
            dtype=backbone.dtype_policy,
            name="mlm_head",
        )
        self.mlm_head.build((None, None, bert_config.hidden_size))

    def call(self, inputs, training=False):
        """The masked-LM logits at the batch's masked positions.

        Args:
          inputs: the batched `MlmRecordSpec` dict: `input_ids`, `input_mask` and
            `segment_ids` int Tensors of shape [B, L], `masked_lm_positions` of shape [B, P];
            other keys are ignored.
          training: bool, whether dropout is on.

        Returns:
          float Tensor of shape [B, P, V], V the vocabulary size.
        """
        outputs = run_backbone(self.backbone, inputs[INPUT_IDS], inputs[INPUT_MASK], training,
                               segment_ids=inputs[SEGMENT_IDS])
        return self.mlm_head(outputs["sequence_output"], mask_positions=inputs[MASKED_LM_POSITIONS])

    def get_config(self):
        return {**super().get_config(), "backbone": backbone_config(self.backbone),
                "bert_config": self.bert_config.to_dict()}

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "backbone": backbone_from_config(config["backbone"])})

    def head_variables(self) -> dict:
        """The head's weights under Google's names (what `save_checkpoint` stores).

        Returns:
          {Google name (`cls/predictions/...`): np.ndarray}.
        """
        return {name: np.asarray(_head_variable(self.mlm_head, path).numpy()) for name, path in _HEAD_NAMES.items()}

    def assign_head(self, variables: dict, source: str) -> None:
        """Sets the head's weights from a checkpoint's variables.

        Args:
          variables: {Google name: array}, as `head_variables` returns and loaders read;
            other names are ignored.
          source: str, where they come from, for the error messages.

        Raises:
          ValueError: if a head weight is missing or mis-shaped.
        """
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
