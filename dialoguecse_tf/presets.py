"""Named settings, in code: the papers' runs and the CPU settings behind the committed tables.

`--preset=NAME` sets these values, and any flag given on the command line still wins. Keys are `TrainConfig`
fields, `objective`, or fields of the objective's options. `paper_*` are the papers' settings
(`run_scripts/{pretrain,finetune}_{ecd,jddc,mdc}.sh` run them); `cpu_*` are the 2-CPU-core
settings the experiments under `experiments/` train with.

Frozen layers are a count: the `paper_*` presets freeze the papers' bottom 6 layers of a
12-layer BERT whatever the encoder's depth. On an encoder of 6 layers or fewer (e.g. MiniLM)
that freezes everything, and the run is refused with the value that freezes the same half
(`--num_frozen_layers=3` for 6 layers); a deeper encoder keeps 6 frozen.
"""

from __future__ import annotations

from dialoguecse_tf.precision import DEFAULT_PRECISION

# Paper, section 5.3: max length 50 for ECD and MDC, 100 for JDDC.
_MAX_SEQ_LENGTH = {"ecd": 50, "jddc": 100, "mdc": 50}

# MLM continued pretraining of BERT-base-chinese: lr 2e-5, batch 50, about half an epoch.
_MLM = {
    "objective": "mlm", "max_predictions_per_seq": 10, "train_batch_size": 50, "learning_rate": 2e-5,
    "num_train_epochs": 0.5, "num_warmup_steps": 1000, "save_checkpoints_steps": 1000, "log_steps": 100,
    "random_seed": 12345,
}
# The contrastive stage: lr 5e-5, batch 20, 3 context turns (per side in the released code),
# 9 negatives, tau 0.1, bottom 6 layers frozen; evaluated every 5,000 steps, the best kept.
_CONTRASTIVE = {
    "num_context_turns": 3, "num_negatives": 9, "num_frozen_layers": 6, "train_batch_size": 20,
    "learning_rate": 5e-5, "num_train_epochs": 1.0, "save_checkpoints_steps": 1000, "log_steps": 100,
    "eval_steps": 5000, "random_seed": 12345,
}
# The authors' released code: its own optimizer and schedule, no warmup (see
# objectives/dialoguecse.py); its round attention is I1-like, so "released" names the code
# exactly and "_i2" the same arithmetic without alpha.
_RELEASED = {**_CONTRASTIVE, "objective": "dialoguecse", "variant": "released", "num_warmup_steps": 0,
             "temperature": 0.1}
_PAPER_TEXT = {**_CONTRASTIVE, "objective": "dialoguecse", "variant": "paper_text", "num_warmup_steps": 1000,
               "temperature": 0.1}
_SIAMESE = {**_CONTRASTIVE, "num_warmup_steps": 1000}

PRESETS: dict[str, dict] = {}
for _corpus, _length in _MAX_SEQ_LENGTH.items():
    _paper = {"max_seq_length": _length}
    PRESETS.update({
        f"paper_{_corpus}_mlm": {**_MLM, **_paper},
        f"paper_{_corpus}_dialoguecse": {**_RELEASED, **_paper, "aggregation": "attention"},
        f"paper_{_corpus}_dialoguecse_i2": {**_RELEASED, **_paper, "aggregation": "mean"},
        f"paper_{_corpus}_dialoguecse_paper_text_i1": {**_PAPER_TEXT, **_paper, "aggregation": "attention"},
        f"paper_{_corpus}_dialoguecse_paper_text_i2": {**_PAPER_TEXT, **_paper, "aggregation": "mean"},
        f"paper_{_corpus}_siamese_s": {**_SIAMESE, **_paper, "objective": "siamese_s"},
        f"paper_{_corpus}_siamese_m": {**_SIAMESE, **_paper, "objective": "siamese_m"},
    })
