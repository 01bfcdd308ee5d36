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
gradient of the loss step 2 computed (tests/training/test_grad_cache.py).

The chunks run one after another, as the passes of `accumulation`, the other way of splitting
a batch (for losses that are sums of per-example terms). Each step (embed; embed and
backpropagate) is one `accumulation.pass_function` called once per chunk.
"""

from __future__ import annotations

import tensorflow as tf

from dialoguecse_tf.training.accumulation import (add_gradients, after, pass_function, pass_sizes, split_batch,
                                                  static_batch_size)


def random_state_variables(model) -> list:
    """The states of the `SeedGenerator`s `model` draws its dropout masks from: its variables
    that are not weights (Keras keeps them out of `model.weights`)."""
    weight_ids = {id(v) for v in model.weights}
    return [v for v in model.variables if id(v) not in weight_ids]


def chunked_gradients(model, optimizer, batch, objective, global_batch_size: int, max_examples: int):
    """(loss, metrics, gradients of `model.trainable_variables`) of one replica's `batch` under
    `objective.embed` and `objective.loss_of_embeddings`, `max_examples` embedded at a time, as
    `tape.gradient(optimizer.scale_loss(loss))` over the whole batch gives them (see the module
    docstring); a weight the loss does not reach gets None."""
    sizes = pass_sizes(static_batch_size(batch), max_examples)
    parts = split_batch(batch, sizes)
    random_state = random_state_variables(model)
    saved_state = [tf.identity(v.value) for v in random_state]

    variables = model.trainable_variables
    embed = pass_function(lambda part: objective.embed(model, part, True))

    @pass_function
    def backpropagate(part, output_gradients):
        with tf.GradientTape() as tape:
            embedded = objective.embed(model, part, True)
        return tape.gradient(embedded, variables, output_gradients=output_gradients)

    embeddings, previous = [], []
    for part in parts:
        embedded = embed(after(previous, part))
        embeddings.append(tf.stop_gradient(embedded))
        previous = [embedded]
    embeddings = tf.concat(embeddings, axis=0)
    with tf.GradientTape() as tape:
        tape.watch(embeddings)
        loss, metrics = objective.loss_of_embeddings(embeddings, global_batch_size)
        scaled_loss = optimizer.scale_loss(loss)
    embedding_gradients = tf.split(tape.gradient(scaled_loss, embeddings), sizes, axis=0)

    with tf.control_dependencies(embedding_gradients):
        for variable, value in zip(random_state, saved_state):
            variable.assign(value)
    totals = [None] * len(variables)
    previous = embedding_gradients
    for part, output_gradients in zip(parts, embedding_gradients):
        gradients = backpropagate(after(previous, part), output_gradients)
        totals = add_gradients(totals, gradients)
        previous = [gradient for gradient in gradients if gradient is not None]
    return loss, metrics, totals
