"""Named settings of the papers' runs, in code: `--preset=NAME` sets these values, and any flag
given on the command line still wins. Keys are `TrainConfig` fields, `objective`, or fields
of the objective's options.
"""

from __future__ import annotations

# Section 5.3: MLM continued pretraining of BERT-base-chinese on each corpus, lr 2e-5,
# batch 50, length 50, about half an epoch; the contrastive stage: lr 5e-5, batch 20,
# 3 context turns, 9 negatives, tau 0.1, bottom 6 layers frozen, one epoch.
_PAPER_MLM = {
    "objective": "mlm", "max_seq_length": 50, "max_predictions_per_seq": 10, "train_batch_size": 50,
    "learning_rate": 2e-5, "num_train_epochs": 0.5, "num_warmup_steps": 1000, "save_checkpoints_steps": 1000,
    "log_steps": 100, "random_seed": 12345,
}
_PAPER_CONTRASTIVE = {
    "num_context_turns": 3, "num_negatives": 9, "num_frozen_layers": 6, "max_seq_length": 50,
    "train_batch_size": 20, "learning_rate": 5e-5, "num_train_epochs": 1.0, "num_warmup_steps": 1000,
    "save_checkpoints_steps": 1000, "log_steps": 100, "eval_steps": 5000, "random_seed": 12345,
}

PRESETS: dict[str, dict] = {
    "paper_mlm": _PAPER_MLM,
    "paper_dialoguecse_i2": {**_PAPER_CONTRASTIVE, "objective": "dialoguecse", "aggregation": "mean",
                             "temperature": 0.1},
    "paper_dialoguecse_i1": {**_PAPER_CONTRASTIVE, "objective": "dialoguecse", "aggregation": "attention",
                             "temperature": 0.1},
    "paper_siamese_s": {**_PAPER_CONTRASTIVE, "objective": "siamese_s"},
    "paper_siamese_m": {**_PAPER_CONTRASTIVE, "objective": "siamese_m"},
}


def get_preset(name: str) -> dict:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None
