"""The corpus a data-prep stage reads: which files, how preprocessed (paper, section 5.1.1), and
the stream of their dialogues every record writer reads, in this process or in Beam workers.
Pure Python: nothing here imports TensorFlow.
"""

import dataclasses
import glob

from absl import logging

from dialoguecse_tf.data.preprocessing import PrepStats, preprocess
from dialoguecse_tf.data.readers import default_min_turns, read_corpus
from dialoguecse_tf.records.streaming import dialogue_key


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    """Which files to read and how to preprocess them (paper, section 5.1.1).

    `min_turns=None` takes the format's default (`readers.default_min_turns`); it is
    resolved here, so the config written beside a stage's output holds the number used.
    """

    input_file: tuple = ()
    input_format: str = "jsonl"
    skip_malformed: bool = False
    merge_speakers: bool = True
    min_turns: int | None = None

    def __post_init__(self):
        if self.min_turns is None:
            object.__setattr__(self, "min_turns", default_min_turns(self.input_format))


def expand_input_files(patterns) -> list:
    paths = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern))
        if not matches:
            raise FileNotFoundError(f"input_file {pattern!r} matches no file")
        paths.extend(matches)
    return paths


def read_file_dialogues(corpus: CorpusConfig, file_index: int, path: str, stats: PrepStats):
    """(key, dialogue) of every dialogue of one input file that preprocessing keeps, streamed;
    counts into `stats`. The single-process writers and the Beam pipelines both read through it."""
    raw = read_corpus(path, corpus.input_format, skip_malformed=corpus.skip_malformed, stats=stats)
    for position, dialogue in enumerate(preprocess(raw, corpus.merge_speakers, corpus.min_turns, stats)):
        yield dialogue_key(file_index, position), dialogue


class DialogueSource:
    """The preprocessed dialogues of a corpus, read file by file and line by line on each pass:
    no list of the corpus is ever held.

    The record writers read it twice (corpus-wide samples, then records); the first complete
    pass counts into `stats`, later ones into scratch counters, so the counts are one pass's.
    A pass that yields no dialogue raises ValueError saying why.
    """

    def __init__(self, corpus: CorpusConfig, stats: PrepStats):
        self.corpus = corpus
        self.paths = expand_input_files(corpus.input_file)
        self._stats = stats
        self._counted = False

    def keyed(self):
        stats = PrepStats() if self._counted else self._stats
        kept = 0
        for file_index, path in enumerate(self.paths):
            for item in read_file_dialogues(self.corpus, file_index, path, stats):
                kept += 1
                yield item
            if not self._counted:
                logging.info("[read] %s: %d dialogues kept so far", path, kept)
        if not kept:
            raise no_dialogue_error(self.corpus, stats)
        self._counted = True

    def __iter__(self):
        return (dialogue for _, dialogue in self.keyed())


def no_dialogue_error(corpus: CorpusConfig, stats: PrepStats) -> ValueError:
    read, too_short = stats["dialogues_read"], stats.dropped.get("too_few_turns", 0)
    why = (f"min_turns={corpus.min_turns} dropped all {read} dialogues read (fewer turns after merging a "
           f"speaker's consecutive utterances; --min_turns=0 keeps them)" if read and too_short == read else
           f"{read} dialogues read, {too_short} dropped by min_turns={corpus.min_turns}")
    return ValueError(f"no dialogue left after reading and preprocessing {list(corpus.input_file)}: {why}")


def load_dialogues(corpus: CorpusConfig, stats: PrepStats) -> list:
    """Every preprocessed dialogue as a list (the vocabulary and SR-set stages, which need all
    texts anyway); counts into `stats`."""
    return list(DialogueSource(corpus, stats))


def corpus_texts(dialogues) -> list:
    """Every utterance, plus the candidates the authors' format carries, each once."""
    seen = {}
    for dialogue in dialogues:
        for turn in dialogue.turns:
            seen.setdefault(turn.text, None)
        for candidate in dialogue.candidates or ():
            seen.setdefault(candidate, None)
    return list(seen)
