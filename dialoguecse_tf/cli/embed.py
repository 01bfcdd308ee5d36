"""Embeds texts (one per line, from a file or stdin), or whole dialogues, with any supported
checkpoint or an exported SavedModel.

  dialoguecse-embed --checkpoint=DIR --input_file=texts.txt --output_file=vectors.npy
  dialoguecse-embed --checkpoint=DIR --input_file=../shared/data/sgd/dev --dialogue_format=sgd \
    --output_file=dialogues.jsonl   # one vector per dialogue, keyed by dialogue id
"""

import numpy as np
from absl import flags, logging

from dialoguecse_tf.cli import flag_utils
from dialoguecse_tf.config_fields import POOLING_HELP, POOLING_MODES
from dialoguecse_tf.embedding_io import check_output_file, nearest_neighbors, read_texts, write_embeddings

flags.DEFINE_string("checkpoint", None, "Checkpoint folder: Google TF1 BERT, HuggingFace BERT or this project's.")
flags.DEFINE_string("export_dir", None, "Or an exported SavedModel (a version folder or its base folder).")
flags.DEFINE_string("input_file", "-", "UTF-8 text file, one text per line; '-' reads stdin.")
flags.DEFINE_string("output_file", None, "Where to write the embeddings: .npy or .jsonl.")
flags.DEFINE_integer("max_seq_length", 128, "Longer texts are truncated to this many tokens.")
flags.DEFINE_enum("pooling", None, list(POOLING_MODES), "Sentence embedding: " + POOLING_HELP)
flags.DEFINE_bool("normalize", False, "L2-normalize the embeddings.")
flags.DEFINE_integer("batch_size", 64, "Texts per forward pass.")
flags.DEFINE_integer("nearest_neighbors", 0, "If > 0, also print each text's k most similar texts.")
flags.DEFINE_enum("dialogue_format", None, ["authors", "mdc", "ecd", "jddc", "sgd", "jsonl"],
                  "Embed the dialogues of input_file, a corpus in this format, instead of lines of text (each "
                  "dialogue needs exactly two speakers).")
flags.DEFINE_enum("dialogue_pooling", "interlocutor", ["interlocutor", "mean"],
                  "Dialogue embedding: the two roles' token means summed (dial2vec) or the mean over all tokens.")
flags.DEFINE_integer("dialogue_max_seq_length", 512, "Tokens per dialogue, cut as the checkpoint's training cut "
                     "them (a dial2vec run's --truncation; otherwise the first tokens are kept).")
flags.mark_flags_as_required(["output_file"])
flags.mark_flags_as_mutual_exclusive(["checkpoint", "export_dir"], required=True)
FLAGS = flags.FLAGS


def main(argv):
    del argv
    check_output_file(FLAGS.output_file)
    if FLAGS.dialogue_format:
        texts, vectors = _embed_dialogues()
    else:
        texts, vectors = _embed_texts()
    write_embeddings(FLAGS.output_file, texts, vectors)
    logging.info("wrote %d embeddings of dimension %d to %s", *vectors.shape, FLAGS.output_file)
    for i, neighbors in enumerate(nearest_neighbors(vectors, FLAGS.nearest_neighbors) if FLAGS.nearest_neighbors else []):
        print(f"{texts[i]}")
        for j, score in neighbors:
            print(f"    {score:+.3f}  {texts[j]}")


def _embed_dialogues():
    from dialoguecse_tf.data.readers import read_corpus

    dialogues = list(read_corpus(FLAGS.input_file, FLAGS.dialogue_format))
    if not dialogues:
        raise ValueError(f"{FLAGS.input_file}: no dialogue to embed")
    from dialoguecse_tf.dialogue_encoder import DialogueEncoder
    from dialoguecse_tf.export import ExportedEncoder

    if FLAGS.export_dir:
        vectors = ExportedEncoder(FLAGS.export_dir).encode_dialogues(dialogues)
    else:
        encoder = DialogueEncoder.from_checkpoint(FLAGS.checkpoint, FLAGS.dialogue_max_seq_length,
                                                  FLAGS.dialogue_pooling)
        vectors = encoder.encode_dialogues(dialogues, verbose=True)
    if FLAGS.normalize:
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return [dialogue.dialogue_id for dialogue in dialogues], vectors


def _embed_texts():
    texts = read_texts(FLAGS.input_file)
    if not texts:
        raise ValueError(f"{FLAGS.input_file}: no text to embed")
    # Imported only now: TensorFlow takes seconds to load, and a bad command line or input should not wait.
    from dialoguecse_tf.export import ExportedEncoder
    from dialoguecse_tf.sentence_encoder import SentenceEncoder

    if FLAGS.export_dir:
        # The export fixed its own pooling, length and normalization when it was written.
        vectors = ExportedEncoder(FLAGS.export_dir).encode(texts, batch_size=FLAGS.batch_size, verbose=True)
    else:
        encoder = SentenceEncoder.from_checkpoint(
            FLAGS.checkpoint, max_seq_length=FLAGS.max_seq_length, pooling=FLAGS.pooling
        )
        vectors = encoder.encode(texts, batch_size=FLAGS.batch_size, normalize=FLAGS.normalize, verbose=True)
    return texts, vectors


def run():
    flag_utils.run(main)


if __name__ == "__main__":
    run()
