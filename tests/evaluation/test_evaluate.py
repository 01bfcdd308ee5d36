import numpy as np
import pytest
import scipy.stats

from dialoguecse_tf.data.sr_builder import SrRow, read_select_file
from dialoguecse_tf.evaluation.evaluate import CachedEmbedder, embed_unique, evaluate_sr, evaluate_sts
from dialoguecse_tf.evaluation.sts import StsPair
from dialoguecse_tf.io_utils import DataFormatError


class CountingEmbedder:
    """A lookup-table `embed_fn` that records every text it is asked for."""

    def __init__(self, vectors: dict):
        self.vectors = vectors
        self.calls = []

    def __call__(self, texts):
        self.calls.append(list(texts))
        return np.array([self.vectors[text] for text in texts], dtype=np.float32)

    @property
    def embedded(self):
        return [text for call in self.calls for text in call]


def write_select(path, rows):
    path.write_text("".join("\t".join(map(str, row)) + "\n" for row in rows), encoding="utf-8")
    return path


# Row 0 asks for rows 1, 2 (positive) and 3, 4 (negative); row 1 for 0 (positive) and 2
# (negative). "refund" appears twice (rows 1 and 4) and must still be embedded once.
SELECT_ROWS = [
    (0, "q", "a", "1,2", "3,4"),
    (1, "refund", "a", "0", "2"),
    (2, "money back", "a", "0", "1"),
    (3, "where", "b", "4", "0"),
    (4, "refund", "b", "3", "0"),
]
VECTORS = {
    "q": [1.0, 0.0],
    "refund": [0.9, 0.5],  # cos with q 0.874
    "money back": [0.2, 1.0],  # 0.196
    "where": [1.0, 0.1],  # 0.995
}


def test_sr_hand_computed_and_each_sentence_embedded_once(tmp_path):
    rows = read_select_file(write_select(tmp_path / "select.txt", SELECT_ROWS))
    embed = CountingEmbedder(VECTORS)
    result = evaluate_sr(embed, rows)
    assert len(embed.calls) == 1 and sorted(embed.embedded) == sorted(VECTORS)
    # Query 0 ranks 3 (0.995), then 1 and 4 tied ("refund", 0.874: row id order), then 2:
    # labels 0 1 0 1 -> AP (1/2 + 2/4) / 2 = 0.5, RR 1/2.
    # Query 1 ("refund") vs 0 (cos 0.874) and 2 (cos 0.650): AP 1, RR 1.
    # Query 2 ("money back") vs 0 (0.196) and 1 (0.650): labels 0 1 -> AP 1/2, RR 1/2.
    # Query 3 ("where") vs 0 (0.995) and 4 (0.935): labels 0 1 -> AP 1/2, RR 1/2.
    # Query 4 ("refund") vs 0 (0.874) and 3 (0.935): labels 1 0 -> AP 1, RR 1.
    assert result["map"] == pytest.approx(100 * (0.5 + 1 + 0.5 + 0.5 + 1) / 5)
    assert result["mrr"] == pytest.approx(100 * (0.5 + 1 + 0.5 + 0.5 + 1) / 5)
    assert result["queries"] == 5 and result["skipped_no_negative"] == 0


def test_sr_ties_are_broken_by_row_id_not_by_label():
    rows = [
        SrRow(0, "same", "", (2,), (1,)),
        SrRow(1, "same", "", (0,), (2,)),
        SrRow(2, "same", "", (1,), (0,)),
    ]
    # A collapsed model: one vector for everything. Listing positives first would score 100.
    result = evaluate_sr(lambda texts: np.ones((len(texts), 3)), rows)
    # Candidates in id order: query 0 -> [1-, 2+] AP 1/2; query 1 -> [0+, 2-] AP 1; query 2 -> [0-, 1+] AP 1/2.
    assert result["map"] == pytest.approx(100 * 2 / 3)


def test_sr_scores_only_rows_with_a_positive_and_a_negative_and_checks_ids():
    """As the release's eval_selection.py:206: a row with positives but no negative would
    score AP = RR = 1 whatever the encoder; it is a candidate only, counted as skipped."""
    vectors = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [0.6, 0.8]}
    rows = [SrRow(0, "a", "", (1,), (2,)), SrRow(1, "b", "", (0,), ()), SrRow(2, "c", "", (), ())]
    result = evaluate_sr(lambda texts: np.array([vectors[t] for t in texts]), rows)
    # Query 0 ("a"): c (cos 0.6, negative) before b (cos 0, positive): AP = RR = 1/2.
    assert result == {"map": 50.0, "mrr": 50.0, "queries": 1, "skipped_no_negative": 1,
                      "queries_with_repeated_ids": 0}
    with pytest.raises(ValueError, match="no SR row has both a positive and a negative"):
        evaluate_sr(lambda texts: np.eye(2), [SrRow(0, "a", "", (1,), ()), SrRow(1, "b", "", (), ())])
    with pytest.raises(ValueError, match=r"query 0 refers to ids \[7\]"):
        evaluate_sr(lambda texts: np.eye(2), [SrRow(0, "a", "", (7,), (1,)), SrRow(1, "b", "", (), ())])


