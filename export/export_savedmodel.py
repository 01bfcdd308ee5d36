"""Exports a checkpoint as a versioned SavedModel for TF Serving (raw strings in, vectors out), with a
README.md model card (dialoguecse_tf/serving/savedmodel.py)."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, run
from dialoguecse_tf.config_fields import POOLING_HELP, POOLING_MODES, PRECISION_HELP, PRECISIONS
from dialoguecse_tf.serving.savedmodel import ExportConfig, run_export

flags.DEFINE_string("checkpoint", None, "Checkpoint folder: this project's, Google TF1 BERT or HuggingFace BERT.")
flags.DEFINE_string("export_dir", None, "Model base folder; the export goes to export_dir/<version>/.")
flags.DEFINE_integer("max_seq_length", 128, "Longer texts are truncated to this many tokens.")
flags.DEFINE_enum("pooling", None, list(POOLING_MODES), "Sentence embedding: " + POOLING_HELP)
flags.DEFINE_bool("normalize", False, "L2-normalize the served embeddings.")
flags.DEFINE_integer("version", None, "Version number; default: one above the highest in export_dir.")
flags.DEFINE_integer("dialogue_max_seq_length", None, "Tokens per dialogue of the embed_dialogues signature; "
                     "default: the checkpoint's maximum.")
flags.DEFINE_enum("dialogue_pooling", "interlocutor", ["interlocutor", "mean"],
                  "Dialogue embedding of the embed_dialogues signature: the two roles' token means summed "
                  "(dial2vec) or the mean over all tokens.")
flags.DEFINE_enum("precision", "float32", list(PRECISIONS), "Compute precision of the exported graph (its "
                  "signatures return float32 in every one): " + PRECISION_HELP)
flags.mark_flags_as_required(["checkpoint", "export_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    path = run_export(config_from_flags(ExportConfig, FLAGS))
    print(f"exported to {path}")


if __name__ == "__main__":
    run(main)
