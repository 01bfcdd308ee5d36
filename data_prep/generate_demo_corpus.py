"""Generates the project's own demo corpus: training dialogues plus held-out SR, D-STS, intent and
dialogue-level evaluation sets."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, define_config_flags, run
from dialoguecse_tf.data.demo import DemoCorpusConfig, run_generate_demo_corpus

define_config_flags(flags, DemoCorpusConfig)
flags.DEFINE_alias("seed", "random_seed")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_generate_demo_corpus(config_from_flags(DemoCorpusConfig, FLAGS))


if __name__ == "__main__":
    run(main)
