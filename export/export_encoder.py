"""Exports a checkpoint as a HuggingFace BERT folder (transformers, sentence-transformers) or a
keras-hub preset, for stacks other than TF Serving, with a README.md model card
(dialoguecse_tf/serving/interop.py)."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, run
from dialoguecse_tf.config_fields import POOLING_HELP, POOLING_MODES
from dialoguecse_tf.serving.interop import EXPORT_FORMATS, EncoderExportConfig, export_encoder

flags.DEFINE_string("checkpoint", None, "Checkpoint folder: this project's, Google TF1 BERT, HuggingFace BERT "
                    "or keras-hub preset.")
flags.DEFINE_string("output_dir", None, "Folder to create (must not exist).")
flags.DEFINE_enum("format", "huggingface", list(EXPORT_FORMATS),
                  "huggingface: transformers' AutoModel and SentenceTransformer load it; keras_hub: "
                  "keras_hub.models.BertBackbone/BertTokenizer.from_preset load it.")
flags.DEFINE_enum("pooling", None, list(POOLING_MODES), "Pooling the sentence-transformers modules apply: "
                  + POOLING_HELP)
flags.DEFINE_integer("max_seq_length", 128, "Truncation length the exported tokenizer configs state.")
flags.DEFINE_bool("allow_numeric_drift", False, "keras_hub only: export an encoder keras-hub cannot compute "
                  "exactly (exact GELU, other layer-norm epsilon), recording the measured drift.")
flags.mark_flags_as_required(["checkpoint", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    path = export_encoder(config_from_flags(EncoderExportConfig, FLAGS))
    print(f"exported to {path}")


if __name__ == "__main__":
    run(main)
