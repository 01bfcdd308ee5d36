"""Reading and writing BERT checkpoints in every form the project accepts.

Four forms load into the same keras-hub backbone:

1. Google's TF1 release folder (`bert_config.json`, `bert_model.ckpt.*`, `vocab.txt`),
   e.g. `chinese_L-12_H-768_A-12`, the checkpoint the paper started from.
2. A HuggingFace BERT folder (`config.json`, `model.safetensors`, `vocab.txt`).
3. The project's own checkpoint folder, written by `save_checkpoint`: Google's layout
   (so the original BERT code and its converters read it too) plus `tokenizer_config.json`
   and a `dialoguecse_checkpoint.json` marker with the stage's metadata, among it the pooling
   of the sentence embedding the encoder was trained for (`sentence_pooling`).
4. A keras-hub BERT preset folder (`config.json`, `model.weights.h5`, `metadata.json`,
   `assets/tokenizer/vocabulary.txt`), e.g. one `interop.export_encoder` wrote. keras-hub's
   config does not record GELU's form or the layer-norm epsilon; the export's
   `dialoguecse_export.json` does, and is used when present (else keras-hub's own numerics).

All forms go through one table of names (`weight_names`: Google's, HuggingFace's and the
backbone's), so a missing or mis-shaped variable fails the same way whatever the source.
"""

import dataclasses
import datetime
import glob
import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from dialoguecse_tf.encoder.backbone import build_backbone
from dialoguecse_tf.encoder.bert_config import BertConfig
from dialoguecse_tf.encoder.pooling import DEFAULT_POOLING, POOLING_MODES
from dialoguecse_tf.encoder.tokenization import Tokenizer
from dialoguecse_tf.encoder.weight_names import MLM_HEAD_PREFIX, backbone_weights, hf_to_google
from dialoguecse_tf.io_utils import read_json_object
from dialoguecse_tf.precision import DEFAULT_PRECISION, check_precision
from dialoguecse_tf.serving.layout import EXPORT_INFO_FILE

CHECKPOINT_MARKER_FILE = "dialoguecse_checkpoint.json"
# save_checkpoint's name for the checkpoint it replaces while the new one is renamed into place.
RETIRED_SUFFIX = ".old"
TF1_CONFIG_FILE = "bert_config.json"
TF1_CHECKPOINT_NAME = "bert_model.ckpt"
HF_CONFIG_FILE = "config.json"
HF_WEIGHTS_FILE = "model.safetensors"
VOCAB_FILE = "vocab.txt"
KERAS_HUB_WEIGHTS_FILE = "model.weights.h5"
KERAS_HUB_METADATA_FILE = "metadata.json"
KERAS_HUB_VOCAB_FILE = os.path.join("assets", "tokenizer", "vocabulary.txt")

FORMAT_TF1 = "tf1"
FORMAT_HF = "hf"
FORMAT_PROJECT = "project"
FORMAT_KERAS_HUB = "keras_hub"

# Google's pretraining checkpoints keep the masked-LM head beside the encoder (`weight_names`
# names it), which is handed to the pretraining stage, and Adam's slots, which are not encoder state.
_OPTIMIZER_SUFFIXES = ("/adam_m", "/adam_v")


def assign_bert_variables(backbone, variables: dict, source: str) -> dict:
    """Copies Google-named arrays into `backbone`.

    Every backbone variable must be present with a compatible shape (attention kernels
    differ from Google's 2-D layout only by a reshape), and every `bert/` array must be
    used: either mismatch means the checkpoint is not the architecture the config says.

    Args:
      backbone: a keras-hub `BertBackbone` of the checkpoint's config.
      variables: Google TF1 name -> array (`read_tf1_variables`, `read_hf_variables`).
      source: the checkpoint's path, for the error messages.

    Returns:
      The MLM-head arrays found (`cls/predictions/*`, Google names); {} when there are none.
    """
    mapping = backbone_weights(backbone)
    missing, misshaped = [], []
    for row in mapping:
        if row.name not in variables:
            missing.append(row.name)
            continue
        value = np.asarray(variables[row.name])
        if value.size != int(np.prod(row.keras_shape)) or (
            value.ndim == len(row.keras_shape) and value.shape != row.keras_shape
        ):
            misshaped.append(f"{row.name}: checkpoint {value.shape}, encoder expects {row.keras_shape}")
    if missing or misshaped:
        problems = [f"missing {name}" for name in missing] + [f"mis-shaped {text}" for text in misshaped]
        raise ValueError(
            f"{source}: checkpoint does not match the BERT config "
            f"({len(missing)} missing, {len(misshaped)} mis-shaped variables):\n  "
            + "\n  ".join(problems[:20])
            + ("\n  ..." if len(problems) > 20 else "")
        )
    used = {row.name for row in mapping}
    unexpected = sorted(
        name
        for name in variables
        if name.startswith("bert/") and name not in used and not name.endswith(_OPTIMIZER_SUFFIXES)
    )
    if unexpected:
        raise ValueError(
            f"{source}: checkpoint has encoder variables the BERT config does not account for "
            f"(is num_hidden_layers right?): {unexpected[:10]}"
        )
    for row in mapping:
        row.variable.assign(np.reshape(variables[row.name], row.keras_shape).astype(np.float32))
    return {
        name: np.asarray(value)
        for name, value in variables.items()
        if name.startswith(MLM_HEAD_PREFIX) and not name.endswith(_OPTIMIZER_SUFFIXES)
    }


