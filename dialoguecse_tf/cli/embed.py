"""Embeds texts (one per line, from a file or stdin), or whole dialogues, with any supported
checkpoint or an exported SavedModel.

  dialoguecse-embed --checkpoint=DIR --input_file=texts.txt --output_file=vectors.npy
  dialoguecse-embed --checkpoint=DIR --input_file=../shared/data/sgd/dev --dialogue_format=sgd \
    --output_file=dialogues.jsonl   # one vector per dialogue, keyed by dialogue id

Blank lines stay rows (row i is line i) but are never nearest neighbours; a file of only blank
lines is refused. The output file is checked before anything is loaded. With --export_dir,
--max_seq_length, --pooling, --precision and the --dialogue_* settings are the export's: giving other values
is an error. Progress goes to stderr, so stdout holds only the --nearest_neighbors listing.
"""

from absl import flags, logging

from dialoguecse_tf.cli import flag_utils
from dialoguecse_tf.config_fields import POOLING_HELP, POOLING_MODES, PRECISION_HELP, PRECISIONS
from dialoguecse_tf.serving.embed import (
    DEFAULT_DIALOGUE_MAX_SEQ_LENGTH,
    DEFAULT_DIALOGUE_POOLING,
    DEFAULT_MAX_SEQ_LENGTH,
    EmbedConfig,
    embed,
    nearest_neighbors,
    write_embeddings,
)

flags.DEFINE_string("checkpoint", None, "Checkpoint folder: Google TF1 BERT, HuggingFace BERT or this project's.")
flags.DEFINE_string("export_dir", None, "Or an exported SavedModel (a version folder or its base folder).")
flags.DEFINE_string("input_file", "-", "UTF-8 text file, one text per line ('-' reads stdin; a leading byte-order "
                    "mark is dropped; blank lines are kept as rows), or a dialogue corpus (see --dialogue_format).")
flags.DEFINE_string("output_file", None,
                    "Where to write the embeddings, by suffix: .npy, a float32 matrix with row i for line i; "
                    '.jsonl, one JSON object per line, {"text": line, "embedding": [floats]} ({"dialogue_id": '
                    'id, "embedding": [...]} for dialogues); .json, one JSON array of those objects.')
flags.DEFINE_integer("max_seq_length", DEFAULT_MAX_SEQ_LENGTH,
                     "Longer texts are truncated to this many tokens. An export has its own: only that value "
                     "may be given.")
flags.DEFINE_enum("pooling", None, list(POOLING_MODES),
                  "Sentence embedding: " + POOLING_HELP + " An export has its own: only that value may be given.")
flags.DEFINE_bool("normalize", False, "L2-normalize the embeddings (an export's too).")
flags.DEFINE_integer("batch_size", 64, "Texts per forward pass.")
flags.DEFINE_integer("nearest_neighbors", 0, "If > 0, also print each text's k most similar texts (blank lines "
                     "are never listed).")
flags.DEFINE_enum("dialogue_format", None, ["authors", "mdc", "ecd", "jddc", "sgd", "jsonl"],
                  "Embed the dialogues of input_file, a corpus in this format, instead of lines of text (each "
                  "dialogue needs exactly two speakers and its own id).")
flags.DEFINE_enum("dialogue_pooling", DEFAULT_DIALOGUE_POOLING, ["interlocutor", "mean"],
                  "Dialogue embedding: the two roles' token means summed (dial2vec) or the mean over all tokens.")
flags.DEFINE_integer("dialogue_max_seq_length", DEFAULT_DIALOGUE_MAX_SEQ_LENGTH,
                     "Tokens per dialogue, cut as the checkpoint's training cut them (a dial2vec run's "
                     "--truncation; otherwise the first tokens are kept).")
flags.DEFINE_enum("precision", "float32", list(PRECISIONS), "Compute precision of a checkpoint's encoder (the "
                  "vectors are float32 in every one): " + PRECISION_HELP)
flags.mark_flags_as_required(["output_file"])
flags.mark_flags_as_mutual_exclusive(["checkpoint", "export_dir"], required=True)
FLAGS = flags.FLAGS
# Passed on only when given: None lets the library take an export's own value or the default.
_IF_GIVEN = ("max_seq_length", "pooling", "normalize", "dialogue_max_seq_length", "dialogue_pooling", "precision")


def main(argv):
    del argv
    config = EmbedConfig(FLAGS.input_file, FLAGS.output_file, FLAGS.checkpoint, FLAGS.export_dir,
                         batch_size=FLAGS.batch_size, dialogue_format=FLAGS.dialogue_format,
                         **{name: FLAGS[name].value if FLAGS[name].present else None for name in _IF_GIVEN})
    result = embed(config)
    write_embeddings(FLAGS.output_file, result.keys, result.vectors, result.key_field)
    logging.info("wrote %d embeddings of dimension %d to %s", *result.vectors.shape, FLAGS.output_file)
    if FLAGS.nearest_neighbors > 0:
        for i, neighbors in enumerate(nearest_neighbors(result.vectors, FLAGS.nearest_neighbors, result.searchable)):
            if result.searchable[i]:
                print(result.keys[i])
                for j, score in neighbors:
                    print(f"    {score:+.3f}  {result.keys[j]}")


def run():
    flag_utils.run(main)


if __name__ == "__main__":
    run()