def _release_map_mrr(select_text: str, vectors: dict) -> tuple:
    """MAP and MRR (0..1) as the DialogueCSE release's eval_selection.py computes them: candidates
    are the positive texts then the negative texts as listed, repeats included, ranked by
    np.argsort(cos)[::-1]; AP is the mean of precision at each positive."""
    id2text, queries = {}, []
    for line in select_text.splitlines():
        qid, query, _, positive_ids, negative_ids = line.split("\t")
        id2text[qid] = query
        if positive_ids and negative_ids:
            queries.append((query, positive_ids.split(","), negative_ids.split(",")))
    ap_list, rr_list = [], []
    for query, positive_ids, negative_ids in queries:
        candidates = [id2text[i] for i in positive_ids] + [id2text[i] for i in negative_ids]
        matrix = np.array([vectors[c] for c in candidates])
        vec = np.array(vectors[query])
        cos = matrix @ vec / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(vec))
        labels = [1] * len(positive_ids) + [0] * len(negative_ids)
        rank_labels = np.array([labels[i] for i in np.argsort(cos)[::-1]])
        hits = np.flatnonzero(rank_labels == 1)
        ap_list.append(np.mean([(n + 1) / (i + 1) for n, i in enumerate(hits)]))
        rr_list.append(1 / (hits[0] + 1))
    return float(np.mean(ap_list)), float(np.mean(rr_list))


def test_sr_repeated_candidate_ids_count_twice_as_in_the_release(tmp_path):
    rows = [(0, "q", "a", "1,2,1", "3,4"), (1, "r", "a", "0", "3,3,4"), (2, "s", "a", "0,1", "4"),
            (3, "t", "b", "4", "0"), (4, "u", "b", "3", "0,1")]
    path = write_select(tmp_path / "select.txt", rows)
    rng = np.random.default_rng(7)
    vectors = {text: rng.normal(size=4).tolist() for text in "qrstu"}
    result = evaluate_sr(lambda texts: np.array([vectors[t] for t in texts]), read_select_file(path))
    expected_map, expected_mrr = _release_map_mrr(path.read_text(encoding="utf-8"), vectors)
    assert result["map"] == pytest.approx(100 * expected_map, abs=1e-9)
    assert result["mrr"] == pytest.approx(100 * expected_mrr, abs=1e-9)
    assert result["queries"] == 5 and result["queries_with_repeated_ids"] == 2
    # Counting "1" once in query 0 would give another score: the repeat is really weighed twice.
    once = path.read_text(encoding="utf-8").replace("1,2,1", "1,2")
    assert _release_map_mrr(once, vectors)[0] != pytest.approx(expected_map)


@pytest.mark.parametrize(
    "bad_row, message",
    [
        ((2, "x", "a", "0,9", "1"), "positive id 9 is not a row of this file"),
        ((2, "x", "a", "", "0,1"), "query 2 has no positive id"),
        ((2, "x", "a", "0"), "expected 5 tab-separated fields, found 4"),
        ((2, "x", "a", "0", "1,two"), "'two' is not a non-negative decimal integer"),
    ],
)
def test_select_file_errors_name_file_and_line(tmp_path, bad_row, message):
    path = write_select(tmp_path / "select.txt", [(0, "a", "a", "1", "2"), (1, "b", "a", "0", "2"), bad_row])
    with pytest.raises(DataFormatError, match=message) as info:
        read_select_file(path)
    assert str(info.value).startswith(f"{path}:3: ")


def test_sts_spearman_and_each_sentence_embedded_once():
    vectors = {"a": [1.0, 0.0], "b": [1.0, 0.2], "c": [0.0, 1.0], "d": [1.0, 1.0]}
    pairs = [StsPair(*pair) for pair in ((5, "a", "b"), (1, "a", "c"), (3, "b", "d"), (2, "c", "a"), (4, "a", "d"))]
    embed = CountingEmbedder(vectors)
    result = evaluate_sts(embed, pairs)
    assert len(embed.calls) == 1 and sorted(embed.embedded) == ["a", "b", "c", "d"]
    # cos: ab .981, ac 0, bd .832, ca 0, ad .707 -> ranks of predictions 5, 1.5, 4, 1.5, 3 vs gold 5 1 3 2 4.
    expected = scipy.stats.spearmanr([5, 1, 3, 2, 4], [5, 1.5, 4, 1.5, 3]).statistic
    assert result == {"corr": pytest.approx(100 * expected), "pairs": 5}


def test_cached_embedder_embeds_each_text_once_over_calls():
    embed = CountingEmbedder({"a": [1.0], "b": [2.0], "c": [3.0]})
    cached = CachedEmbedder(embed)
    np.testing.assert_array_equal(cached(["a", "b", "a"]), [[1.0], [2.0], [1.0]])
    np.testing.assert_array_equal(cached(["c", "b"]), [[3.0], [2.0]])
    assert embed.calls == [["a", "b"], ["c"]]
    with pytest.raises(ValueError, match="empty"):
        cached([])