# The CPU settings behind the committed tables (experiments/*.yaml name them; 2 CPU cores).
# Chinese track: the small BERT of experiments/configs/small_bert.json (4 layers, 128 wide)
# pretrained from scratch with MLM on the ECD training sample, then each contrastive model
# for 600 steps of 20 samples with half its layers frozen.
PRESETS["cpu_zh_mlm"] = {
    "objective": "mlm", "max_seq_length": 50, "max_predictions_per_seq": 10, "train_batch_size": 50,
    "learning_rate": 1e-3, "num_train_steps": 4000, "num_warmup_steps": 200, "save_checkpoints_steps": 500,
    "log_steps": 50, "random_seed": 12345,
}
_CPU_ZH = {
    "max_seq_length": 50, "num_context_turns": 3, "num_negatives": 9, "num_frozen_layers": 2,
    "train_batch_size": 20, "learning_rate": 1e-4, "num_train_steps": 600, "num_warmup_steps": 60,
    "save_checkpoints_steps": 200, "log_steps": 10, "num_length_buckets": 4, "random_seed": 12345,
}
# English track: all-MiniLM-L6-v2 (6 layers, the bottom 3 frozen) adapted with 400 MLM steps on
# SGD train, then each contrastive model for 300 steps of 20 samples.
PRESETS["cpu_en_mlm"] = {
    "objective": "mlm", "max_seq_length": 64, "max_predictions_per_seq": 10, "train_batch_size": 32,
    "learning_rate": 5e-5, "num_train_steps": 400, "num_warmup_steps": 40, "save_checkpoints_steps": 200,
    "log_steps": 20, "random_seed": 12345,
}
_CPU_EN = {
    "max_seq_length": 40, "num_context_turns": 3, "num_negatives": 9, "num_frozen_layers": 3,
    "train_batch_size": 20, "learning_rate": 5e-5, "num_train_steps": 300, "num_warmup_steps": 30,
    "save_checkpoints_steps": 100, "log_steps": 10, "random_seed": 12345,
}
for _track, _base in (("zh", _CPU_ZH), ("en", _CPU_EN)):
    _dialoguecse = {**_base, "objective": "dialoguecse", "variant": "released", "temperature": 0.1}
    PRESETS.update({
        f"cpu_{_track}_dialoguecse": {**_dialoguecse, "aggregation": "attention"},
        f"cpu_{_track}_dialoguecse_i2": {**_dialoguecse, "aggregation": "mean"},
        f"cpu_{_track}_siamese_s": {**_base, "objective": "siamese_s"},
        f"cpu_{_track}_siamese_m": {**_base, "objective": "siamese_m"},
    })

# DSE (Zhou et al., NAACL 2022, App. A.2 and the authors' README command): batch 1,024 pairs of
# at most 32 tokens, tau 0.05, Adam at a constant 3e-6 (encoder) and 3e-4 (head), 15 epochs,
# every layer trained, seed 1.
_DSE = {"objective": "dse", "contrast_type": "HardNeg", "temperature": 0.05, "max_seq_length": 32,
        "num_frozen_layers": 0, "num_warmup_steps": 0, "log_steps": 100}
PRESETS["paper_dse"] = {**_DSE, "train_batch_size": 1024, "learning_rate": 3e-6, "head_learning_rate_scale": 100.0,
                        "num_train_epochs": 15.0, "save_checkpoints_steps": 1000, "random_seed": 1}
# The dse_sgd_minilm experiment (experiments/dse_sgd_minilm.yaml) on 2 CPU cores: 64 pairs at
# SimCSE's 3e-5 for that batch, the head at the paper's 3e-4.
PRESETS["cpu_dse"] = {**_DSE, "train_batch_size": 64, "learning_rate": 3e-5, "head_learning_rate_scale": 10.0,
                      "num_train_steps": 300, "save_checkpoints_steps": 100, "log_steps": 10, "random_seed": 12345}

# Unsupervised SimCSE (Gao et al., EMNLP 2021), the release's published BERT-base settings (its
# README's table and run_unsup_example.sh): batch 64, lr 3e-5 with linear decay and no warmup,
# 32 tokens, 1 epoch, tau 0.05, the cls pooler with its MLP in training only, the Trainer's seed
# 42. The release also trains in fp16 (add --precision=float16 on a GPU) and keeps the checkpoint
# best on STS-B dev, evaluated every 125 steps. The project has no STS-B: with --eval_sts_file or
# --eval_select_file (e.g. a D-STS or SR dev set) the stage keeps the encoder best on it every
# 125 steps in best_encoder/; without one, the final encoder is the result.
_SIMCSE = {"objective": "simcse", "pooler": "cls", "mlp_only_train": True, "temperature": 0.05,
           "max_seq_length": 32, "num_warmup_steps": 0, "weight_decay": 0.0}
