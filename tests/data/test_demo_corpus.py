"""The demo corpus generator: templates, dialogues, evaluation sets, the stage and its entry point."""

import json
import re
import time

import pytest

from dialoguecse_tf.data.demo import corpus, held_out, templates
from dialoguecse_tf.data.demo import dialogues as generation
from dialoguecse_tf.data.preprocessing import PrepStats, preprocess
from dialoguecse_tf.data.readers import read_jsonl
from dialoguecse_tf.data.sr_builder import read_select_file
from dialoguecse_tf.evaluation.sts import read_sts_file
from conftest import REPO_ROOT
from forked_entry_points import run_python

OUTPUT_FILES = ("train.jsonl", "train_sentences.txt", "sr/select.txt", "sts/sts.txt", "sts/sts_metadata.jsonl",
                "intent/intent.json", "dialogues/eval_dialogues.jsonl", "config.json", "demo_stats.json")
SMALL = dict(num_dialogues=200, num_eval_dialogues=200, num_sts_pairs=100)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """The default config, generated once for the checks on the evaluation sets."""
    output_dir = tmp_path_factory.mktemp("demo")
    stats = corpus.run_generate_demo_corpus(corpus.DemoCorpusConfig(str(output_dir)))
    return output_dir, stats


def _slot_types(template):
    return [templates.PLACEHOLDERS[name][0] for name in templates.template_fields(template)]


def test_templates_are_well_formed():
    assert len(templates.MAIN_INTENTS) >= 24 and len(templates.INTENTS) == len(set(templates.INTENTS))
    every_template = []
    for spec in templates.INTENT_SPECS.values():
        assert len(spec.user) >= 8 and len(spec.held_out) >= 4, spec.name
        assert len(spec.acknowledge) >= 3 and len(spec.answer) >= 3, spec.name
        assert spec.ask is None or templates.PLACEHOLDERS[spec.ask][0] in templates.ASK, spec.name
        for template in spec.user + spec.held_out + spec.acknowledge + spec.answer:
            types = _slot_types(template)  # KeyError on an unknown placeholder
            assert len(types) == len(set(types)), f"two placeholders of one slot type: {template!r}"
            assert not any(ch in template for ch in "\t\n\r"), template
        every_template += spec.user + spec.held_out
        # Score-5 pairs need two held-out templates of the intent with the same slot types.
        signatures = [tuple(sorted(_slot_types(t))) for t in spec.held_out]
        assert len(set(signatures)) < len(signatures), spec.name
    assert len(every_template) == len(set(every_template)), "a request template is reused"
    for group in templates.INTENT_GROUPS:
        assert group in held_out.__doc__ and group in held_out.DSTS_RULE


def test_template_files_hold_every_wording_the_generator_draws():
    for group, names in templates.INTENT_GROUPS.items():
        specs = [templates.INTENT_SPECS[name] for name in names]
        assert specs and all(spec.user and spec.held_out for spec in specs), group
    slot_types = {slot_type for slot_type, _ in templates.PLACEHOLDERS.values()}
    assert set(templates.ASK) <= set(templates.INFORM) <= slot_types
    for slot_type, replies in templates.INFORM.items():
        assert all(templates.template_fields(reply) == (slot_type,) for reply in replies), slot_type
    for act, turns in templates.DIALOGUE_ACTS.items():
        assert set(turns) == {generation.USER, generation.AGENT} and all(turns.values()), act
    for pool in (templates.AFTER_INFORM, templates.GREETING_OPENERS, templates.SWITCH_OPENERS, templates.CLOSERS):
        assert pool and all(isinstance(text, str) for text in pool)