def backbone_to_tf1_variables(backbone) -> dict:
    """The backbone's weights under Google's names and 2-D layouts.

    Args:
      backbone: a keras-hub `BertBackbone`.

    Returns:
      Google TF1 name -> float32 array: kernels [in, out], biases and norms [width], embedding
      tables [rows, H].
    """
    result = {}
    for row in backbone_weights(backbone):
        # float32 whatever the backbone computes in (its variables are float32 in every precision).
        value = np.asarray(row.variable.numpy(), dtype=np.float32)
        if len(row.keras_shape) == 3:
            # Attention kernels: [H, heads, head] -> [H, H] and [heads, head, H] -> [H, H].
            if row.name.endswith("attention/output/dense/kernel"):
                value = value.reshape(-1, row.keras_shape[-1])
            else:
                value = value.reshape(row.keras_shape[0], -1)
        elif len(row.keras_shape) == 2 and row.name.endswith("/bias"):
            value = value.reshape(-1)
        result[row.name] = value
    return result


def read_hf_variables(folder: str) -> dict:
    """Reads `model.safetensors` (NumPy only: no torch) under Google's variable names.

    Args:
      folder: a HuggingFace BERT folder.

    Returns:
      Google TF1 name -> array in Google's layout (`weight_names.hf_to_google`); buffers and the
      heads the encoder does not use are left out.
    """
    from safetensors.numpy import load_file

    weights_path = os.path.join(folder, HF_WEIGHTS_FILE)
    try:
        tensors = load_file(weights_path)
    except FileNotFoundError:
        raise FileNotFoundError(f"HuggingFace weights not found: {weights_path}") from None
    result = {}
    for name, value in tensors.items():
        try:
            mapped = hf_to_google(name)
        except ValueError:
            raise ValueError(f"{weights_path}: unexpected tensor {name!r} for a BERT model") from None
        if mapped is None:
            continue
        tf1_name, transpose = mapped
        result[tf1_name] = value.T if transpose else value
    return result


def find_tf1_checkpoint(path: str) -> str:
    """Resolves a folder or a checkpoint prefix to the prefix of a TF checkpoint."""
    if os.path.exists(path + ".index"):
        return path
    if not os.path.isdir(path):
        raise FileNotFoundError(f"no TF checkpoint at {path} (expected a folder or a '<prefix>.index' file)")
    preferred = os.path.join(path, TF1_CHECKPOINT_NAME)
    if os.path.exists(preferred + ".index"):
        return preferred
    latest = tf.train.latest_checkpoint(path)
    if latest:
        return latest
    indexes = sorted(glob.glob(os.path.join(path, "*.index")))
    if len(indexes) == 1:
        return indexes[0][: -len(".index")]
    raise FileNotFoundError(
        f"{path}: expected exactly one TF checkpoint (*.index), found {len(indexes)}"
    )


def read_tf1_variables(prefix: str) -> dict:
    try:
        reader = tf.train.load_checkpoint(prefix)
        return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}
    # TensorFlow's checkpoint reader reports a truncated data file as IndexError.
    except (tf.errors.OpError, IndexError) as error:
        message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ValueError(f"{prefix}: unreadable TF checkpoint, truncated or corrupt? ({message})") from None


def write_tf1_variables(prefix: str, variables: dict) -> None:
    """Writes a TF checkpoint bundle with exactly the given variable names.

    `SaveV2` keeps names as given, which is what makes the file readable by Google's
    TF1 `Saver` and by `tf.train.load_checkpoint` alike.
    """
    names = sorted(variables)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.convert_to_tensor(variables[name]) for name in names],
    )


