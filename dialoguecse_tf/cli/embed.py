"""Embeds texts (one per line, from a file or stdin) with any supported checkpoint.

  dialoguecse-embed --checkpoint=DIR --input_file=texts.txt --output_file=vectors.npy
"""

from absl import flags, logging

from dialoguecse_tf.cli import flag_utils
from dialoguecse_tf.embedding_io import check_output_file, nearest_neighbors, read_texts, write_embeddings

flags.DEFINE_string("checkpoint", None, "Checkpoint folder: Google TF1 BERT, HuggingFace BERT or this project's.")
flags.DEFINE_string("export_dir", None, "Or an exported SavedModel (a version folder or its base folder).")
flags.DEFINE_string("input_file", "-", "UTF-8 text file, one text per line; '-' reads stdin.")
flags.DEFINE_string("output_file", None, "Where to write the embeddings: .npy or .jsonl.")
flags.DEFINE_integer("max_seq_length", 128, "Longer texts are truncated to this many tokens.")
flags.DEFINE_enum("pooling", "mean", ["mean", "cls"], "Sentence embedding: masked mean (the paper's) or [CLS].")
flags.DEFINE_bool("normalize", False, "L2-normalize the embeddings.")
flags.DEFINE_integer("batch_size", 64, "Texts per forward pass.")
flags.DEFINE_integer("nearest_neighbors", 0, "If > 0, also print each text's k most similar texts.")
flags.mark_flags_as_required(["output_file"])
flags.mark_flags_as_mutual_exclusive(["checkpoint", "export_dir"], required=True)
FLAGS = flags.FLAGS


def main(argv):
    del argv
    check_output_file(FLAGS.output_file)
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
    write_embeddings(FLAGS.output_file, texts, vectors)
    logging.info("wrote %d embeddings of dimension %d to %s", *vectors.shape, FLAGS.output_file)
    for i, neighbors in enumerate(nearest_neighbors(vectors, FLAGS.nearest_neighbors) if FLAGS.nearest_neighbors else []):
        print(f"{texts[i]}")
        for j, score in neighbors:
            print(f"    {score:+.3f}  {texts[j]}")


def run():
    flag_utils.run(main)


if __name__ == "__main__":
    run()
