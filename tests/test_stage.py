"""The one training stage: periodic evaluation keeps the best encoder by the primary metric."""

import json
import os

import numpy as np

import stage_runs
from stage_runs import assert_best_is_the_first_argmax
from dialoguecse_tf import schema, stage
from dialoguecse_tf.checkpoints import load_checkpoint, save_checkpoint
from dialoguecse_tf.data.contrastive_records import write_contrastive_records
from dialoguecse_tf.encoder import build_backbone
from dialoguecse_tf.tokenization import Tokenizer


def test_periodic_evaluation_keeps_the_best_encoder(tmp_path, tiny_vocab_file, tiny_bert_config):
    tokenizer = Tokenizer(tiny_vocab_file, max_seq_length=10)
    spec = schema.ContrastiveRecordSpec(max_seq_length=10, num_context_turns=2, num_negatives=3,
                                        context_layout="sides")
    write_contrastive_records(stage_runs._dialogues(24, 5), tokenizer, str(tmp_path / "records"), spec,
                              random_seed=1, log=lambda _: None)
    config = tiny_bert_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    save_checkpoint(str(tmp_path / "init"), build_backbone(config), config, tokenizer)
    files = stage_runs.write_evaluation_files(tmp_path)
    seen = {}
    objective, train_config = stage.configure(
        "dialoguecse", train_file=[str(tmp_path / "records" / "contrastive-*")], output_dir=str(tmp_path / "run"),
        init_checkpoint=str(tmp_path / "init"), max_seq_length=10, num_context_turns=2, num_negatives=3,
        num_frozen_layers=1, train_batch_size=8, learning_rate=3e-3, num_train_steps=12, log_steps=1,
        eval_steps=4, eval_select_file=files["select"], eval_sts_file=files["sts"])
    logs = stage.run_stage(objective, train_config, verbose=False,
                           on_log=lambda step, values: seen.setdefault(step, values))
    # Tasks run in table order (D-STS, then SR), so D-STS Corr. selects.
    best = load_checkpoint(str(tmp_path / "run" / stage.BEST_ENCODER_DIR), 10).metadata
    assert best["selected_by"] == "corr"
    assert_best_is_the_first_argmax(tmp_path / "run", "corr", best, (4, 8, 12))
    assert {"corr", "map", "mrr"} <= set(best["eval"])
    assert "eval_corr" in logs and "eval_map" in logs
    record = json.load(open(tmp_path / "run" / stage.CONFIG_FILE, encoding="utf-8"))
    assert record["objective"] == "dialoguecse" and record["options"]["variant"] == "released"
    assert os.path.isdir(tmp_path / "run" / stage.ENCODER_DIR)
    assert np.isfinite([values["loss"] for values in seen.values()]).all()
