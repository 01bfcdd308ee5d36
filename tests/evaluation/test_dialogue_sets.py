"""dial2vec's dialogue-level evaluations: the labelled set, the metrics against hand or SciPy
computations, and a whole evaluation run on a tiny checkpoint."""

import json

import numpy as np
import pytest
import scipy.stats

from dialoguecse_tf.data.dialogue import Dialogue, Turn
from dialoguecse_tf.data.readers import write_jsonl
from dialoguecse_tf.evaluation.dialogue_sets import read_labelled_dialogues
from dialoguecse_tf.evaluation.tasks.clustering import clustering_scores, purity
from dialoguecse_tf.evaluation.tasks.dialogue_retrieval import retrieval_scores
from dialoguecse_tf.evaluation.tasks.relatedness import relatedness_scores


def test_sgd_dev_single_service_dialogues_labelled_by_service_or_domain(shared_data):
    services = read_labelled_dialogues(str(shared_data / "sgd" / "dev"))
    assert services.stats == {"dialogues": 836, "labels": 17, "dropped": {"multi_service": 1262},
                              "empty_turns_skipped": 0}
    assert services.labels[0] == services.dialogues[0].services[0]
    domains = read_labelled_dialogues(str(shared_data / "sgd" / "dev"), "domain")
    assert domains.stats["dialogues"] == 836 and domains.stats["labels"] < 17
    assert all("_" not in label for label in domains.labels)


def _dialogue(i, service, speakers=("USER", "SYSTEM")):
    return Dialogue(f"d{i}", tuple(Turn(speakers[t % len(speakers)], f"turn {t} of {i}") for t in range(4)),
                    services=(service,) if service else None)


def test_unusable_dialogues_are_dropped_and_counted(tmp_path):
    dialogues = [_dialogue(0, "A_1"), _dialogue(1, "A_1"), _dialogue(2, "B_1"), _dialogue(3, "B_1"),
                 _dialogue(4, "C_1"), _dialogue(5, ""), _dialogue(6, "A_1", ("USER",))]
    write_jsonl(dialogues, tmp_path / "set.jsonl")
    data = read_labelled_dialogues(str(tmp_path / "set.jsonl"))
    assert data.labels == ("A_1", "A_1", "B_1", "B_1")
    assert data.stats["dropped"] == {"no_service": 1, "not_two_interlocutors": 1, "label_with_one_dialogue": 1}
    write_jsonl(dialogues[:3], tmp_path / "few.jsonl")
    with pytest.raises(ValueError, match="needs at least 2 labels with 2 dialogues each"):
        read_labelled_dialogues(str(tmp_path / "few.jsonl"))


def test_sgd_release_empty_closing_turns_are_skipped_and_counted(tmp_path):
    # SGD's public release ends some dialogues with an empty SYSTEM turn whose only act is GOODBYE;
    # dial2vec's generate_clustering.py drops empty utterances too.
    def sgd(i, service, close_empty):
        turns = [{"speaker": speaker, "utterance": f"turn {t} of {i}", "frames": []}
                 for t, speaker in enumerate(("USER", "SYSTEM", "USER", "SYSTEM"))]
        if close_empty:
            turns[-1].update(utterance="", frames=[{"service": service, "actions": [{"act": "GOODBYE"}]}])
        return {"dialogue_id": f"1_{i:05d}", "services": [service], "turns": turns}

    (tmp_path / "dialogues_001.json").write_text(json.dumps([sgd(i, service, i % 2 == 0) for i, service in
                                                             enumerate(["A_1", "A_1", "B_1", "B_1"])]))
    data = read_labelled_dialogues(str(tmp_path))
    assert data.labels == ("A_1", "A_1", "B_1", "B_1")
    assert [len(d.turns) for d in data.dialogues] == [3, 4, 3, 4]
    assert data.stats["empty_turns_skipped"] == 2


def test_purity_by_hand():
    assert purity(np.array([0, 0, 0, 1, 1, 1]), ["a", "a", "b", "b", "b", "c"]) == pytest.approx(4 / 6)