PRESETS["paper_simcse"] = {**_SIMCSE, "train_batch_size": 64, "learning_rate": 3e-5, "num_train_epochs": 1.0,
                           "eval_steps": 125, "save_checkpoints_steps": 125, "log_steps": 125, "random_seed": 42}
# MiniLM on 2 CPU cores, as cpu_dse: 300 steps of 64 utterances (128 texts) at SimCSE's rate for that batch.
PRESETS["cpu_simcse"] = {**_SIMCSE, "train_batch_size": 64, "learning_rate": 3e-5, "num_train_steps": 300,
                         "save_checkpoints_steps": 100, "log_steps": 10, "random_seed": 12345}

# dial2vec (Liu et al., EMNLP 2022, section 4.1 and run_plato.sh): 512 tokens, 9 negatives, window
# 10, batch 5, lr 1e-5 with 10 % warmup, bottom 6 layers frozen, 5 epochs on SGD, the encoder best
# by dev purity (every 100 steps in the release) kept; tau 0.2 as in the paper and scripts, 0.05
# as the authors' released checkpoints. An epoch is one pass over the records, which hold each
# dialogue 10 times with fresh negatives (create_dialogue_data.py --samples_per_dialogue=10, the
# release's samples_per_line): the release's epoch, so 5 epochs here are its 5 epochs on one
# device: 5 x 10 x 12,164 / 5 = 121,640 steps on SGD train (12,174 dialogues, 10 of them under 5
# turns: results/dial2vec_sgd_minilm/dialogue_records_prep_stats.json as made at d878363, on the
# whole split). Records written with fewer samples per dialogue make each epoch that much shorter.
_DIAL2VEC = {"objective": "dial2vec", "max_seq_length": 512, "num_negatives": 9, "window": 10,
             "train_batch_size": 5, "learning_rate": 1e-5, "num_frozen_layers": 6, "log_steps": 20,
             "random_seed": 12345}
PRESETS["paper_dial2vec"] = {**_DIAL2VEC, "temperature": 0.2, "num_train_epochs": 5.0, "warmup_proportion": 0.1,
                             "eval_steps": 100, "save_checkpoints_steps": 100}
PRESETS["paper_dial2vec_tau005"] = {**PRESETS["paper_dial2vec"], "temperature": 0.05}
# The dial2vec_sgd_minilm experiment (experiments/dial2vec_sgd_minilm.yaml) on 2 CPU cores:
# MiniLM (6 layers, the bottom 3 frozen), 192 tokens per dialogue, 4 negatives, batch 4
# dialogues (20 sequences per step).
PRESETS["cpu_dial2vec"] = {**_DIAL2VEC, "max_seq_length": 192, "num_negatives": 4, "train_batch_size": 4,
                           "learning_rate": 2e-5, "num_frozen_layers": 3, "temperature": 0.2, "num_train_steps": 300,
                           "num_warmup_steps": 30, "eval_steps": 100, "save_checkpoints_steps": 100, "log_steps": 10}

# The Chinese track of the benchmark: SimCSE, DSE and dial2vec take DialogueCSE's ECD budget
# (600 steps at lr 1e-4; dial2vec at 128 tokens with half of the small BERT's 4 layers frozen).
PRESETS["cpu_zh_simcse"] = {**PRESETS["cpu_simcse"], "learning_rate": 1e-4, "num_train_steps": 600}
PRESETS["cpu_zh_dse"] = {**PRESETS["cpu_dse"], "learning_rate": 1e-4, "num_train_steps": 600}
PRESETS["cpu_zh_dial2vec"] = {**PRESETS["cpu_dial2vec"], "max_seq_length": 128, "learning_rate": 1e-4,
                              "num_frozen_layers": 2, "num_train_steps": 600, "num_warmup_steps": 60,
                              "eval_steps": 0}

# Every preset names its precision: float32, as the releases train on CPU and the committed tables
# were trained (SimCSE's release trains in fp16 on a GPU, above). What bfloat16 does to the
# trained quality is measured in results/bfloat16_quality; --precision on the command line wins.
for _settings in PRESETS.values():
    _settings["precision"] = DEFAULT_PRECISION


def get_preset(name: str) -> dict:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}") from None
