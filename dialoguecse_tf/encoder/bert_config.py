"""BERT hyper-parameters in Google's `bert_config.json` form.

The same object reads Google's file, HuggingFace's `config.json` (a superset of the
same keys) and writes Google's form, so every checkpoint this project saves can be
read by the original BERT code too.
"""

import dataclasses
import math

from dialoguecse_tf.io_utils import read_json_object, write_json

_REQUIRED_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)

# Google's TF1 BERT computes "gelu" with the tanh approximation while HuggingFace computes
# "gelu" exactly (and calls the approximation "gelu_new"); this project keeps Google's
# meaning and names the exact form "gelu_exact", so a HF checkpoint keeps its numerics.
SUPPORTED_ACTIVATIONS = ("gelu", "gelu_exact", "relu")
_HF_ACTIVATIONS = {
    "gelu": "gelu_exact",
    "gelu_new": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_fast": "gelu",
    "relu": "relu",
}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12

    def __post_init__(self):
        for key in _REQUIRED_KEYS + ("max_position_embeddings", "type_vocab_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"BERT config: {key} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"BERT config: hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}"
            )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(
                f"BERT config: hidden_act {self.hidden_act!r} is not one of {SUPPORTED_ACTIVATIONS}"
            )
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not _is_number(getattr(self, key)) or not 0.0 <= getattr(self, key) < 1.0:
                raise ValueError(f"BERT config: {key} must be in [0, 1), got {getattr(self, key)!r}")
        for key in ("initializer_range", "layer_norm_eps"):
            if not _is_number(getattr(self, key)) or not 0.0 < getattr(self, key) < math.inf:
                raise ValueError(f"BERT config: {key} must be a positive number, got {getattr(self, key)!r}")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, values: dict, source: str = "<dict>") -> "BertConfig":
        missing = [key for key in _REQUIRED_KEYS if key not in values]
        if missing:
            raise ValueError(f"{source}: BERT config is missing required keys {missing}")
        known = {field.name for field in dataclasses.fields(cls)}
        kwargs = {key: value for key, value in values.items() if key in known}
        if "layer_norm_eps" not in values and "layer_norm_epsilon" in values:
            kwargs["layer_norm_eps"] = values["layer_norm_epsilon"]
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{source}: {error}") from None

    @classmethod
    def from_json_file(cls, path: str) -> "BertConfig":
        return cls.from_dict(cls.from_json_file_values(path), source=path)

    @staticmethod
    def from_json_file_values(path: str) -> dict:
        try:
            return read_json_object(path, "a BERT config")
        except FileNotFoundError:
            raise FileNotFoundError(f"BERT config file not found: {path}") from None

    @classmethod
    def from_hf_json_file(cls, path: str) -> "BertConfig":
        """Reads HuggingFace's `config.json`, translating its activation names."""
        config = cls.from_json_file_values(path)
        act = config.get("hidden_act", "gelu")
        if not isinstance(act, str) or act not in _HF_ACTIVATIONS:
            raise ValueError(f"{path}: unsupported hidden_act {act!r} (known: {sorted(_HF_ACTIVATIONS)})")
        model_type = config.get("model_type", "bert")
        if model_type != "bert":
            raise ValueError(f"{path}: model_type is {model_type!r}, only 'bert' checkpoints are supported")
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(f"{path}: only absolute position embeddings are supported")
        return cls.from_dict({**config, "hidden_act": _HF_ACTIVATIONS[act]}, source=path)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json_file(self, path: str) -> None:
        write_json(path, self.to_dict(), sort_keys=True)

    def replace(self, **changes) -> "BertConfig":
        return dataclasses.replace(self, **changes)
