"""A batch in several passes through the model (`--max_examples_per_pass`), for a batch whose
activations do not fit in one device's memory: one replica's gradient of the whole batch's
loss, one part of its batch in memory at a time, and one update per batch.

How depends on the loss:

* a sum of per-example terms (`Objective.example_losses`: dial2vec, DialogueCSE, the siamese
  baselines, MLM): plain gradient accumulation, here. Each part's loss is its terms' sum over
  the whole batch's denominator (`losses.mean_denominators`: the global batch size, or MLM's
  masked tokens of the whole global batch), computed before the first part, so the parts'
  losses and gradients add up to the whole batch's exactly, whatever the parts' sizes or
  weights;
* in-batch negatives (`Objective.embed`: DSE, SimCSE): accumulation would give each part
  only its own negatives, another loss, so `grad_cache` embeds the parts and backpropagates
  the whole batch's loss into each (GradCache).

The update is the whole batch's without dropout. With it, each pass draws its own masks, which
differ from those of one pass over the batch, as the batch's masks differ from step to step.

The passes run one after another (each waits for the previous one's outputs), since a graph
would otherwise be free to run them side by side and hold their activations at once. A pass is
one `pass_function` called once per part.
"""

from __future__ import annotations

import tensorflow as tf

from dialoguecse_tf import losses


def pass_function(function):
    """`function` as a `tf.function` the train step calls once per pass: traced once per pass shape and
    kept as a call in the step's graph, not inlined. Unrolled, or inlined, the graph held a copy of
    the model (and of its gradient) per pass, which TensorFlow traced and optimised anew each time:
    MiniLM's DSE step of 64 pairs in 8 passes took 219 s to build unrolled (commit 65b7cc7), 147 s
    inlined, 48 s as calls; 19 s in one pass (2 CPU cores)."""
    return tf.function(function, experimental_attributes={"_noinline": True})


def pass_sizes(batch_size: int, max_examples: int) -> list:
    """Sizes of the passes over a batch: `max_examples` each, the last one what remains."""
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise ValueError(f"max_examples_per_pass must be a positive int, got {max_examples!r}")
    full, rest = divmod(batch_size, max_examples)
    return [max_examples] * full + ([rest] if rest else [])


def static_batch_size(batch) -> int:
    batch_size = tf.nest.flatten(batch)[0].shape[0]
    if batch_size is None:
        raise ValueError("a batch in several passes needs a static batch size (batch with drop_remainder=True)")
    return batch_size


def split_batch(batch, sizes: list) -> list:
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [tf.nest.map_structure(lambda t, s=start, n=size: t[s:s + n], batch) for start, size in zip(starts, sizes)]


def after(tensors: list, batch):
    """`batch`, computed only once `tensors` are: the next pass starts after the previous one."""
    if not tensors:
        return batch
    with tf.control_dependencies(tensors):
        return tf.nest.map_structure(tf.identity, batch)


def add_gradients(totals: list, gradients: list) -> list:
    """The running sums of the passes' gradients (None where no pass reached a weight)."""

    def add(total, gradient):
        if gradient is None:
            return total
        if total is None:
            return gradient
        if isinstance(gradient, tf.IndexedSlices):
            # An embedding table's rows, as the optimizer takes them from one pass over the batch:
            # repeated ids are rows to add up.
            return tf.IndexedSlices(tf.concat([total.values, gradient.values], axis=0),
                                    tf.concat([total.indices, gradient.indices], axis=0), gradient.dense_shape)
        return total + gradient

    return [add(total, gradient) for total, gradient in zip(totals, gradients)]


def accumulated_gradients(model, optimizer, batch, objective, global_batch_size: int, max_examples: int):
    """(loss, metrics, gradients of `model.trainable_variables`) of one replica's `batch` under
    `objective.example_losses`, `max_examples` at a time, as `objective.compute_loss` and
    `tape.gradient(optimizer.scale_loss(loss))` over the whole batch give them; a weight the loss
    does not reach gets None."""
    batch_size = static_batch_size(batch)
    sizes = pass_sizes(batch_size, max_examples)
    denominators = losses.mean_denominators(objective.example_weights(batch), batch_size, global_batch_size)
    variables = model.trainable_variables

    @pass_function
    def one_pass(part):
        with tf.GradientTape() as tape:
            terms, metric_terms = objective.example_losses(model, part, True)
            part_loss, part_metrics = losses.example_means(terms, metric_terms, denominators)
            scaled_loss = optimizer.scale_loss(part_loss)
        return part_loss, part_metrics, tape.gradient(scaled_loss, variables)

    loss, metrics, totals, previous = 0.0, {}, [None] * len(variables), []
    for part in split_batch(batch, sizes):
        part_loss, part_metrics, gradients = one_pass(after(previous, part))
        totals = add_gradients(totals, gradients)
        loss += part_loss
        metrics = {name: metrics.get(name, 0.0) + value for name, value in part_metrics.items()}
        previous = [gradient for gradient in gradients if gradient is not None]
    return loss, metrics, totals
