"""The BERT encoder: a keras-hub `BertBackbone` built from a `BertConfig`, freezing, and the
one helper every model and inference path calls it through (`encode_sequences`).

The fast paths live here, so every objective gets them: padding trimmed to a batch's longest
sequence, and length buckets (a batch's sequences encoded in groups of similar length, each
group cut to its longest sequence).
"""

import keras
import keras_hub
import tensorflow as tf

from dialoguecse_tf.encoder.bert_config import BertConfig
from dialoguecse_tf.precision import DEFAULT_PRECISION, dtype_policy, precision_of


# BERT configs' GELU names -> whether the GELU is tanh-approximated.
_GELU_APPROXIMATE = {"gelu": True, "gelu_exact": False}


def activation_fn(name: str):
    if name in _GELU_APPROXIMATE:
        return lambda x, approximate=_GELU_APPROXIMATE[name]: keras.activations.gelu(x, approximate=approximate)
    return keras.activations.get(name)


# In bfloat16, TensorFlow's CPU kernels for elementwise ops convert every element to float32 and
# back, op by op: the feed-forward bias and GELU's erf chain and LayerNorm's moments took most of a
# bfloat16 forward pass while oneDNN ran its matrix products on the bfloat16 units. XLA fuses each
# such island into one pass. Only the islands are compiled: XLA's own CPU matrix product does not
# use the bfloat16 units (the whole encoder under XLA is slower in bfloat16,
# benchmarks/results/flops_bfloat16.json).
_XLA_BIAS_GELU = {
    approximate: tf.function(lambda x, bias, approximate=approximate: tf.nn.gelu(x + bias, approximate=approximate),
                             jit_compile=True)
    for approximate in (False, True)}


@tf.function(jit_compile=True)
def _xla_layer_normalization(inputs, gamma, beta, epsilon):
    return keras.ops.layer_normalization(inputs, gamma, beta, -1, epsilon)


def _xla_intermediate_dense_call(dense, hidden_act: str):
    """`dense`'s call (the feed-forward's first product, bias and GELU) with the bias and GELU as one
    XLA island, or None for an activation without one."""
    if hidden_act not in _GELU_APPROXIMATE:
        return None
    island = _XLA_BIAS_GELU[_GELU_APPROXIMATE[hidden_act]]

    def call(inputs, training=None):
        # Inside the layer's call, Keras casts the float32 variables to the compute dtype.
        product = keras.ops.matmul(inputs, dense.kernel)
        return island(product, tf.cast(tf.convert_to_tensor(dense.bias), product.dtype))
    return call


def _xla_layer_norm_call(layer):
    def call(inputs):
        return _xla_layer_normalization(inputs, tf.convert_to_tensor(layer.gamma), tf.convert_to_tensor(layer.beta),
                                        float(layer.epsilon))
    return call


def _override_call(layer, call) -> None:
    """Runs `layer` through `call` instead of its class's, or its own again when `call` is None."""
    if call:
        # object.__setattr__: a plain function attribute, kept out of Keras's layer tracking.
        object.__setattr__(layer, "call", call)
    elif "call" in vars(layer):
        object.__delattr__(layer, "call")


def layer_norms(backbone) -> list:
    norms = [backbone.embeddings_layer_norm]
    for layer in transformer_layers(backbone):
        norms += [layer._self_attention_layer_norm, layer._feedforward_layer_norm]
    return norms


def set_compiled_elementwise(backbone, compiled: bool) -> None:
    """Runs the backbone's feed-forward bias and GELU, and its LayerNorms, as XLA-compiled islands,
    or as plain TF ops.

    `build_backbone` compiles them in bfloat16 (where the plain ops are slow) and not in float32,
    whose numbers stay those of the plain ops. A SavedModel export turns them off: TF Serving runs
    XLA on CPU only behind its experimental --xla_cpu_compilation_enabled. Each island is compiled
    once per input shape it meets.

    Args:
      backbone: a backbone `build_backbone` made.
      compiled: bool, whether the islands are XLA-compiled.
    """
    hidden_act = backbone.bert_config.hidden_act
    activation = activation_fn(hidden_act)
    for layer in transformer_layers(backbone):
        dense = layer._feedforward_intermediate_dense
        dense.activation = activation
        _override_call(dense, compiled and _xla_intermediate_dense_call(dense, hidden_act))
    for norm in layer_norms(backbone):
        _override_call(norm, compiled and _xla_layer_norm_call(norm))


