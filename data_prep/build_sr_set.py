"""Builds a semantic-retrieval set (select.txt) from intent-labelled utterances with BM25."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_corpus_flags, run
from dialoguecse_tf.prep import SrSetConfig, run_build_sr_set

define_corpus_flags(flags)
flags.DEFINE_string("output_file", None, "Where to write select.txt (config and stats go beside it).")
flags.DEFINE_integer("num_candidates", 100, "Sentences BM25 retrieves per query (paper: 100).")
flags.DEFINE_integer("max_positives", 30, "Most positives kept per query (paper: 30).")
flags.DEFINE_integer("max_negatives", None, "Most negatives kept per query; unset keeps all retrieved.")
flags.mark_flag_as_required("output_file")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_build_sr_set(config_from_flags(SrSetConfig, FLAGS))


if __name__ == "__main__":
    run(main)
