"""Exports of a trained encoder that other stacks load with their own one-line loaders.

- HuggingFace (`export_huggingface`): a BERT folder (`config.json`, `model.safetensors`,
  `vocab.txt`, tokenizer files) for `transformers.AutoModel.from_pretrained`, plus the
  sentence-transformers modules (`modules.json`, `1_Pooling/`), so
  `SentenceTransformer(folder)` returns the vectors `SentenceEncoder.encode()` returns (same
  pooling, same maximum length). HuggingFace has both GELU forms ("gelu" is exact, "gelu_new"
  the tanh approximation), so every BertConfig exports without numeric change.
- keras-hub (`export_keras_hub`): a preset folder for `keras_hub.models.BertBackbone.from_preset`
  and `keras_hub.models.BertTokenizer.from_preset`. keras-hub's BertBackbone fixes GELU to the
  tanh approximation and the layer-norm epsilon to 1e-12; an encoder with other numerics (every
  model started from all-MiniLM-L6-v2, whose GELU is exact) computes slightly different vectors
  under keras-hub, so its export is refused unless `allow_numeric_drift`, and the drift measured
  on seeded random token sequences is written to the export's `dialoguecse_export.json`.

Both exports tokenize as data prep, `encode()` and the SavedModel do (NFKC_Casefold when
lower-casing, see `tokenization`): the HuggingFace folder's `tokenizer.json` carries
`tokenization.huggingface_normalizer`, which splits every code point alike except about 250 that
the `tokenizers` Unicode tables do not know. keras-hub's tokenizer strips accents before it
case-folds, in that fixed order, so it still differs where NFKC composes what NFD took apart:
Hangul syllables (it keeps them whole, this project splits them into jamo), `ǅ`-like digraphs
and spacing accents such as `¨`, about 15,500 code points in all.

Both folders carry `dialoguecse_export.json` (the source, the pooling, the full BertConfig) and a
README.md model card (`model_card`: what the checkpoint's run records, and how to load the folder).
The HuggingFace tensor names are `encoder.weight_names`' table, the one the loaders read.
The pooling is the checkpoint's own (`checkpoints.sentence_pooling`) unless one is asked for;
`pooler` (BERT's pooler output) reaches sentence-transformers as CLS pooling followed by a
`Dense` module of the pooler's weights with tanh.
`checkpoints.load_checkpoint` reloads either with the original numerics (a HuggingFace
`config.json` names them itself; for keras-hub the info file does); exporting that load again
writes the same weights bit for bit.
"""

import dataclasses
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from dialoguecse_tf.encoder.bert_config import BertConfig
from dialoguecse_tf.encoder.checkpoints import (
    FORMAT_KERAS_HUB,
    HF_CONFIG_FILE,
    HF_WEIGHTS_FILE,
    VOCAB_FILE,
    backbone_to_tf1_variables,
    load_checkpoint,
    sentence_pooling,
)
from dialoguecse_tf.encoder.pooling import POOLING_MODES
from dialoguecse_tf.encoder.tokenization import huggingface_normalizer
from dialoguecse_tf.encoder.weight_names import google_to_hf
from dialoguecse_tf.io_utils import write_json
from dialoguecse_tf.serving.layout import EXPORT_INFO_FILE
from dialoguecse_tf.serving.model_card import card, checkpoint_facts, write_card

FORMAT_HUGGINGFACE = "huggingface"
EXPORT_FORMATS = (FORMAT_HUGGINGFACE, FORMAT_KERAS_HUB)

# This project's activation name -> HuggingFace's name for the same function.
_HF_ACTIVATION_NAMES = {"gelu": "gelu_new", "gelu_exact": "gelu", "relu": "relu"}
# What keras-hub's BertBackbone computes whatever its config says.
_KERAS_HUB_NUMERICS = {"hidden_act": "gelu", "layer_norm_eps": 1e-12}
_SPECIAL_TOKENS = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]",
                   "cls_token": "[CLS]", "mask_token": "[MASK]"}


@dataclasses.dataclass(frozen=True)
class EncoderExportConfig:
    checkpoint: str
    output_dir: str
    format: str = FORMAT_HUGGINGFACE
    pooling: str | None = None  # None: the checkpoint's own
    max_seq_length: int = 128
    allow_numeric_drift: bool = False

    def __post_init__(self):
        if self.format not in EXPORT_FORMATS:
            raise ValueError(f"format must be one of {EXPORT_FORMATS}, got {self.format!r}")
        if self.pooling is not None and self.pooling not in POOLING_MODES:
            raise ValueError(f"pooling must be one of {POOLING_MODES}, got {self.pooling!r}")


def hf_config_dict(config: BertConfig) -> dict:
    """HuggingFace's `config.json` for a BertModel with `config`'s numerics."""
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "vocab_size": config.vocab_size,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size,
        "hidden_act": _HF_ACTIVATION_NAMES[config.hidden_act],
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "initializer_range": config.initializer_range,
        "layer_norm_eps": config.layer_norm_eps,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
    }


