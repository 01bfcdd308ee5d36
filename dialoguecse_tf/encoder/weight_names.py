"""The one table of BERT weight names: Google's TF1 names, HuggingFace's, and where each weight
lives in the keras-hub backbone (cf. keras-hub's `convert_bert.py`).

Every checkpoint form goes through it: the Google and project checkpoints are read and written
under the Google names, a HuggingFace `model.safetensors` is read into them (`hf_to_google`) and
the HuggingFace export writes them back out (`google_to_hf`), so loading and exporting are one
mapping read in two directions. A Google `.../kernel` is `x @ W` ([in, out]); HuggingFace keeps
torch's Linear layout ([out, in]), so exactly the kernels are transposed between the two.

Rows of a transformer layer are named relative to `bert/encoder/layer_{i}/` (Google) and
`encoder.layer.{i}.` (HuggingFace); their keras-hub place is an attribute path in the layer.
"""

import dataclasses
import re

from dialoguecse_tf.encoder.backbone import transformer_layers

MLM_HEAD_PREFIX = "cls/predictions/"

# (Google name, HuggingFace name, backbone layer, attribute of that layer)
_EMBEDDING_ROWS = (
    ("bert/embeddings/word_embeddings", "embeddings.word_embeddings.weight", "token_embedding", "embeddings"),
    ("bert/embeddings/position_embeddings", "embeddings.position_embeddings.weight", "position_embedding",
     "position_embeddings"),
    ("bert/embeddings/token_type_embeddings", "embeddings.token_type_embeddings.weight", "segment_embedding",
     "embeddings"),
    ("bert/embeddings/LayerNorm/gamma", "embeddings.LayerNorm.weight", "embeddings_layer_norm", "gamma"),
    ("bert/embeddings/LayerNorm/beta", "embeddings.LayerNorm.bias", "embeddings_layer_norm", "beta"),
)
# (Google name under the layer, HuggingFace name under the layer, attribute path in keras-hub's layer)
_LAYER_ROWS = (
    ("attention/self/query/kernel", "attention.self.query.weight", ("_self_attention_layer", "query_dense", "kernel")),
    ("attention/self/query/bias", "attention.self.query.bias", ("_self_attention_layer", "query_dense", "bias")),
    ("attention/self/key/kernel", "attention.self.key.weight", ("_self_attention_layer", "key_dense", "kernel")),
    ("attention/self/key/bias", "attention.self.key.bias", ("_self_attention_layer", "key_dense", "bias")),
    ("attention/self/value/kernel", "attention.self.value.weight", ("_self_attention_layer", "value_dense", "kernel")),
    ("attention/self/value/bias", "attention.self.value.bias", ("_self_attention_layer", "value_dense", "bias")),
    ("attention/output/dense/kernel", "attention.output.dense.weight",
     ("_self_attention_layer", "output_dense", "kernel")),
    ("attention/output/dense/bias", "attention.output.dense.bias", ("_self_attention_layer", "output_dense", "bias")),
    ("attention/output/LayerNorm/gamma", "attention.output.LayerNorm.weight", ("_self_attention_layer_norm", "gamma")),
    ("attention/output/LayerNorm/beta", "attention.output.LayerNorm.bias", ("_self_attention_layer_norm", "beta")),
    ("intermediate/dense/kernel", "intermediate.dense.weight", ("_feedforward_intermediate_dense", "kernel")),
    ("intermediate/dense/bias", "intermediate.dense.bias", ("_feedforward_intermediate_dense", "bias")),
    ("output/dense/kernel", "output.dense.weight", ("_feedforward_output_dense", "kernel")),
    ("output/dense/bias", "output.dense.bias", ("_feedforward_output_dense", "bias")),
    ("output/LayerNorm/gamma", "output.LayerNorm.weight", ("_feedforward_layer_norm", "gamma")),
    ("output/LayerNorm/beta", "output.LayerNorm.bias", ("_feedforward_layer_norm", "beta")),
)
_POOLER_ROWS = (
    ("bert/pooler/dense/kernel", "pooler.dense.weight", "pooled_dense", "kernel"),
    ("bert/pooler/dense/bias", "pooler.dense.bias", "pooled_dense", "bias"),
)
# The masked-LM head of Google's pretraining checkpoints and HuggingFace's BertForPreTraining; not
# part of the backbone (`models.mlm` places it in the pretrainer).
_MLM_HEAD_ROWS = (
    ("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight"),
    ("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias"),
    ("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight"),
    ("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias"),
    ("cls/predictions/output_bias", "cls.predictions.bias"),
)

