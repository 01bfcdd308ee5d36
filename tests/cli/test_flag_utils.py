"""cli.flag_utils.clear_errors: an expected failure ends in one line that holds its cause."""

import tensorflow as tf

from dialoguecse_tf.cli.flag_utils import clear_errors


def test_an_error_inside_a_traced_function_ends_in_its_root_cause():
    @tf.function
    def unpack(values):
        first, second = []  # noqa: F841 (fails when traced, as an optimizer given no gradient does)
        return values

    message = clear_errors(lambda argv: unpack(tf.constant(1)))([])
    assert "\n" not in message
    assert message == "error: ValueError: not enough values to unpack (expected 2, got 0)"


def test_a_plain_error_keeps_its_first_line():
    def main(argv):
        raise ValueError("records.tfrecord:3: bad record\nsecond line")

    assert clear_errors(main)([]) == "error: ValueError: records.tfrecord:3: bad record"