def _export_info(config: EncoderExportConfig, bert_config: BertConfig, **extra) -> dict:
    # The checkpoint's folder name only: the info file must not hold this machine's paths.
    return {"format": config.format, "source": os.path.basename(os.path.normpath(config.checkpoint)),
            "pooling": config.pooling, "max_seq_length": config.max_seq_length,
            "bert_config": bert_config.to_dict(), **extra}


def _write_huggingface(loaded, config: EncoderExportConfig, folder: str) -> tuple:
    from safetensors.numpy import save_file

    tensors = {}
    for name, value in backbone_to_tf1_variables(loaded.backbone).items():
        hf_name, transpose = google_to_hf(name)
        tensors[hf_name] = np.ascontiguousarray(value.T if transpose else value, dtype=np.float32)
    # transformers reads only safetensors files marked as PyTorch tensors.
    save_file(tensors, os.path.join(folder, HF_WEIGHTS_FILE), metadata={"format": "pt"})
    write_json(os.path.join(folder, HF_CONFIG_FILE), hf_config_dict(loaded.config), sort_keys=True)
    shutil.copyfile(loaded.tokenizer.vocab_file, os.path.join(folder, VOCAB_FILE))
    _write_hf_tokenizer(loaded.tokenizer, config.max_seq_length, folder)
    write_json(os.path.join(folder, "special_tokens_map.json"), dict(_SPECIAL_TOKENS), sort_keys=True)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if config.pooling == "pooler":
        modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
        _write_pooler_dense(tensors, loaded.config.hidden_size, os.path.join(folder, "2_Dense"))
    write_json(os.path.join(folder, "modules.json"), modules, sort_keys=True)
    write_json(os.path.join(folder, "sentence_bert_config.json"),
               {"max_seq_length": config.max_seq_length, "do_lower_case": False}, sort_keys=True)
    os.makedirs(os.path.join(folder, "1_Pooling"))
    write_json(os.path.join(folder, "1_Pooling", "config.json"), {
        "word_embedding_dimension": loaded.config.hidden_size,
        "pooling_mode_cls_token": config.pooling in ("cls", "pooler"),
        "pooling_mode_mean_tokens": config.pooling == "mean",
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False,
        "include_prompt": True}, sort_keys=True)
    write_json(os.path.join(folder, EXPORT_INFO_FILE), _export_info(config, loaded.config), sort_keys=True)
    return ()


def _write_hf_tokenizer(tokenizer, max_seq_length: int, folder: str) -> None:
    """`tokenizer.json` with `Tokenizer`'s normalization, and a config that makes transformers use it.

    transformers' own `BertTokenizer` class rebuilds its normalizer from `do_lower_case` and
    ignores `tokenizer.json`'s (no NFKC, see `tokenization`); the generic fast class loads the
    file as written. `do_lower_case` stays in the config for `checkpoints.load_checkpoint`.
    """
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, models, pre_tokenizers, processors

    vocab = {token: index for index, token in enumerate(tokenizer.vocab)}
    backend = HFTokenizer(models.WordPiece(vocab, unk_token=_SPECIAL_TOKENS["unk_token"]))
    backend.normalizer = huggingface_normalizer(tokenizer.do_lower_case)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece(prefix="##")
    cls, sep = _SPECIAL_TOKENS["cls_token"], _SPECIAL_TOKENS["sep_token"]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0", pair=f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1",
        special_tokens=[(cls, vocab[cls]), (sep, vocab[sep])])
    backend.save(os.path.join(folder, "tokenizer.json"))
    write_json(os.path.join(folder, "tokenizer_config.json"), {
        "tokenizer_class": "PreTrainedTokenizerFast", "do_lower_case": tokenizer.do_lower_case,
        "model_max_length": max_seq_length, "max_seq_length": max_seq_length, **_SPECIAL_TOKENS}, sort_keys=True)


def _write_pooler_dense(tensors: dict, hidden_size: int, folder: str) -> None:
    """sentence-transformers' `Dense` module computing BERT's pooler on the [CLS] vector."""
    from safetensors.numpy import save_file

    os.makedirs(folder)
    write_json(os.path.join(folder, "config.json"), {
        "in_features": hidden_size, "out_features": hidden_size, "bias": True,
        "activation_function": "torch.nn.modules.activation.Tanh"}, sort_keys=True)
    save_file({"linear.weight": tensors["pooler.dense.weight"], "linear.bias": tensors["pooler.dense.bias"]},
              os.path.join(folder, HF_WEIGHTS_FILE), metadata={"format": "pt"})