def test_separable_embeddings_score_perfectly_and_noise_does_not():
    labels = ["a"] * 5 + ["b"] * 5 + ["c"] * 5
    rng = np.random.default_rng(0)
    clean = np.eye(3)[[ord(label) - ord("a") for label in labels]] + 0.01 * rng.normal(size=(15, 3))
    assert clustering_scores(clean, labels) == pytest.approx({"purity": 100.0, "nmi": 100.0, "ari": 100.0})
    assert retrieval_scores(clean, labels) == pytest.approx({"dialogue_map": 100.0, "dialogue_mrr": 100.0})
    noise = rng.normal(size=(15, 8))
    assert clustering_scores(noise, labels)["ari"] < 50.0
    assert retrieval_scores(noise, labels)["dialogue_map"] < 70.0


def test_relatedness_is_the_per_dialogue_spearman_averaged_and_the_all_pairs_one():
    rng = np.random.default_rng(1)
    labels = np.array(["a", "a", "b", "b", "b", "c", "c"])
    vectors = rng.normal(size=(7, 5))
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = unit @ unit.T
    rows = []
    for i in range(7):
        others = [j for j in range(7) if j != i]
        rows.append(scipy.stats.spearmanr((labels[others] == labels[i]).astype(float), cos[i, others]).statistic)
    upper = np.triu_indices(7, 1)
    pairs = scipy.stats.spearmanr((labels[:, None] == labels[None, :])[upper].astype(float), cos[upper]).statistic
    assert relatedness_scores(vectors, labels) == pytest.approx(
        {"spearman": 100 * np.mean(rows), "spearman_pairs": 100 * pairs})


@pytest.mark.slow
def test_a_whole_run_on_a_tiny_checkpoint(tmp_path, tiny_bert_config, tiny_vocab_file):
    from dialoguecse_tf.encoder.backbone import build_backbone
    from dialoguecse_tf.encoder.checkpoints import save_checkpoint
    from dialoguecse_tf.encoder.dialogue import DialogueEncoder
    from dialoguecse_tf.encoder.tokenization import Tokenizer
    from dialoguecse_tf.evaluation.config import EvaluationConfig
    from dialoguecse_tf.evaluation.runner import run_evaluation

    config = tiny_bert_config.replace(max_position_embeddings=64)
    checkpoint = save_checkpoint(str(tmp_path / "tiny"), build_backbone(config), config, Tokenizer(tiny_vocab_file))
    words = {"A_1": "order refund money back", "B_1": "delivery address ship package", "C_2": "hello thanks"}
    dialogues = [Dialogue(f"{service}-{i}", tuple(Turn("USER" if t % 2 == 0 else "SYSTEM", f"{text} {t}")
                                                  for t in range(5)), services=(service,))
                 for service, text in words.items() for i in range(4)]
    write_jsonl(dialogues, tmp_path / "dialogues.jsonl")
    evaluation = EvaluationConfig(checkpoint=(checkpoint,), model_name=("Tiny",), output_dir=str(tmp_path / "eval"),
                                  dataset_name=("toy",), dialogue_file=(str(tmp_path / "dialogues.jsonl"),),
                                  max_seq_length=32, dialogue_max_seq_length=48)
    results = run_evaluation(evaluation)
    metrics = results["models"][0]["metrics"]["toy"]
    assert set(metrics) == {"purity", "nmi", "ari", "spearman", "spearman_pairs", "dialogue_map", "dialogue_mrr"}
    encoder = DialogueEncoder.from_checkpoint(checkpoint, max_seq_length=48)
    data = read_labelled_dialogues(str(tmp_path / "dialogues.jsonl"))
    vectors = encoder.encode_dialogues(data.dialogues)
    assert metrics["dialogue_map"] == pytest.approx(retrieval_scores(vectors, data.labels)["dialogue_map"], abs=1e-6)
    record = results["datasets"][0]
    assert record["clustering_label"] == "service" and record["dialogues"] == 12
    table = (tmp_path / "eval" / "results.md").read_text(encoding="utf-8")
    assert "Purity" in table and "Clustering (Purity, NMI, ARI)" in table
    with pytest.raises(ValueError, match="baselines are sentence embeddings"):
        EvaluationConfig(checkpoint=(checkpoint,), output_dir="out", dialogue_file=("x",), baselines=("avg",))
    json.dumps(results)
