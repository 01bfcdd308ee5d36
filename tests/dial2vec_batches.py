"""Random dial2vec inputs: the token masks, roles and turns of [batch, samples, length] dialogues,
shared by dial2vec's loss tests and gradient accumulation's."""

import numpy as np


def random_batch(rng, batch, samples, length):
    """(mask, roles, turns) [batch, samples, length]: padded dialogues of short alternating turns."""
    lengths = rng.integers(length // 2, length + 1, size=(batch, samples))
    mask = (np.arange(length)[None, None, :] < lengths[..., None]).astype(np.int64)
    # Turns of 1-3 tokens, alternating roles from a random first speaker; padding is turn 0, role 0.
    turns = np.cumsum(rng.random((batch, samples, length)) < 0.4, axis=-1) * mask
    first = rng.integers(0, 2, size=(batch, samples, 1))
    roles = ((turns + first) % 2) * mask
    return mask, roles, turns
