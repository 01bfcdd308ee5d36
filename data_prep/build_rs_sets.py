"""Builds DSE's two response-selection sets from a dialogue corpus: rs_utterance.txt (the
release's AmazonQA shape) and rs_dialogue.txt (its DSTC7-Ubuntu shape); see
dialoguecse_tf/data/response_sets.py.

Example:
  python data_prep/build_rs_sets.py --input_file=../shared/data/sgd/dev --input_format=sgd \
      --output_dir=/tmp/rs_sets
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_config_flags, define_corpus_flags, run
from dialoguecse_tf.prep import RsSetsConfig, run_build_rs_sets

define_corpus_flags(flags)
define_config_flags(flags, RsSetsConfig, exclude=("corpus",))
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_build_rs_sets(config_from_flags(RsSetsConfig, FLAGS))


if __name__ == "__main__":
    run(main)