def test_embed_fn_output_is_checked():
    with pytest.raises(ValueError, match=r"shape \(1, 2\) for 2 texts"):
        embed_unique(lambda texts: np.zeros((1, 2)), ["a", "b"])
    with pytest.raises(ValueError, match="NaN"):
        embed_unique(lambda texts: np.full((1, 2), np.nan), ["a"])


def _task_files(tmp_path):
    select = write_select(tmp_path / "select.txt", SELECT_ROWS)
    sts = tmp_path / "sts.txt"
    sts.write_text("5\tq\twhere\n1\tq\tmoney back\n3\trefund\twhere\n", encoding="utf-8")
    return str(select), str(sts)


def test_task_evaluators_give_the_evaluation_functions_numbers(tmp_path):
    from dialoguecse_tf.evaluation.provenance import dataset_file_record
    from dialoguecse_tf.evaluation.sts import read_sts_file
    from dialoguecse_tf.evaluation.tasks.dsts import DStsEvaluator
    from dialoguecse_tf.evaluation.tasks.sr import SrEvaluator

    select, sts = _task_files(tmp_path)
    sr, dsts = SrEvaluator(select), DStsEvaluator(sts)
    expected_sr = evaluate_sr(CountingEmbedder(VECTORS), read_select_file(select))
    assert sr(CountingEmbedder(VECTORS)) == {"map": expected_sr["map"], "mrr": expected_sr["mrr"]}
    expected_sts = evaluate_sts(CountingEmbedder(VECTORS), read_sts_file(sts))
    assert dsts(CountingEmbedder(VECTORS)) == {"corr": expected_sts["corr"]}
    assert (sr.size, dsts.size) == (5, 3)
    assert sr.record() == {**dataset_file_record("select", "sr_queries", select, 5), "sr_scored_queries": 5,
                           "sr_skipped_no_negative": 0, "sr_queries_with_repeated_ids": 0}
    assert dsts.record() == dataset_file_record("sts", "sts_pairs", sts, 3)
    # Every metric a task gives has a table column, its primary metric among them.
    for evaluator, metrics in ((sr, sr(CountingEmbedder(VECTORS))), (dsts, dsts(CountingEmbedder(VECTORS)))):
        assert [key for key, _ in type(evaluator).metrics] == list(metrics)
        assert evaluator.primary_metric in metrics and evaluator.higher_is_better


def test_task_evaluators_check_their_file_when_built(tmp_path):
    from dialoguecse_tf.evaluation.tasks.dsts import DStsEvaluator
    from dialoguecse_tf.evaluation.tasks.sr import SrEvaluator

    bad = write_select(tmp_path / "select.txt", [(0, "a", "a", "7", "")])
    with pytest.raises(DataFormatError, match=f"{bad}:1: "):
        SrEvaluator(str(bad))
    # Refused before any model loads: with no negative anywhere MAP and MRR would read 100.
    no_negatives = write_select(tmp_path / "no_negatives.txt", [(0, "a", "a", "1", ""), (1, "b", "a", "0", "")])
    with pytest.raises(ValueError, match=f"^{no_negatives}: no row has both a positive and a negative"):
        SrEvaluator(str(no_negatives))
    sts = tmp_path / "sts.txt"
    sts.write_text("5\ta\tb\n9\tc\td\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=f"{sts}:2: "):
        DStsEvaluator(str(sts))


def test_evaluation_dataset_and_suite(tmp_path):
    from dialoguecse_tf.evaluation.suite import EvaluationSuite, SuiteEntry

    select, sts = _task_files(tmp_path)
    both, sts_only = EvaluationSuite.from_entries(
        [SuiteEntry("ECD", "sr", select), SuiteEntry("ECD", "dsts", sts), SuiteEntry("JDDC", "dsts", sts)]).datasets
    # Table order: D-STS first, then SR, whatever the entries' order.
    assert [evaluator.task for evaluator in both.evaluators] == ["sts", "select"]
    assert list(both.record()) == ["name", "sts_file", "sts_sha256", "sts_pairs", "select_file", "select_sha256",
                                   "sr_queries", "sr_scored_queries", "sr_skipped_no_negative",
                                   "sr_queries_with_repeated_ids"]
    embed = CountingEmbedder(VECTORS)
    suite = EvaluationSuite([both, sts_only])
    results = suite(embed)
    assert list(results) == ["ECD", "JDDC"] and list(results["ECD"]) == ["corr", "map", "mrr"]
    assert results["ECD"] == {**both.evaluators[0](embed), **both.evaluators[1](embed)}
    assert results["JDDC"] == {"corr": results["ECD"]["corr"]}
    assert suite.primary() == ("ECD", "corr", True)
    assert suite.flat(results) == {"ECD/corr": results["ECD"]["corr"], "ECD/map": results["ECD"]["map"],
                                   "ECD/mrr": results["ECD"]["mrr"], "JDDC/corr": results["JDDC"]["corr"]}
    with pytest.raises(ValueError, match="lists task 'dsts' of dataset 'ECD' twice"):
        EvaluationSuite.from_entries([SuiteEntry("ECD", "dsts", sts)] * 2)
    with pytest.raises(ValueError, match="distinct"):
        EvaluationSuite([both, both])
