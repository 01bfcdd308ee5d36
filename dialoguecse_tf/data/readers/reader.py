"""`Reader`: everything the rest of the project knows about one corpus format.

Each format's module (`authors`, `mdc`, `ecd`, `jddc`, `sgd`, `jsonl`) exports one `Reader` and
`registry` lists them. From it `read_corpus` reads the format, the min-turns filter takes its
default (`registry.default_min_turns`) and the data-prep entry points generate their
`--input_format` choices and help and their `--min_turns` help (`cli.flag_utils`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from dialoguecse_tf.data.dialogue import Dialogue


@dataclasses.dataclass(frozen=True)
class Reader:
    """One corpus format.

    Attributes:
      name: the format's `--input_format` value.
      read: `read(path, skip_malformed=False, stats=None)`, an iterator of the file's
        `Dialogue`s that counts into `stats` (a `PrepStats`) and raises `DataFormatError`
        ("file:line: message") on a malformed record unless `skip_malformed`.
      min_turns: the least number of turns a dialogue of this format keeps by default (0 keeps
        all), the `--min_turns` a user does not set.
      help: one line naming the format, for `--input_format`'s help.
    """

    name: str
    read: Callable[..., Iterator[Dialogue]]
    min_turns: int
    help: str