def test_a_malformed_template_file_is_named_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(templates, "_TEMPLATES", tmp_path)
    intent = {"name": "order_status", "group": "delivery", "ask": "order_number", "user": ["Where is it?"],
              "held_out": ["Any news?"], "acknowledge": ["Sure."], "answer": ["On its way."]}
    (tmp_path / "intents.json").write_text(json.dumps([intent]), encoding="utf-8")
    assert templates._read_intents("intents.json")[0].user == ("Where is it?",)
    for broken, message in (({**intent, "answer": []}, r"intent 0 \('order_status'\)\.answer must be a non-empty list"),
                            ({**intent, "ask": "shoe_size"}, "ask 'shoe_size' is no placeholder"),
                            ({**intent, "tone": "polite"}, "intent 0 must have the fields")):
        (tmp_path / "intents.json").write_text(json.dumps([broken]), encoding="utf-8")
        with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / 'intents.json'))}: .*{message}"):
            templates._read_intents("intents.json")
    (tmp_path / "slot_values.json").write_text(json.dumps({"city": ["Leeds"]}), encoding="utf-8")
    with pytest.raises(ValueError, match="slot_values.json: expected an object with the keys"):
        templates._read_slot_values("slot_values.json")


def test_dialogues_are_fast_well_formed_and_labelled():
    start = time.perf_counter()
    dialogues = generation.generate_dialogues(3000, seed=0)
    assert time.perf_counter() - start < 3.0
    assert len(dialogues) == 3000 and len({d.dialogue_id for d in dialogues}) == 3000
    used = set()
    for dialogue in dialogues:
        assert generation.MIN_TURNS <= len(dialogue.turns) <= generation.MAX_TURNS
        assert [t.speaker for t in dialogue.turns] == [generation.USER, generation.AGENT] * (len(dialogue.turns) // 2)
        for turn in dialogue.turns:
            assert turn.intent in templates.INTENTS and turn.text.strip()
            used.add(turn.intent)
    assert used == set(templates.INTENTS)


def test_generation_is_deterministic_per_seed():
    assert generation.generate_dialogues(300, seed=7) == generation.generate_dialogues(300, seed=7)
    assert generation.generate_dialogues(300, seed=7) != generation.generate_dialogues(300, seed=8)


def test_training_text_never_uses_held_out_templates():
    held_out_only = {t for spec in templates.INTENT_SPECS.values() for t in spec.held_out}
    for utterances in generation.generate_utterance_dialogues(2000, seed=0):
        assert not any(u.template in held_out_only for u in utterances)


@pytest.mark.parametrize("a, b, score", [
    (("refund", (("order_number", "12345"),)), ("refund", (("order_number", "12345"),)), 5),
    (("refund", ()), ("refund", ()), 5),
    (("refund", (("order_number", "12345"),)), ("refund", (("order_number", "99999"),)), 4),
    (("refund", (("order_number", "12345"),)), ("refund", ()), 4),
    (("refund", ()), ("cancel_order", ()), 3),
    (("refund", (("order_number", "1"),)), ("invoice", (("order_number", "2"),)), 2),
    (("refund", (("product", "kettle"),)), ("invoice", (("order_number", "2"),)), 1),
    (("refund", ()), ("password_reset", ()), 1),
])
def test_dsts_rule(a, b, score):
    ua = generation.DemoUtterance(generation.USER, "a", a[0], a[1])
    ub = generation.DemoUtterance(generation.USER, "b", b[0], b[1])
    assert held_out.dsts_score(ua, ub) == held_out.dsts_score(ub, ua) == score


def _outputs(directory):
    data_files = [name for name in OUTPUT_FILES if name not in ("config.json", "demo_stats.json")]
    return {name: (directory / name).read_bytes() for name in data_files}


def _untimed_stats(directory):
    stats = json.loads((directory / "demo_stats.json").read_text())
    return {key: value for key, value in stats.items() if not key.endswith("_seconds")}


def test_same_seed_same_files_other_seed_differs(tmp_path):
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        corpus.run_generate_demo_corpus(corpus.DemoCorpusConfig(str(tmp_path / name), random_seed=seed, **SMALL))
    assert _outputs(tmp_path / "a") == _outputs(tmp_path / "b")
    assert _untimed_stats(tmp_path / "a") == _untimed_stats(tmp_path / "b")
    configs = [json.loads((tmp_path / name / "config.json").read_text()) for name in ("a", "b")]
    assert configs[0].pop("output_dir") != configs[1].pop("output_dir") and configs[0] == configs[1]
    a, c = _outputs(tmp_path / "a"), _outputs(tmp_path / "c")
    assert all(a[name] != c[name] for name in a)


def test_corpus_reads_back_and_survives_preprocessing(default_run):
    output_dir, stats = default_run
    stats_read = PrepStats()
    dialogues = list(read_jsonl(output_dir / "train.jsonl", stats=stats_read))
    kept = list(preprocess(dialogues, merge_speakers=True, min_turns=4, stats=stats_read))
    assert len(kept) == len(dialogues) == stats["dialogues"] == 3000
    assert stats_read["turns_merged"] == 0 and not stats_read.dropped
    assert sum(len(d.turns) for d in kept) == stats["turns"]
    assert [(d.dialogue_id, d.turns) for d in kept] == [(d.dialogue_id, d.turns)
                                                        for d in generation.generate_dialogues(3000, seed=0)]
    sentences = (output_dir / "train_sentences.txt").read_text(encoding="utf-8").splitlines()
    assert sentences == generation.distinct_texts(kept) and len(sentences) == stats["utterances_distinct"]
    assert stats["intents"] == len(templates.INTENTS)


def test_sr_set_is_held_out_and_positives_share_the_intent(default_run):
    output_dir, stats = default_run
    rows = read_select_file(output_dir / "sr" / "select.txt")
    assert 1000 <= len(rows) <= 2000 and len(rows) == stats["sr_queries"]
    train = set((output_dir / "train_sentences.txt").read_text(encoding="utf-8").splitlines())
    labels = {u.text: u.intent for u in held_out.generate_eval_utterances(1000, seed=0)[0]}
    for row in rows:
        assert row.intent in templates.MAIN_INTENTS and labels[row.sentence] == row.intent
        assert row.sentence not in train
        assert all(rows[i].intent == row.intent for i in row.positive_ids)
        assert all(rows[i].intent != row.intent for i in row.negative_ids)
    assert {row.intent for row in rows} == set(templates.MAIN_INTENTS)
    assert stats["eval_overlap_removed"] == 0


def test_intent_set_is_held_out_split_per_intent_with_one_group_out_of_scope(default_run):
    from dialoguecse_tf.data.intent import OOS_LABEL, read_intent_dataset

    output_dir, stats = default_run
    dataset = read_intent_dataset(str(output_dir / "intent" / "intent.json"))
    labels = {u.text: u.intent for u in held_out.generate_eval_utterances(1000, seed=0)[0]}
    train = set((output_dir / "train_sentences.txt").read_text(encoding="utf-8").splitlines())
    support, test = dataset.train, dataset.test
    oos_intents = set(templates.INTENT_GROUPS[held_out.OOS_GROUP])
    assert {label for _, label in support} == {label for _, label in test} == set(templates.MAIN_INTENTS) - oos_intents
    assert all(labels[text] == label for text, label in support + test)
    assert all(labels[text] in oos_intents and label == OOS_LABEL for text, label in dataset.oos_train + dataset.oos_test)
    texts = [text for text, _ in support + test + dataset.oos_train + dataset.oos_test]
    assert len(texts) == len(set(texts)) == len(labels) and not set(texts) & train
    for intent in set(templates.MAIN_INTENTS) - oos_intents:
        in_support = sum(1 for _, label in support if label == intent)
        in_test = sum(1 for _, label in test if label == intent)
        assert in_support >= 5 and 0 <= in_support - in_test <= 1
    assert (stats["intent_support"], stats["intent_test"]) == (len(support), len(test))
    assert (stats["intent_oos_support"], stats["intent_oos_test"]) == (len(dataset.oos_train), len(dataset.oos_test))


def test_eval_dialogues_are_labelled_by_their_one_intent_group(default_run):
    from dialoguecse_tf.evaluation.dialogue_sets import read_labelled_dialogues

    output_dir, stats = default_run
    path = str(output_dir / "dialogues" / "eval_dialogues.jsonl")
    labelled = read_labelled_dialogues(path, "service")
    assert len(labelled.dialogues) == stats["eval_dialogues_single_group"] == 1000 - labelled.stats["dropped"]["multi_service"]
    assert set(labelled.labels) == set(templates.INTENT_GROUPS)
    train = set((output_dir / "train_sentences.txt").read_text(encoding="utf-8").splitlines())
    for dialogue, label in zip(labelled.dialogues, labelled.labels):
        requests = [t for t in dialogue.turns if t.intent in templates.INTENT_SPECS]
        assert requests and all(templates.INTENT_SPECS[t.intent].group == label for t in requests)
        assert not any(t.text in train for t in requests if t.speaker == generation.USER)


def test_sts_set_is_stratified_held_out_and_follows_the_rule(default_run):
    output_dir, stats = default_run
    pairs = read_sts_file(output_dir / "sts" / "sts.txt")
    assert len(pairs) == 800 == stats["sts_pairs"]
    counts = {score: sum(1 for p in pairs if p.score == score) for score in range(1, 6)}
    assert all(count >= 0.1 * len(pairs) for count in counts.values()), counts
    assert {int(k): v for k, v in stats["sts_pairs_per_score"].items()} == counts
    assert len({frozenset((p.sentence_a, p.sentence_b)) for p in pairs}) == len(pairs)
    train = set((output_dir / "train_sentences.txt").read_text(encoding="utf-8").splitlines())
    metadata = [json.loads(line) for line in (output_dir / "sts" / "sts_metadata.jsonl").read_text().splitlines()]
    assert len(metadata) == len(pairs)
    for pair, meta in zip(pairs, metadata):
        assert (meta["score"], meta["sentence_a"], meta["sentence_b"]) == tuple(pair)
        assert pair.sentence_a != pair.sentence_b
        assert pair.sentence_a not in train and pair.sentence_b not in train
        a, b = (generation.DemoUtterance(generation.USER, meta[f"sentence_{side}"], meta[side]["intent"],
                                 tuple(sorted(meta[side]["slots"].items()))) for side in ("a", "b"))
        assert meta["a"]["group"] == a.group and meta["b"]["group"] == b.group
        assert held_out.dsts_score(a, b) == pair.score
        if pair.score == 5:
            assert a.slots == b.slots and a.intent == b.intent


def test_config_is_validated(tmp_path):
    with pytest.raises(ValueError, match="num_dialogues"):
        corpus.run_generate_demo_corpus(corpus.DemoCorpusConfig(str(tmp_path), num_dialogues=0))
    with pytest.raises(ValueError, match="num_sts_pairs"):
        corpus.run_generate_demo_corpus(corpus.DemoCorpusConfig(str(tmp_path), num_sts_pairs=4))
    with pytest.raises(ValueError, match="intent_support_fraction"):
        corpus.run_generate_demo_corpus(corpus.DemoCorpusConfig(str(tmp_path), intent_support_fraction=1.0))


def _run(*args):
    return run_python([REPO_ROOT / "data_prep" / "generate_demo_corpus.py", *args], text=True, cwd=REPO_ROOT)


def test_entry_point(tmp_path):
    done = _run(f"--output_dir={tmp_path / 'demo'}", *(f"--{key}={value}" for key, value in SMALL.items()))
    assert done.returncode == 0, done.stderr
    for name in OUTPUT_FILES:
        assert (tmp_path / "demo" / name).stat().st_size > 0, name
    config = json.loads((tmp_path / "demo" / "config.json").read_text())
    assert config["num_dialogues"] == 200 and config["num_sts_pairs"] == 100
    assert "SR queries" in done.stdout + done.stderr
    missing = _run()
    assert missing.returncode != 0 and "output_dir" in missing.stderr
