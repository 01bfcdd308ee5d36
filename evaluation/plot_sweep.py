"""Collects the evaluation runs of one hyper-parameter sweep into a table (JSON, Markdown) and a PNG."""

from absl import flags

from dialoguecse_tf.cli.flag_utils import run
from dialoguecse_tf.evaluation.sweeps import collect_sweep, parse_points, write_sweep

flags.DEFINE_string("parameter", None, "Name of the swept hyper-parameter, e.g. temperature.")
flags.DEFINE_multi_string("point", None, "VALUE=PATH of one sweep point's results.json; repeat, in order.")
flags.DEFINE_string("output_dir", None, "Where <output_name>.json/.md/.png are written.")
flags.DEFINE_string("output_name", None, "File stem; defaults to the parameter name.")
flags.DEFINE_bool("plot", True, "Also write a PNG plot (needs matplotlib, the 'plot' extra).")
flags.mark_flags_as_required(["parameter", "point", "output_dir"])
FLAGS = flags.FLAGS


def main(argv):
    del argv
    for path in write_sweep(collect_sweep(FLAGS.parameter, parse_points(FLAGS.point)), FLAGS.output_dir,
                            FLAGS.output_name or FLAGS.parameter, FLAGS.plot):
        print(f"wrote {path}")


if __name__ == "__main__":
    run(main)