def detect_format(path: str) -> str:
    if os.path.isdir(path):
        if os.path.exists(os.path.join(path, CHECKPOINT_MARKER_FILE)):
            return FORMAT_PROJECT
        if os.path.exists(os.path.join(path, HF_WEIGHTS_FILE)):
            return FORMAT_HF
        if all(os.path.exists(os.path.join(path, name)) for name in (KERAS_HUB_WEIGHTS_FILE, KERAS_HUB_METADATA_FILE)):
            return FORMAT_KERAS_HUB
        if os.path.exists(os.path.join(path, TF1_CONFIG_FILE)):
            return FORMAT_TF1
        raise ValueError(
            f"{path}: not a BERT checkpoint folder: expected {CHECKPOINT_MARKER_FILE} (this project), "
            f"{HF_CONFIG_FILE} + {HF_WEIGHTS_FILE} (HuggingFace), {KERAS_HUB_WEIGHTS_FILE} + "
            f"{KERAS_HUB_METADATA_FILE} (keras-hub) or {TF1_CONFIG_FILE} + {TF1_CHECKPOINT_NAME}.* (Google)"
        )
    if os.path.exists(path + ".index"):
        return FORMAT_TF1
    raise FileNotFoundError(f"checkpoint path does not exist: {path}")


@dataclasses.dataclass
class LoadedCheckpoint:
    config: BertConfig
    backbone: object
    tokenizer: Tokenizer
    source_format: str
    path: str
    mlm_head: dict  # Google-named `cls/predictions/*` arrays; empty if the checkpoint has none
    metadata: dict


def load_checkpoint(
    path: str,
    max_seq_length: int = 128,
    do_lower_case: bool | None = None,
    vocab_file: str | None = None,
    precision: str = DEFAULT_PRECISION,
) -> LoadedCheckpoint:
    """Loads an encoder and its tokenizer from any supported checkpoint form.

    Args:
      path: str, a checkpoint folder (this project's, HuggingFace's, a keras-hub preset or
        Google's with `bert_config.json`) or a Google TF1 checkpoint prefix.
      max_seq_length: int, the tokenizer's length; at most the config's
        `max_position_embeddings`.
      do_lower_case: bool or None; None takes the checkpoint's own tokenizer setting
        (Google folders do not record it; uncased is assumed there, right for
        `chinese_L-12_H-768_A-12`).
      vocab_file: str or None, overrides the folder's `vocab.txt`.
      precision: one of `precision.PRECISIONS`, the backbone's compute precision, checked
        against this machine first (`precision.check_precision`); its variables, and so the
        weights loaded, are float32 in every precision.

    Returns:
      LoadedCheckpoint: its `config`, a `backbone` (keras_hub.models.BertBackbone from
      `build_backbone`) holding the checkpoint's weights, its `tokenizer`, `source_format`,
      `path`, `mlm_head` ({Google name `cls/predictions/*`: array}, empty if the checkpoint
      has none) and `metadata` (the project's marker, or what an export recorded; else {}).

    Raises:
      FileNotFoundError: if `path` does not exist.
      ValueError: if `path` is no checkpoint, a weight is missing or mis-shaped for its
        config, `max_seq_length` exceeds the checkpoint's positions, or this machine does not
        run `precision`.

    Example:
      >>> loaded = load_checkpoint("chinese_L-12_H-768_A-12", max_seq_length=64)
      >>> loaded.backbone.hidden_dim, loaded.tokenizer.vocab_size
      (768, 21128)
    """
    check_precision(precision)
    source_format = detect_format(path)
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    metadata = {}
    if source_format == FORMAT_KERAS_HUB:
        return _load_keras_hub_preset(folder, path, max_seq_length, do_lower_case, vocab_file, precision)
    if source_format == FORMAT_HF:
        config = BertConfig.from_hf_json_file(os.path.join(folder, HF_CONFIG_FILE))
        variables = read_hf_variables(folder)
        metadata = _export_info_pooling(folder)
    else:
        config = BertConfig.from_json_file(os.path.join(folder, TF1_CONFIG_FILE))
        variables = read_tf1_variables(find_tf1_checkpoint(path))
        if source_format == FORMAT_PROJECT:
            metadata = read_json_object(os.path.join(folder, CHECKPOINT_MARKER_FILE), "a checkpoint marker")
    tokenizer = _load_tokenizer(folder, vocab_file, do_lower_case, max_seq_length)
    _check_tokenizer_fits(tokenizer, config, path)
    backbone = build_backbone(config, precision=precision)
    mlm_head = assign_bert_variables(backbone, variables, source=path)
    return LoadedCheckpoint(config, backbone, tokenizer, source_format, path, mlm_head, metadata)


