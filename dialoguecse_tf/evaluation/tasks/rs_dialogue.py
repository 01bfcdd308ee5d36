"""Dialogue-level response selection (DSE, section 4.2.2 and Table 4: DSTC7-Ubuntu), as the
release's `run_similarity.py --TASK rs_ubuntu` computes it (l.151-202): each context against
its true response (option 0) and its row's 100 candidates, 101 options; recall@1, 3, 5, 10.

The context is one text, embedded as a sentence is, cut to the run's max_seq_length keeping its
first tokens, as the release's tokenizer cuts it. The release embeds the options at 32 tokens
(l.173), the contexts at --max_seq_length (128 in `evaluate/scripts/sim.sh`); here every text
takes the run's one max_seq_length (an evaluation reads all its sets at one length).

The paper ranks a ground truth among 100 candidates; DSTC7's candidates, which the release
reads, hold the true response once more, and its copy ties with option 0 (see
`evaluation.response_selection`: NumPy's unstable sort then decides, as in the release). The
release's reading is reported (`drs_r*`, the primary `drs_r1`) and beside it the set's recall
with that copy left out (`drs_options_r*`): the true response among its 100 options. The paper
reports Top-1, 3 and 10; the release adds 5.
"""

import numpy as np

from dialoguecse_tf.data.response_sets import read_dialogue_rs_file
from dialoguecse_tf.evaluation.evaluate import embed_unique
from dialoguecse_tf.evaluation.response_selection import (RECALL_AT, dialogue_recalls, dialogue_scores,
                                                          options_recalls, release_unit_rows)
from dialoguecse_tf.evaluation.tasks.base import Evaluator, register_task


@register_task
class DialogueRsEvaluator(Evaluator):
    name = "rs_dialogue"
    task = "rs_dialogue"
    label = "d-RS"
    count_key = "rs_dialogue_contexts"
    description = ("dialogue-level response selection (DSE's DSTC7-Ubuntu protocol): each context against its true "
                   "response and its 100 candidates, recall@k as the release counts it and with the true "
                   "response's copy among the candidates left out")
    metrics = (tuple((f"drs_r{k}", f"d-RS R@{k}") for k in RECALL_AT)
               + tuple((f"drs_options_r{k}", f"d-RS R@{k} (100 options)") for k in RECALL_AT))
    primary_metric = "drs_r1"

    read = staticmethod(read_dialogue_rs_file)

    @property
    def size(self) -> int:
        return len(self.data.contexts)

    def record(self) -> dict:
        return {**super().record(), "rs_dialogue_responses_among_candidates": self.data.responses_among_candidates,
                "rs_dialogue_blank_texts": self.data.blank_texts}

    def __call__(self, encode) -> dict:
        options = [(response,) + candidates for response, candidates in zip(self.data.responses, self.data.candidates)]
        vectors, index = embed_unique(encode, list(self.data.contexts) + [text for row in options for text in row])
        # Row by row, so scaling the distinct vectors once scales every occurrence alike.
        vectors = release_unit_rows(vectors)
        contexts = vectors[[index[text] for text in self.data.contexts]]
        scores = dialogue_scores(contexts, vectors, [[index[text] for text in row] for row in options])
        # The first candidate holding the true response's text is its copy (column >= 1).
        copies = [row.index(row[0], 1) if row[0] in row[1:] else -1 for row in options]
        return {**{f"drs_r{k}": value for k, value in dialogue_recalls(scores).items()},
                **{f"drs_options_r{k}": value for k, value in options_recalls(scores, np.asarray(copies)).items()}}