_LAYER_PREFIX = "bert/encoder/layer_"
_HF_LAYER = re.compile(r"encoder\.layer\.(\d+)\.(.+)")
_GOOGLE_LAYER = re.compile(r"bert/encoder/layer_(\d+)/(.+)")
_FIXED_TO_HF = {row[0]: row[1] for row in _EMBEDDING_ROWS + _POOLER_ROWS + _MLM_HEAD_ROWS}
_FIXED_FROM_HF = {hf: google for google, hf in _FIXED_TO_HF.items()}
_LAYER_TO_HF = {google: hf for google, hf, _ in _LAYER_ROWS}
_LAYER_FROM_HF = {hf: google for google, hf in _LAYER_TO_HF.items()}
# HuggingFace checkpoints keep buffers and heads the encoder has no use for; older ones name the
# layer norms' weights after TF's gamma and beta.
_HF_SKIPPED_PREFIXES = ("cls.predictions.decoder.", "cls.seq_relationship.")
_HF_LEGACY_NORM_LEAVES = {".LayerNorm.gamma": ".LayerNorm.weight", ".LayerNorm.beta": ".LayerNorm.bias"}


@dataclasses.dataclass(frozen=True)
class BackboneWeight:
    name: str  # Google TF1 variable name
    variable: object  # the keras variable
    keras_shape: tuple


def backbone_weights(backbone) -> list:
    """Every weight of a keras-hub `BertBackbone` under its Google TF1 name.

    Args:
      backbone: a keras-hub `BertBackbone` (`backbone.build_backbone`).

    Returns:
      `BackboneWeight`s in the table's order: embeddings, each transformer layer, the pooler. The
      keras shapes differ from Google's 2-D layout only by a reshape (attention kernels
      [H, heads, head] and [heads, head, H], attention biases [heads, head]).
    """
    rows = []

    def add(name, variable):
        rows.append(BackboneWeight(name, variable, tuple(variable.shape)))

    for name, _, layer, attribute in _EMBEDDING_ROWS:
        add(name, getattr(backbone.get_layer(layer), attribute))
    for index, layer in enumerate(transformer_layers(backbone)):
        for name, _, path in _LAYER_ROWS:
            variable = layer
            for attribute in path:
                variable = getattr(variable, attribute)
            add(f"{_LAYER_PREFIX}{index}/{name}", variable)
    for name, _, layer, attribute in _POOLER_ROWS:
        add(name, getattr(backbone.get_layer(layer), attribute))
    return rows


def google_to_hf(name: str) -> tuple:
    """The HuggingFace name of a Google-named encoder or MLM-head weight.

    Args:
      name: a Google TF1 variable name, e.g. "bert/encoder/layer_0/attention/self/query/kernel".

    Returns:
      (HuggingFace `BertModel` tensor name, whether the array is transposed between the two).

    Raises:
      ValueError: `name` is no weight of the table.
    """
    layer = _GOOGLE_LAYER.fullmatch(name)
    if layer and layer.group(2) in _LAYER_TO_HF:
        hf_name = f"encoder.layer.{layer.group(1)}.{_LAYER_TO_HF[layer.group(2)]}"
    elif name in _FIXED_TO_HF:
        hf_name = _FIXED_TO_HF[name]
    else:
        raise ValueError(f"not an encoder variable: {name}")
    return hf_name, name.endswith("/kernel")


def hf_to_google(name: str):
    """The Google name of a HuggingFace BERT tensor, or None for one the encoder does not use.

    Args:
      name: a tensor name of a HuggingFace `model.safetensors` (`BertModel`, or with the "bert."
        prefix of `BertForPreTraining` and the task models).

    Returns:
      (Google TF1 variable name, whether the array is transposed between the two); None for
      position-id buffers and the decoder and next-sentence heads.

    Raises:
      ValueError: `name` is no BERT weight.
    """
    for prefix in ("bert.", "model."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    if name.endswith("position_ids") or name.startswith(_HF_SKIPPED_PREFIXES):
        return None
    for legacy, current in _HF_LEGACY_NORM_LEAVES.items():
        if name.endswith(legacy):
            name = name[: -len(legacy)] + current
    layer = _HF_LAYER.fullmatch(name)
    if layer and layer.group(2) in _LAYER_FROM_HF:
        google_name = f"{_LAYER_PREFIX}{layer.group(1)}/{_LAYER_FROM_HF[layer.group(2)]}"
    elif name in _FIXED_FROM_HF:
        google_name = _FIXED_FROM_HF[name]
    else:
        raise ValueError(f"unexpected HuggingFace tensor {name}")
    return google_name, google_name.endswith("/kernel")
