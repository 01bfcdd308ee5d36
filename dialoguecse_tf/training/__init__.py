"""The training machinery the one training stage (`stage.py`) runs.

`strategy` creates the `tf.distribute` strategy and feeds it batches, `optimizers` holds the
learning-rate schedules and optimizers, `loop` the resumable training loop and `train_log` the
`train_log.jsonl` and TensorBoard logs it writes. `accumulation` and `grad_cache` compute a
batch's gradient in several passes through the model (`--max_examples_per_pass`).
"""
