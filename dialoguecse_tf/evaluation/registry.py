"""Names of the baselines an evaluation can ask for, how Table 2 names their rows, and the
dialogue-embedding protocols a row's dialogue columns can be scored with.

Kept free of TensorFlow so that configs and command lines can be checked instantly;
`baselines.py` holds the code that builds each one.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class BaselineInfo:
    name: str
    display_template: str  # "{model}" is the checkpoint's display name, e.g. "BERT" or "BERT(adapt)"
    needs_train_texts: bool  # fitted on unlabelled training sentences
    summary: str


BASELINES: dict[str, BaselineInfo] = {
    info.name: info
    for info in (
        BaselineInfo("cls", "{model}-CLS", False, "last layer's [CLS] output"),
        BaselineInfo("avg", "{model}-avg", False, "masked mean of the last layer's outputs"),
        BaselineInfo("whitening", "{model}-whitening", True, "avg vectors whitened (Su et al. 2021)"),
        BaselineInfo("flow", "{model}-flow", True, "avg vectors through a fitted normalising flow (Li et al. 2020)"),
        BaselineInfo(
            "avg_token_embeddings", "Avg. {model} token embeddings", False,
            "mean of BERT's input word-piece embeddings (stand-in for Avg. GloVe)",
        ),
    )
}


def get_baseline(name: str) -> BaselineInfo:
    try:
        return BASELINES[name]
    except KeyError:
        raise ValueError(f"unknown baseline {name!r}; known baselines: {', '.join(BASELINES)}") from None


def display_name(baseline_name: str, model_name: str) -> str:
    """Table 2's row name, e.g. ("flow", "BERT(adapt)") -> "BERT(adapt)-flow"."""
    return get_baseline(baseline_name).display_template.format(model=model_name)


# How a results row embeds whole dialogues, after dial2vec's comparison (its paper, section 4.3,
# and release: each kind of model is embedded its own way); `dialogue_protocols.py` builds them.
DIALOGUE_PROTOCOLS: dict[str, str] = {
    "interlocutor": "dial2vec's own: the dialogue packed into one sequence, the mean of each interlocutor's token "
                    "outputs, the two summed (release: network.py:162, mean_by_role)",
    "utterance_mean": "the sentence encoders' (SimCSE, DSE, DialogueCSE, SiameseBERT): each utterance embedded alone "
                      "as the sentence columns are, the dialogue's utterance vectors averaged (release: run.py:173-199, "
                      "data_provider.py:141-162)",
    "utterance_token_mean": "SimCSE's: each utterance alone as [CLS] and its word pieces with no [SEP] "
                            "(run_simcse.sh: --use_sep_token False), the mean of all its token outputs, [CLS] "
                            "included; the dialogue's utterance vectors averaged (release: run.py get_feature, "
                            "data_provider.py load_data_for_simcse, network.py:105-129)",
    "plain_mean": "an untouched language model's: the whole dialogue as [CLS] and every turn's word pieces with no "
                  "[SEP] (--use_sep_token False), its first tokens, the plain mean of all token outputs (release: "
                  "run_bert.sh, run.py:543-546)",
}


def check_dialogue_protocol(name: str) -> str:
    if name not in DIALOGUE_PROTOCOLS:
        raise ValueError(f"unknown dialogue protocol {name!r}; known protocols: {', '.join(DIALOGUE_PROTOCOLS)}")
    return name