def _keras_hub_bert_config(folder: str) -> BertConfig:
    info_path = os.path.join(folder, EXPORT_INFO_FILE)
    if os.path.exists(info_path):
        info = read_json_object(info_path, "an export info file")
        return BertConfig.from_dict(info.get("bert_config", {}), source=info_path)
    config_path = os.path.join(folder, HF_CONFIG_FILE)
    preset = read_json_object(config_path, "a keras-hub config")
    if preset.get("class_name") != "BertBackbone":
        raise ValueError(f"{config_path}: class_name is {preset.get('class_name')!r}, only BertBackbone presets load")
    values = preset.get("config", {})
    keys = {"vocab_size": "vocabulary_size", "hidden_size": "hidden_dim", "num_hidden_layers": "num_layers",
            "num_attention_heads": "num_heads", "intermediate_size": "intermediate_dim",
            "max_position_embeddings": "max_sequence_length", "type_vocab_size": "num_segments",
            "hidden_dropout_prob": "dropout", "attention_probs_dropout_prob": "dropout"}
    return BertConfig.from_dict({ours: values[theirs] for ours, theirs in keys.items() if theirs in values},
                                source=config_path)


def _load_keras_hub_preset(folder, path, max_seq_length, do_lower_case, vocab_file,
                           precision: str = DEFAULT_PRECISION) -> LoadedCheckpoint:
    config = _keras_hub_bert_config(folder)
    if do_lower_case is None:
        tokenizer_path = os.path.join(folder, "tokenizer.json")
        do_lower_case = True
        if os.path.exists(tokenizer_path):
            tokenizer_config = read_json_object(tokenizer_path, "a keras-hub tokenizer config").get("config", {})
            do_lower_case = bool(tokenizer_config.get("lowercase", True))
    tokenizer = Tokenizer(vocab_file or os.path.join(folder, KERAS_HUB_VOCAB_FILE), do_lower_case=do_lower_case,
                          max_seq_length=max_seq_length)
    _check_tokenizer_fits(tokenizer, config, path)
    backbone = build_backbone(config, precision=precision)
    try:
        backbone.load_weights(os.path.join(folder, KERAS_HUB_WEIGHTS_FILE))
    except (ValueError, OSError) as error:
        raise ValueError(f"{path}: keras-hub weights do not match its config ({error})") from None
    return LoadedCheckpoint(config, backbone, tokenizer, FORMAT_KERAS_HUB, path, {}, _export_info_pooling(folder))


def _export_info_pooling(folder: str) -> dict:
    """{"pooling": ...} of a folder `interop.export_encoder` wrote; {} for any other folder."""
    info_path = os.path.join(folder, EXPORT_INFO_FILE)
    if not os.path.exists(info_path):
        return {}
    pooling = read_json_object(info_path, "an export info file").get("pooling")
    return {} if pooling is None else {"pooling": pooling}


def sentence_pooling(loaded: LoadedCheckpoint, requested: str | None = None) -> str:
    """The pooling to embed sentences with: `requested`, else the one the checkpoint records (a
    trained encoder's metadata, or the info file of an `interop` export), else mean pooling.

    Checkpoints that record none (pretrained BERTs, and encoders written before the stage
    recorded it, all mean-pooled) embed as before.
    """
    pooling = requested or loaded.metadata.get("pooling", DEFAULT_POOLING)
    if pooling not in POOLING_MODES:
        raise ValueError(f"{loaded.path}: pooling {pooling!r} is not one of {POOLING_MODES}")
    return pooling


def _load_tokenizer(folder, vocab_file, do_lower_case, max_seq_length) -> Tokenizer:
    if vocab_file is None:
        vocab_file = os.path.join(folder, VOCAB_FILE)
    if do_lower_case is None:
        do_lower_case = True
        config_path = os.path.join(folder, "tokenizer_config.json")
        if os.path.exists(config_path):
            do_lower_case = bool(read_json_object(config_path, "a tokenizer config").get("do_lower_case", True))
    return Tokenizer(vocab_file, do_lower_case=do_lower_case, max_seq_length=max_seq_length)


def _check_tokenizer_fits(tokenizer: Tokenizer, config: BertConfig, source: str) -> None:
    if tokenizer.vocab_size != config.vocab_size:
        raise ValueError(
            f"{source}: vocabulary {tokenizer.vocab_file} has {tokenizer.vocab_size} tokens but the "
            f"BERT config says vocab_size={config.vocab_size}"
        )
    if tokenizer.max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"{source}: max_seq_length {tokenizer.max_seq_length} exceeds the checkpoint's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )


