"""Prints the key of the training run the same flags would make (dialoguecse_tf/run_cache.py):
scripts name run folders by it, so a changed setting gets a new folder and an unchanged one
finds its finished run."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.cli.train_flags import define_training_flags, stage_from_flags

define_training_flags(flags)
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from dialoguecse_tf.run_cache import run_key

    print(run_key(*stage_from_flags(FLAGS)))


if __name__ == "__main__":
    run(main)
