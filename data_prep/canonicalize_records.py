"""Rewrites TFRecord files written before record serialization was made deterministic, so
equal records are equal files again (run keys, the training stage's and the experiment runner's,
hash records by their bytes). The records and their order do not change; files already canonical are left alone."""

import glob

from absl import flags

from dialoguecse_tf.cli.flag_utils import run

flags.DEFINE_multi_string("records", None, "TFRecord file or glob; repeat for several.")
flags.mark_flag_as_required("records")
FLAGS = flags.FLAGS


def main(argv):
    del argv
    from dialoguecse_tf.records.reader import canonicalize_record_file

    files = sorted({path for pattern in FLAGS.records for path in glob.glob(pattern)})
    if not files:
        raise FileNotFoundError(f"{FLAGS.records} matches no file")
    for path in files:
        print(f"{path}: {'rewritten' if canonicalize_record_file(path) else 'already canonical'}")


if __name__ == "__main__":
    run(main)
