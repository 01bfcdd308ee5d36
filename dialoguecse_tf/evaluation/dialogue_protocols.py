"""The dialogue-embedding protocols of a results row (`registry.DIALOGUE_PROTOCOLS`): how dial2vec's
comparison turns each kind of model into one vector per dialogue.

dial2vec's paper (section 4.3) and release embed each baseline the way it was built for, and so
does the project, one protocol per row:

* `interlocutor` (dial2vec rows): `DialogueEncoder` with interlocutor pooling, reading the
  dialogue as the checkpoint's training did (`encoder.dialogue.dialogue_settings`);
* `utterance_mean` (DialogueCSE, SiameseBERT, DSE): every utterance through the sentence path,
  the one `encode()` the sentence columns use, and the mean of a dialogue's utterance vectors,
  as the release's `get_feature` averages per-utterance features by dialogue (run.py:173-199,
  `load_data_for_simcse`, data_provider.py:141-162; `run_dialoguecse.sh`); an utterance is
  pooled as the row's sentence columns pool it, so one vector per utterance serves both;
* `utterance_token_mean` (SimCSE): as the release reads a SimCSE model
  (`scripts/inference/run_simcse.sh`: `--use_sep_token False`; data_provider.py:228-250;
  network.py:105-129, 161-162): each utterance alone as "[CLS] u" with no [SEP], at most
  `dialogue_max_seq_length` tokens, the mean of all its token outputs, [CLS] included, and the
  mean of a dialogue's utterance vectors. SimCSE's own sentence columns read [CLS] (its
  release's `cls_before_pooler`, with the MLP in training only), so this row's two kinds of
  columns read the encoder in two ways, each as its authors did;
* `plain_mean` (an untouched language model): `DialogueEncoder` over `[CLS] u_1 u_2 ... u_n`,
  with no [SEP] (`run_bert.sh`: `--use_sep_token False`, data_provider.py:228-232), all-zero
  token types and the first tokens kept (l.242-250), the mean of every token's output, [CLS]
  included (the `mean` strategy, run.py:543-546, network.py:129, 138).
"""

from __future__ import annotations

import numpy as np

from dialoguecse_tf.encoder.dialogue import DialogueEncoder, dialogue_settings, dialogue_turns
from dialoguecse_tf.evaluation.registry import check_dialogue_protocol


def average_utterances(encode, dialogues) -> np.ndarray:
    """[N, D]: the mean of `encode`'s vectors of each dialogue's utterances (`encode` takes a
    list of texts and returns their [n, D] vectors)."""
    turns = [dialogue_turns(dialogue)[0] for dialogue in dialogues]
    vectors = np.asarray(encode([text for texts in turns for text in texts]))
    ends = np.cumsum([len(texts) for texts in turns])
    return np.stack([part.mean(axis=0) for part in np.split(vectors, ends[:-1])]).astype(np.float32)


def packed_dialogue_encoder(protocol: str, backbone, tokenizer, metadata: dict, max_seq_length: int):
    """The `DialogueEncoder` of the `interlocutor` or `plain_mean` protocol, or the one that packs
    each utterance of `utterance_token_mean` ("[CLS] u", no [SEP], the mean of all its tokens)."""
    if check_dialogue_protocol(protocol) == "interlocutor":
        return DialogueEncoder(backbone, tokenizer, max_seq_length, "interlocutor", **dialogue_settings(metadata))
    if protocol in ("plain_mean", "utterance_token_mean"):
        return DialogueEncoder(backbone, tokenizer, max_seq_length, "mean", truncation="head", role_segment_ids=False,
                               separators=False)
    raise ValueError(f"the {protocol!r} protocol does not pack whole dialogues")
