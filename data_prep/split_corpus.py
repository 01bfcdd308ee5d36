"""Splits a corpus published without a split into seeded train / dev / test JSON Lines files, by
dialogue, as dial2vec splits its Self-dialogue set (dialoguecse_tf/data/splits.py):

  python data_prep/split_corpus.py --input_file=../shared/data/self_dialogue --input_format=self_dialogue \
    --output_dir=runs/self_dialogue_split
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_config_flags, run
from dialoguecse_tf.data.splits import SplitConfig, run_split_corpus

define_config_flags(flags, SplitConfig)
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_split_corpus(config_from_flags(SplitConfig, FLAGS))


if __name__ == "__main__":
    run(main)
