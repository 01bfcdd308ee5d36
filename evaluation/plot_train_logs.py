"""Summarises and plots training curves (loss, positive/negative cosine, gap) of several runs.

  python evaluation/plot_train_logs.py --log=DialogueCSE_I2=runs/x/finetune/a/train_log.jsonl \
    --log=SiameseBERT_M=runs/x/finetune/b/train_log.jsonl --output_dir=results/x --output_name=curves
"""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.evaluation.sweeps import parse_points
from dialoguecse_tf.evaluation.train_curves import load_curves, write_curves

flags.DEFINE_multi_string("log", None, "NAME=PATH of one run's train_log.jsonl; repeat, in legend order.")
flags.DEFINE_string("output_dir", None, "Where <output_name>.json/.md/.png are written.")
flags.DEFINE_string("output_name", "train_curves", "File stem.")
flags.DEFINE_integer("window", 5, "Logged steps averaged for the start and end values.")
flags.DEFINE_bool("plot", True, "Also write a PNG (needs matplotlib, the 'plot' extra).")
flags.mark_flags_as_required(["log", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    curves = load_curves(parse_points(FLAGS.log))
    for path in write_curves(curves, FLAGS.output_dir, FLAGS.output_name, FLAGS.plot, FLAGS.window):
        print(f"wrote {path}")


if __name__ == "__main__":
    run(main)
