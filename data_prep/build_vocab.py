"""Builds a WordPiece vocabulary from a dialogue corpus (for training BERT from scratch)."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_corpus_flags, run
from dialoguecse_tf.prep import VocabConfig, run_build_vocab

define_corpus_flags(flags)
flags.DEFINE_string("output_dir", None, "Folder for vocab.txt, config.json and prep_stats.json.")
flags.DEFINE_integer("vocab_size", 8000, "Upper bound on the vocabulary size, special tokens included.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case (NFKC case folding) before WordPiece.")
flags.DEFINE_integer("min_count", 2, "Least corpus count for a multi-character word piece.")
flags.mark_flag_as_required("output_dir")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_build_vocab(config_from_flags(VocabConfig, FLAGS))


if __name__ == "__main__":
    run(main)
