"""Generates the project's own demo corpus: training dialogues plus held-out SR, D-STS, intent and
dialogue-level evaluation sets."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import config_from_flags, run
from dialoguecse_tf.data.demo_corpus import DemoCorpusConfig, run_generate_demo_corpus

flags.DEFINE_string("output_dir", None, "Folder for train.jsonl, train_sentences.txt, sr/select.txt, sts/sts.txt, "
                                        "intent/intent.json, dialogues/eval_dialogues.jsonl, config.json and "
                                        "demo_stats.json.")
flags.DEFINE_integer("num_dialogues", 3000, "Training dialogues to generate.")
flags.DEFINE_integer("num_eval_dialogues", 1000, "Held-out dialogues whose user requests become the SR, D-STS and "
                                                 "intent sentences, and which are the dialogue-level set.")
flags.DEFINE_integer("random_seed", 0, "Random seed; the same seed always gives the same files.")
flags.DEFINE_alias("seed", "random_seed")
flags.DEFINE_integer("num_sr_candidates", 100, "Sentences BM25 retrieves per SR query (paper: 100).")
flags.DEFINE_integer("max_sr_positives", 30, "Most positives kept per SR query (paper: 30).")
flags.DEFINE_integer("num_sts_pairs", 800, "D-STS pairs to sample, an equal share per score 1..5.")
flags.DEFINE_float("intent_support_fraction", 0.5, "Share of each intent's evaluation sentences in the intent "
                                                  "set's support pool; the rest are its test queries.")
flags.mark_flag_as_required("output_dir")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    run_generate_demo_corpus(config_from_flags(DemoCorpusConfig, FLAGS))


if __name__ == "__main__":
    run(main)
