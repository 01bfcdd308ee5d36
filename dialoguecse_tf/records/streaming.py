"""What makes a record builder independent of processing order, so that the single-process
writers and the Beam pipelines (`beam_pipeline`) write the same records for a seed.

* Dialogues carry a stable integer key (`keyed_dialogues`; `pipeline.DialogueSource` numbers them
  by file and position in the file), and every random choice made for a dialogue comes from an
  RNG seeded by (seed, record type, key) (`example_rng`), never from one shared stream.
* Corpus-wide samples (the negative pools) are bottom-k samples by a seeded hash (`BottomK`):
  each item gets a hash, the k smallest are kept. That is a uniform sample without replacement,
  computed in one pass with a heap of k items, or by Beam's `Top.Smallest` in any order; with k
  at least the number of items it is all of them, in hash order.
* Corpus-wide sets of distinct texts (MLM's: which texts are turns, which candidates are taken)
  hold 128-bit digests of the texts (`text_digest`), and Beam groups the texts by the same
  digests, so both paths tell texts apart alike.
* An example's shard is its seeded hash modulo the number of shards (`shard_of`).
"""

from __future__ import annotations

import hashlib
import heapq
import random
from typing import Iterable, Iterator

from dialoguecse_tf.data.dialogue import Dialogue

# Utterances a negative pool samples (contrastive: all turns; dialogues: each role's turns): a
# uniform sample of the corpus' that keeps the writers' memory bounded (about 150 MB of texts,
# and as much again for their word pieces in the contrastive writer) whatever the corpus size,
# and is the whole corpus below it (MDC, ECD's sample, SGD).
DEFAULT_NEGATIVE_POOL_SIZE = 1_000_000
# Dialogues whose documents MLM records draw random next segments from (`mlm.RandomNextPool`): as
# many utterances as the negative pools' 1,000,000 for dialogues of about ten turns.
DEFAULT_RANDOM_NEXT_POOL_SIZE = 100_000
_KEY_BITS = 40  # dialogues per file; a file index takes the bits above


def stable_hash(*parts) -> int:
    """A 64-bit hash of `parts` (ints and strings), the same in every process and Python version
    (the built-in `hash` of a string is salted per process)."""
    text = "\x1f".join(str(part) for part in parts)
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def example_rng(random_seed: int, record_type: str, *key) -> random.Random:
    """The RNG of everything drawn for one dialogue (or document, or round of one) of a record type."""
    return random.Random(stable_hash(random_seed, record_type, *key))


def text_digest(text: str) -> int:
    """A 128-bit hash of a text, for sets of the distinct texts of a corpus that do not hold the
    texts: at 128 bits no two texts of any corpus share one (at 64 bits, 10^9 texts would with a 3%
    chance)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest(), "little")


def dialogue_key(file_index: int, position: int) -> int:
    """The key of the `position`-th kept dialogue of the `file_index`-th input file: keys sort
    in corpus order."""
    if position >= 1 << _KEY_BITS:
        raise ValueError(f"input file {file_index} holds more than 2**{_KEY_BITS} dialogues")
    return (file_index << _KEY_BITS) | position


def shard_of(random_seed: int, record_type: str, example_key: tuple, num_shards: int) -> int:
    return stable_hash(random_seed, record_type, "shard", *example_key) % num_shards


def keyed_dialogues(dialogues) -> Iterator[tuple[int, Dialogue]]:
    """(key, dialogue) pairs of one pass over `dialogues`.

    `dialogues` is read more than once by a writer (once for its corpus-wide samples, once for
    its records), so it must be re-iterable: a `pipeline.DialogueSource` (which reads its files
    again, keyed by file and position) or a sequence (keyed by index). A one-shot iterator raises.
    """
    if hasattr(dialogues, "keyed"):
        return dialogues.keyed()
    if iter(dialogues) is dialogues:
        raise TypeError("the record writers read the corpus twice (corpus-wide samples, then records): pass a "
                        "sequence or a pipeline.DialogueSource, not a one-shot iterator")
    return enumerate(dialogues)


class BottomK:
    """The k items of smallest (hash, tiebreak) seen so far, in one pass with a heap of k items.

    `items()` returns them sorted, as Beam's `Top.Smallest(k)` does over the same tuples, so both
    paths get the same list.
    """

    def __init__(self, k: int):
        if k < 1:
            raise ValueError(f"a sample pool needs room for at least 1 item, got {k}")
        self._k = k
        self._heap: list = []  # max-heap of the kept items by negated sort key

    def add(self, item: tuple) -> None:
        if len(self._heap) < self._k:
            heapq.heappush(self._heap, _Reversed(item))
        elif item < self._heap[0].item:
            heapq.heapreplace(self._heap, _Reversed(item))

    def update(self, items: Iterable[tuple]) -> "BottomK":
        for item in items:
            self.add(item)
        return self

    def __len__(self) -> int:
        return len(self._heap)

    def items(self) -> list:
        return sorted(entry.item for entry in self._heap)


class _Reversed:
    __slots__ = ("item",)

    def __init__(self, item):
        self.item = item

    def __lt__(self, other: "_Reversed") -> bool:
        return other.item < self.item