def keras_hub_drift(backbone, bert_config: BertConfig, preset_dir: str, num_sequences: int = 32,
                    seed: int = 0) -> dict:
    """How far keras-hub's stock BertBackbone, loaded from `preset_dir`, is from `backbone`.

    Mean-pooled outputs of both on `num_sequences` seeded random token sequences (ids drawn from
    5 up to the vocabulary size, which may include special tokens; lengths 4 up to min(64, the
    position limit)).
    """
    import keras_hub

    from dialoguecse_tf.encoder.backbone import run_backbone
    from dialoguecse_tf.encoder.pooling import SentencePooling

    stock = keras_hub.models.BertBackbone.from_preset(preset_dir)
    rng = np.random.default_rng(seed)
    longest = min(64, bert_config.max_position_embeddings)
    lengths = rng.integers(min(4, longest), longest + 1, size=num_sequences)
    token_ids = rng.integers(5, bert_config.vocab_size, size=(num_sequences, longest)).astype(np.int32)
    padding_mask = (np.arange(longest)[None, :] < lengths[:, None]).astype(np.int32)
    token_ids *= padding_mask
    token_ids, padding_mask = tf.constant(token_ids), tf.constant(padding_mask)
    pool = SentencePooling("mean")
    ours = pool(run_backbone(backbone, token_ids, padding_mask)["sequence_output"], padding_mask).numpy()
    theirs = pool(stock({"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids),
                         "padding_mask": padding_mask})["sequence_output"], padding_mask).numpy()
    cosines = np.sum(ours * theirs, axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    return {"max_abs_difference": float(np.max(np.abs(ours - theirs))), "min_cosine": float(np.min(cosines)),
            "num_sequences": num_sequences, "seed": seed}


def _keras_hub_mismatches(bert_config: BertConfig) -> list:
    return [f"{key}={getattr(bert_config, key)!r} (keras-hub computes {value!r})"
            for key, value in _KERAS_HUB_NUMERICS.items() if getattr(bert_config, key) != value]


def _write_keras_hub(loaded, config: EncoderExportConfig, folder: str) -> tuple:
    import keras_hub

    mismatches = _keras_hub_mismatches(loaded.config)
    if mismatches and not config.allow_numeric_drift:
        raise ValueError(
            f"{config.checkpoint}: keras-hub's BertBackbone cannot compute this encoder exactly: "
            f"{'; '.join(mismatches)}. Export to HuggingFace instead, or pass allow_numeric_drift to "
            f"export anyway with the measured drift recorded in {EXPORT_INFO_FILE}")
    loaded.backbone.save_to_preset(folder)
    # keras-hub keeps accents unless told otherwise; this project strips them when it lower-cases.
    lower = loaded.tokenizer.do_lower_case
    keras_hub.models.BertTokenizer(vocabulary=loaded.tokenizer.vocab_file, lowercase=lower,
                                   strip_accents=lower).save_to_preset(folder)
    extra, notes = {}, ()
    if mismatches:
        extra = {"keras_hub_mismatches": mismatches,
                 "keras_hub_drift": keras_hub_drift(loaded.backbone, loaded.config, folder)}
        drift = extra["keras_hub_drift"]
        notes = (f"keras-hub's BertBackbone computes this encoder only approximately ({'; '.join(mismatches)}): "
                 f"on {drift['num_sequences']} random token sequences its mean-pooled vectors differ from the "
                 f"original by at most {drift['max_abs_difference']:.3g} (lowest cosine "
                 f"{drift['min_cosine']:.6f}). dialoguecse_tf loads it with the original numerics, recorded in "
                 f"`{EXPORT_INFO_FILE}`.",)
    write_json(os.path.join(folder, EXPORT_INFO_FILE), _export_info(config, loaded.config, **extra), sort_keys=True)
    return notes


def export_encoder(config: EncoderExportConfig) -> str:
    """Writes `config.output_dir` (which must not exist) in `config.format`, with its model card
    (`model_card`, README.md); returns its path.

    The folder is written beside its final name and renamed into place, so a failed export
    leaves no partial export (parent folders it had to create stay).
    """
    target = os.path.abspath(config.output_dir)
    if os.path.exists(target):
        raise FileExistsError(f"{config.output_dir} exists; exports never overwrite, pick another folder")
    loaded = load_checkpoint(config.checkpoint, max_seq_length=config.max_seq_length)
    config = dataclasses.replace(config, pooling=sentence_pooling(loaded, config.pooling))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".tmp-" + os.path.basename(target) + "-", dir=os.path.dirname(target))
    try:
        writer = _write_huggingface if config.format == FORMAT_HUGGINGFACE else _write_keras_hub
        notes = writer(loaded, config, staging)
        write_card(staging, card(config.format, checkpoint_facts(config.checkpoint, loaded.metadata), config.pooling,
                                 config.max_seq_length, os.path.basename(target), notes=notes))
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target