def save_checkpoint(
    directory: str,
    backbone,
    config: BertConfig,
    tokenizer: Tokenizer,
    metadata: dict | None = None,
    mlm_head: dict | None = None,
) -> str:
    """Writes the project's checkpoint folder; replaces `directory` only once complete.

    The folder is built beside the target and renamed into place, so a crash leaves
    either the previous checkpoint or none, never a half-written one. `load_checkpoint`
    reads it back.

    Args:
      directory: str, the checkpoint folder; its parents are created, a previous folder
        there is replaced.
      backbone: keras_hub.models.BertBackbone, written as Google-named TF1 variables.
      config: BertConfig, written as `bert_config.json`.
      tokenizer: Tokenizer, written as `vocab.txt` and `tokenizer_config.json`.
      metadata: dict or None, JSON-serialisable entries added to the checkpoint marker
        (e.g. the objective and its pooling).
      mlm_head: dict or None, {Google name `cls/predictions/*`: array} saved beside the
        backbone (`BertPretrainer.head_variables`).

    Returns:
      str, the absolute path of the folder written.

    Example:
      >>> save_checkpoint("runs/mlm/encoder", pretrainer.backbone, bert_config, tokenizer,
      ...                 metadata={"objective": "mlm"}, mlm_head=pretrainer.head_variables())
    """
    directory = os.path.abspath(directory)
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    staging_prefix = ".tmp-" + os.path.basename(directory) + "-"
    staging = tempfile.mkdtemp(prefix=staging_prefix, dir=parent)
    try:
        variables = backbone_to_tf1_variables(backbone)
        variables.update(mlm_head or {})
        write_tf1_variables(os.path.join(staging, TF1_CHECKPOINT_NAME), variables)
        config.to_json_file(os.path.join(staging, TF1_CONFIG_FILE))
        tokenizer.save(staging)
        marker = {
            "format_version": 1,
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            **(metadata or {}),
        }
        with open(os.path.join(staging, CHECKPOINT_MARKER_FILE), "w", encoding="utf-8") as writer:
            json.dump(marker, writer, indent=2, sort_keys=True)
        if os.path.isdir(directory):
            retired = directory + RETIRED_SUFFIX
            shutil.rmtree(retired, ignore_errors=True)
            os.replace(directory, retired)
            os.replace(staging, directory)
            shutil.rmtree(retired, ignore_errors=True)
        else:
            os.replace(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # A write killed outright (SIGKILL skips the cleanup above) leaves its staging folder, or
    # the retired copy, behind: each as large as the checkpoint. `mkdtemp` adds exactly 8
    # characters, so a sibling's staging ('encoder-2' stages in '.tmp-encoder-2-...') is spared.
    stale = glob.glob(os.path.join(parent, glob.escape(staging_prefix) + "?" * 8)) + [directory + RETIRED_SUFFIX]
    for leftover in stale:
        shutil.rmtree(leftover, ignore_errors=True)
    return directory


def restore_retired_checkpoint(directory: str) -> bool:
    """Puts back the checkpoint a `save_checkpoint` killed between its two renames retired.

    Such a kill leaves no `directory` and the previous checkpoint, whole, as `directory.old`,
    which the next save into `directory` would delete.

    Returns:
      bool, whether `directory` was put back.
    """
    retired = directory + RETIRED_SUFFIX
    if os.path.isdir(directory) or not os.path.isdir(retired):
        return False
    os.replace(retired, directory)
    return True


def load_or_initialize(
    init_checkpoint: str | None,
    bert_config_file: str | None,
    vocab_file: str | None,
    do_lower_case: bool,
    max_seq_length: int,
) -> LoadedCheckpoint:
    """What a training stage starts from: a checkpoint, or a config + vocabulary (scratch).

    From scratch, `backbone` is None: the stage builds its model (inside its distribution
    strategy's scope) with random weights.
    """
    if init_checkpoint:
        return load_checkpoint(init_checkpoint, max_seq_length, vocab_file=vocab_file)
    if not (bert_config_file and vocab_file):
        raise ValueError("set init_checkpoint, or bert_config_file and vocab_file to train from scratch")
    config = BertConfig.from_json_file(bert_config_file)
    tokenizer = Tokenizer(vocab_file, do_lower_case, max_seq_length)
    _check_tokenizer_fits(tokenizer, config, bert_config_file)
    return LoadedCheckpoint(config, None, tokenizer, "scratch", bert_config_file, {}, {})