def build_backbone(config: BertConfig, name: str = "bert_backbone",
                   precision: str = DEFAULT_PRECISION) -> keras_hub.models.BertBackbone:
    """Builds a randomly initialised backbone whose numerics follow `config`.

    `BertBackbone` fixes a few details that BERT checkpoints vary (tanh-approximated
    GELU, one dropout rate, epsilon 1e-12, initializer range 0.02). A loaded checkpoint
    must run with the settings it was trained with, so those sublayer attributes are set
    from the config after construction; Keras 3 functional models call each layer anew on
    every forward pass, so the settings take effect.

    Args:
      config: BertConfig, the encoder's shape and numerics (activation, dropout rates,
        LayerNorm epsilon, initializer range).
      name: str, the backbone's Keras name (part of its weights' paths).
      precision: one of `precision.PRECISIONS`, its compute dtype ("bfloat16": Keras's
        "mixed_bfloat16" policy, bfloat16 compute with float32 variables, its GELU and LayerNorms
        as XLA-compiled islands: `set_compiled_elementwise`); "float32" leaves it to Keras's global
        policy, float32 unless changed. Not checked against the machine
        (`precision.check_precision`): the entry points do that.

    Returns:
      keras_hub.models.BertBackbone with random weights; `backbone.bert_config` is `config`
      (what models serialise it by). Its inputs are `token_ids`, `segment_ids` and
      `padding_mask` of shape [N, L], L at most `config.max_position_embeddings`; its
      outputs are in its compute dtype, its variables float32.

    Example:
      >>> backbone = build_backbone(BertConfig.from_json_file("bert_config.json"))
      >>> encode_sequences(backbone, token_ids, padding_mask).shape  # [N, L, hidden_size]
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
        dtype=None if precision == DEFAULT_PRECISION else dtype_policy(precision),
        name=name,
    )
    backbone.embeddings_layer_norm.epsilon = config.layer_norm_eps
    for layer in transformer_layers(backbone):
        layer._self_attention_layer._dropout_layer.rate = config.attention_probs_dropout_prob
        layer._self_attention_layer_norm.epsilon = config.layer_norm_eps
        layer._feedforward_layer_norm.epsilon = config.layer_norm_eps
    if config.initializer_range != 0.02:
        _reinitialize(backbone, config.initializer_range)
    # keras-hub's own config lacks the numerics set above; models serialise the backbone by this.
    backbone.bert_config = config
    set_compiled_elementwise(backbone, precision == "bfloat16")
    return backbone


def backbone_config(backbone) -> dict:
    """What a model's `get_config` stores for its backbone: the full BertConfig, and its precision
    unless float32."""
    precision = precision_of(backbone)
    return {"bert_config": backbone.bert_config.to_dict(), "name": backbone.name,
            **({"precision": precision} if precision != DEFAULT_PRECISION else {})}


def backbone_from_config(config: dict):
    """The backbone `backbone_config` describes (random weights, as every `from_config`)."""
    return build_backbone(BertConfig.from_dict(config["bert_config"]), name=config["name"],
                          precision=config.get("precision", DEFAULT_PRECISION))


def with_precision(backbone, precision: str):
    """`backbone` itself when it computes in `precision`, else a copy of it that does, holding the
    same weights (float32 variables in both), built by `build_backbone` from its `bert_config`.

    Args:
      backbone: a backbone `build_backbone` made.
      precision: one of `precision.PRECISIONS`.

    Returns:
      keras_hub.models.BertBackbone.
    """
    if precision_of(backbone) == precision:
        return backbone
    copy = build_backbone(backbone.bert_config, backbone.name, precision)
    copy.set_weights(backbone.get_weights())
    return copy


def _reinitialize(backbone, stddev: float) -> None:
    initializer = keras.initializers.TruncatedNormal(stddev=stddev)
    for variable in backbone.weights:
        leaf = variable.path.rsplit("/", 1)[-1]
        if leaf in ("kernel", "embeddings"):
            variable.assign(initializer(variable.shape))


def transformer_layers(backbone) -> list:
    return list(backbone.transformer_layers)


def embedding_layers(backbone) -> list:
    return [backbone.token_embedding, backbone.position_embedding, backbone.segment_embedding,
            backbone.embeddings_layer_norm]


def freeze_pooler(backbone) -> None:
    """Freezes BERT's [CLS] pooler, which no mean-pooled loss reaches.

    Left trainable it would only hand the optimizer None gradients; its weights are kept
    for checkpoints.
    """
    backbone.pooled_dense.trainable = False


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
    for layer in embedding_layers(backbone):
        layer.trainable = False
    for layer in transformer_layers(backbone)[:num_frozen_layers]:
        layer.trainable = False


def trim_padding(token_ids, padding_mask):
    """Drops the trailing columns that are padding in every row of the batch.

    Masked positions change neither attention nor the masked pooling, so the vectors stay
    the same while a batch of short sentences no longer pays for `max_seq_length`.
    """
    any_real = tf.reduce_any(padding_mask > 0, axis=0)
    positions = tf.range(1, tf.shape(padding_mask)[1] + 1)
    length = tf.maximum(tf.reduce_max(positions * tf.cast(any_real, positions.dtype)), 1)
    return token_ids[:, :length], padding_mask[:, :length]


def run_backbone(backbone, token_ids, padding_mask, training=False, segment_ids=None) -> dict:
    """Calls the backbone on one batch of sequences.

    Args:
      backbone: keras_hub.models.BertBackbone.
      token_ids: int Tensor of shape [N, L].
      padding_mask: int Tensor of shape [N, L], 1 for a real token.
      training: bool, whether dropout is on.
      segment_ids: int Tensor of shape [N, L], or None for zeros (single sentences).

    Returns:
      {"sequence_output": Tensor of shape [N, L, D], "pooled_output": Tensor of shape
      [N, D]}, in the backbone's compute dtype.
    """
    return backbone(
        {
            "token_ids": token_ids,
            "segment_ids": tf.zeros_like(token_ids) if segment_ids is None else segment_ids,
            "padding_mask": padding_mask,
        },
        training=training,
    )


def _bucket_sizes(num_sequences, num_buckets: int) -> list:
    """Near-equal group sizes; the batch size is static in training (drop_remainder)."""
    if num_sequences is None:
        raise ValueError("num_length_buckets > 1 needs a static batch size (batch with drop_remainder=True)")
    num_buckets = min(num_buckets, num_sequences)
    return [num_sequences // num_buckets + (i < num_sequences % num_buckets) for i in range(num_buckets)]


def check_num_length_buckets(num_length_buckets) -> int:
    if isinstance(num_length_buckets, bool) or not isinstance(num_length_buckets, int) or num_length_buckets < 1:
        raise ValueError(f"num_length_buckets must be a positive int, got {num_length_buckets!r}")
    return num_length_buckets


def encode_sequences(backbone, token_ids, padding_mask, training=False, num_length_buckets: int = 1):
    """BERT's last layer for a batch of sequences: the one backbone call of every model.

    With `num_length_buckets` > 1 the sequences are sorted by length and encoded in that
    many groups, each cut to its longest sequence; positions past a group's longest
    sequence are zero instead of BERT's output there. Every consumer masks padding
    positions, so a model's outputs do not change, only the work spent on padding.

    Args:
      backbone: keras_hub.models.BertBackbone.
      token_ids: int Tensor of shape [N, L], cast to int32.
      padding_mask: int Tensor of shape [N, L], 1 for a real token, cast to int32.
      training: bool, whether dropout is on.
      num_length_buckets: positive int, the groups the batch is encoded in (1: one call,
        no trimming).

    Returns:
      float32 Tensor of shape [N, L, D], the sequences in input order.

    Raises:
      ValueError: if `num_length_buckets` > 1 and N is not static (a batch without
        `drop_remainder=True`).

    Example:
      >>> encode_sequences(backbone, tf.constant([[2, 7, 3, 0]]), tf.constant([[1, 1, 1, 0]])).shape
      TensorShape([1, 4, 768])
    """
    token_ids = tf.cast(token_ids, tf.int32)
    padding_mask = tf.cast(padding_mask, tf.int32)
    if num_length_buckets == 1:
        return tf.cast(run_backbone(backbone, token_ids, padding_mask, training)["sequence_output"], tf.float32)
    seq_length = token_ids.shape[1]
    order = tf.argsort(tf.reduce_sum(padding_mask, axis=1))
    outputs = []
    for group in tf.split(order, _bucket_sizes(token_ids.shape[0], num_length_buckets)):
        ids, mask = trim_padding(tf.gather(token_ids, group), tf.gather(padding_mask, group))
        encoded = tf.cast(run_backbone(backbone, ids, mask, training)["sequence_output"], tf.float32)
        outputs.append(tf.pad(encoded, [[0, 0], [0, tf.shape(token_ids)[1] - tf.shape(encoded)[1]], [0, 0]]))
    sorted_outputs = tf.concat(outputs, axis=0)
    return tf.ensure_shape(tf.gather(sorted_outputs, tf.argsort(order)), [None, seq_length, None])


def encode_pairs(backbone, pair_ids, pair_mask, training=False, num_length_buckets: int = 1):
    """Both sides of every pair in one `encode_sequences` call, pair by pair.

    Args:
      backbone: keras_hub.models.BertBackbone.
      pair_ids: int Tensor of shape [B, 2, L].
      pair_mask: int Tensor of shape [B, 2, L], 1 for a real token.
      training: bool, whether dropout is on.
      num_length_buckets: positive int, see `encode_sequences`.

    Returns:
      (outputs, mask): float32 Tensor of shape [2B, L, D], rows 2b and 2b + 1 the two sides
      of pair b, and their int32 mask of shape [2B, L].
    """
    seq_length = pair_ids.shape[2]
    flat_mask = keras.ops.reshape(keras.ops.cast(pair_mask, "int32"), (-1, seq_length))
    flat_ids = keras.ops.reshape(keras.ops.cast(pair_ids, "int32"), (-1, seq_length))
    return encode_sequences(backbone, flat_ids, flat_mask, training, num_length_buckets), flat_mask
