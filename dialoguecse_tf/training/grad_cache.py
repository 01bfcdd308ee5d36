"""GradCache (Gao, Zhang, Han and Callan, RepL4NLP 2021, "Scaling Deep Contrastive Learning Batch
Size under Memory Limited Setup"): one replica's gradient of an in-batch contrastive loss,
computed with the activations of one chunk of its batch in memory at a time.

Plain gradient accumulation would split the batch's negatives among the chunks, a different
loss. Here the loss stays the full batch's:

1. every chunk is embedded without a tape, so its activations are freed once its embeddings
   exist;
2. the loss, and its gradient with respect to the embeddings, are computed on the whole batch
   (gathered across replicas as without chunks);
3. every chunk is embedded again under a tape and its share of that gradient is
   backpropagated into the weights; the chunks' weight gradients add up to the batch's.

Dropout must draw the same masks in steps 1 and 3 (the paper's RandContext): Keras draws them
from the models' `SeedGenerator` states, which are saved before step 1 and put back before
step 3, so the re-encoded chunks replay step 1's masks, and the states end where step 1 left
them. The update equals the full batch's exactly without dropout; with it, the masks are drawn
per chunk, so they differ from those of one unchunked pass, but the gradient is still the exact
gradient of the loss step 2 computed (tests/test_grad_cache.py).

The chunks run one after another (each waits for the previous one's outputs), since a graph
would otherwise be free to run them side by side and hold their activations at once.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class EmbeddingChunks:
    """How a step computes its gradient in chunks.

    Attributes:
      embed: `(model, batch, training) -> [b, ...]` the embeddings of a replica's b examples.
      loss: `embeddings -> (this replica's share of the global loss, metrics)`.
      chunk_size: examples embedded at a time on each replica.
    """

    embed: Callable
    loss: Callable
    chunk_size: int

    def __post_init__(self):
        if isinstance(self.chunk_size, bool) or not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, got {self.chunk_size!r}")


def random_state_variables(model) -> list:
    """The states of the `SeedGenerator`s `model` draws its dropout masks from: its variables
    that are not weights (Keras keeps them out of `model.weights`)."""
    weight_ids = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weight_ids]


def chunk_sizes(batch_size: int, chunk_size: int) -> list:
    """Sizes of the chunks of a batch: `chunk_size` each, the last one what remains."""
    full, rest = divmod(batch_size, chunk_size)
    return [chunk_size] * full + ([rest] if rest else [])


def _split(batch, sizes: list) -> list:
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    return [tf.nest.map_structure(lambda t, s=start, n=size: t[s:s + n], batch) for start, size in zip(starts, sizes)]


def _after(tensors: list, batch):
    """`batch`, computed only once `tensors` are: the next chunk starts after the previous one."""
    if not tensors:
        return batch
    with tf.control_dependencies(tensors):
        return tf.nest.map_structure(tf.identity, batch)


def _add(total, gradient):
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


def chunked_gradients(model, optimizer, chunks: EmbeddingChunks, batch):
    """(loss, metrics, gradients of `model.trainable_variables`) of one replica's `batch`, as
    `tape.gradient(optimizer.scale_loss(loss))` over the whole batch gives them (see the module
    docstring); a weight the loss does not reach gets None."""
    batch_size = tf.nest.flatten(batch)[0].shape[0]
    if batch_size is None:
        raise ValueError("embedding chunks need a static batch size (batch with drop_remainder=True)")
    sizes = chunk_sizes(batch_size, chunks.chunk_size)
    parts = _split(batch, sizes)
    random_state = random_state_variables(model)
    saved_state = [tf.identity(v.value) for v in random_state]

    embeddings, previous = [], []
    for part in parts:
        embedded = chunks.embed(model, _after(previous, part), True)
        embeddings.append(tf.stop_gradient(embedded))
        previous = [embedded]
    embeddings = tf.concat(embeddings, axis=0)
    with tf.GradientTape() as tape:
        tape.watch(embeddings)
        loss, metrics = chunks.loss(embeddings)
        scaled_loss = optimizer.scale_loss(loss)
    embedding_gradients = tf.split(tape.gradient(scaled_loss, embeddings), sizes, axis=0)

    with tf.control_dependencies(embedding_gradients):
        for variable, value in zip(random_state, saved_state):
            variable.assign(value)
    variables = model.trainable_variables
    totals = [None] * len(variables)
    previous = embedding_gradients
    for part, output_gradients in zip(parts, embedding_gradients):
        with tf.GradientTape() as tape:
            embedded = chunks.embed(model, _after(previous, part), True)
        gradients = tape.gradient(embedded, variables, output_gradients=output_gradients)
        totals = [_add(total, gradient) for total, gradient in zip(totals, gradients)]
        previous = [gradient for gradient in gradients if gradient is not None]
    return loss, metrics, totals
