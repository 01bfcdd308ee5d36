"""The BERT encoder: a keras-hub `BertBackbone` built from a `BertConfig`, and freezing."""

import keras
import keras_hub

from dialoguecse_tf.bert_config import BertConfig


def activation_fn(name: str):
    if name == "gelu":
        return lambda x: keras.activations.gelu(x, approximate=True)
    if name == "gelu_exact":
        return lambda x: keras.activations.gelu(x, approximate=False)
    return keras.activations.get(name)


def build_backbone(config: BertConfig, name: str = "bert_backbone") -> keras_hub.models.BertBackbone:
    """Builds a randomly initialised backbone whose numerics follow `config`.

    `BertBackbone` fixes a few details that BERT checkpoints vary (tanh-approximated
    GELU, one dropout rate, epsilon 1e-12, initializer range 0.02). A loaded checkpoint
    must run with the settings it was trained with, so those sublayer attributes are set
    from the config after construction; Keras 3 functional models call each layer anew on
    every forward pass, so the settings take effect.
    """
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size,
        num_layers=config.num_hidden_layers,
        num_heads=config.num_attention_heads,
        hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size,
        dropout=config.hidden_dropout_prob,
        max_sequence_length=config.max_position_embeddings,
        num_segments=config.type_vocab_size,
        name=name,
    )
    activation = activation_fn(config.hidden_act)
    backbone.get_layer("embeddings_layer_norm").epsilon = config.layer_norm_eps
    for layer in transformer_layers(backbone):
        layer._feedforward_intermediate_dense.activation = activation
        layer._self_attention_layer._dropout_layer.rate = config.attention_probs_dropout_prob
        layer._self_attention_layer_norm.epsilon = config.layer_norm_eps
        layer._feedforward_layer_norm.epsilon = config.layer_norm_eps
    if config.initializer_range != 0.02:
        _reinitialize(backbone, config.initializer_range)
    return backbone


def _reinitialize(backbone, stddev: float) -> None:
    initializer = keras.initializers.TruncatedNormal(stddev=stddev)
    for variable in backbone.weights:
        leaf = variable.path.rsplit("/", 1)[-1]
        if leaf in ("kernel", "embeddings"):
            variable.assign(initializer(variable.shape))


def transformer_layers(backbone) -> list:
    return [backbone.get_layer(f"transformer_layer_{i}") for i in range(backbone.num_layers)]


EMBEDDING_LAYER_NAMES = (
    "token_embedding",
    "position_embedding",
    "segment_embedding",
    "embeddings_layer_norm",
)


def freeze_bottom_layers(backbone, num_frozen_layers: int) -> None:
    """Freezes the embeddings and the bottom `num_frozen_layers` transformer layers.

    The paper (section 5.3) freezes the bottom 6 layers of BERT in the contrastive stage
    to prevent catastrophic forgetting; the embeddings sit below them, so they freeze too.
    `num_frozen_layers=0` leaves everything trainable.
    """
    if not 0 <= num_frozen_layers <= backbone.num_layers:
        raise ValueError(
            f"num_frozen_layers must be in [0, {backbone.num_layers}] for this "
            f"{backbone.num_layers}-layer encoder, got {num_frozen_layers}"
        )
    if num_frozen_layers == 0:
        return
    for name in EMBEDDING_LAYER_NAMES:
        backbone.get_layer(name).trainable = False
    for layer in transformer_layers(backbone)[:num_frozen_layers]:
        layer.trainable = False
