"""The training machinery the one training stage (`stage.py`) runs.

`strategy` creates the `tf.distribute` strategy and feeds it batches, `optimizers` holds the
learning-rate schedules and optimizers, `loop` the resumable training loop and `train_log` the
`train_log.jsonl` and TensorBoard logs it writes.
"""
