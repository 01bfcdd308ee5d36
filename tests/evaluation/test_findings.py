import json
import os
import subprocess

import pytest

from dialoguecse_tf.evaluation.findings import (BEHIND, GAP_ONLY, LEADS, LEVEL, MISSING, Cell, Claim, findings_dict,
                                                findings_markdown, judge, moves, outcome, read_claims, read_table,
                                                summarize, unmeasured_beside_best)
from dialoguecse_tf.evaluation.tables import ResultsTable, TableRow


def _row(model, metrics, spread=None, seeds=()):
    return TableRow(model, metrics, [], [], [], spread=spread or {}, seeds=list(seeds))


def _table(*rows) -> dict:
    """A merged table as merge_results.py writes it (ResultsTable.to_dict), rows as given."""
    names = []
    for row in rows:
        names += [name for name in row.metrics if name not in names]
    return ResultsTable([{"name": name} for name in names], list(rows), mark_best=True).to_dict()


SEEDS = (1, 2, 3)
ROWS = (
    _row("DSE", {"Banking77": {"acc_1shot": 52.0}, "HWU64": {"acc_1shot": 50.0}},
         {"Banking77": {"acc_1shot": 0.5}, "HWU64": {"acc_1shot": 1.0}}, SEEDS),
    # Banking77: 52.0 - 50.5 = 1.5 > 2 x 0.7 -> DSE leads; HWU64: 50.0 - 48.1 = 1.9 <= 2 x 1.0 -> level.
    _row("SimCSE", {"Banking77": {"acc_1shot": 50.5}, "HWU64": {"acc_1shot": 48.1}},
         {"Banking77": {"acc_1shot": 0.7}, "HWU64": {"acc_1shot": 0.2}}, SEEDS),
    # No seeds: std 0 on its side. Banking77: 52.0 vs 53.5, gap 1.5 > 2 x 0.5 -> DSE behind.
    _row("Untouched", {"Banking77": {"acc_1shot": 53.5}}),
)
TABLE = _table(*ROWS)
CLAIM = Claim("DSE paper", "DSE over SimCSE and the untouched encoder", "DSE", ("SimCSE", "Untouched"),
              ("Banking77:acc_1shot", "HWU64:acc_1shot"))


def test_the_rule_leads_only_beyond_twice_the_larger_std():
    assert outcome(Cell(10.0, 1.0, 3), Cell(7.9, 0.1, 3)) == LEADS
    assert outcome(Cell(10.0, 1.0, 3), Cell(8.0, 0.1, 3)) == LEVEL  # exactly twice: level
    assert outcome(Cell(10.0, 0.1, 3), Cell(12.1, 1.0, 3)) == BEHIND
    # Lower is better: the smaller number leads.
    assert outcome(Cell(10.0, 0.0, 0), Cell(12.0, 0.0, 0), higher_is_better=False) == LEADS


def test_a_single_seed_against_a_single_seed_or_none_gives_the_gap_only():
    assert outcome(Cell(57.39, 0.0, 1), Cell(57.38, 0.0, 1)) == GAP_ONLY
    assert outcome(Cell(60.0, 0.0, 1), Cell(50.0, 0.0, 0)) == GAP_ONLY
    assert outcome(Cell(50.0, 0.0, 0), Cell(60.0, 0.0, 1)) == GAP_ONLY
    # Against a row with seeds, that row's spread is the larger one measured: the rule applies.
    assert outcome(Cell(60.0, 0.0, 1), Cell(50.0, 1.0, 3)) == LEADS
    assert outcome(Cell(51.0, 0.0, 1), Cell(50.0, 1.0, 3)) == LEVEL
    table = _table(_row("One seed", {"HWU64": {"acc_1shot": 60.0}, "Banking77": {"acc_1shot": 40.0}}, seeds=(1,)),
                   *ROWS)
    claim = Claim("P", "o", "One seed", ("SimCSE", "Untouched"), ("Banking77:acc_1shot", "HWU64:acc_1shot"))
    assert [v.outcome for v in judge(table, claim)] == [BEHIND, GAP_ONLY, LEADS, MISSING]
    assert summarize(judge(table, claim)) == (
        "holds in part: ahead in 1 of 2 comparisons, level in 0, behind in 1 (1 between rows of one seed or "
        "none, which give their gap only; 1 not in the table)")
    only = Claim("P", "o", "One seed", ("Untouched",), ("Banking77:acc_1shot", "HWU64:acc_1shot"))
    assert summarize(judge(table, only)) == ("gap only: 1 between rows of one seed or none, which give their gap "
                                             "only (1 not in the table)")
    text = findings_markdown(table, [only])
    assert "| P | o | gap only | 0 | 0 | 0 | 1 | 1 |" in text
    assert "| Banking77 1-shot acc. | Untouched | 40.00 | 53.50 | gap only (-13.50) |" in text
    # A claimed level reads only the comparisons the rule decides.
    level_claim = Claim("P", "o", "One seed", ("SimCSE", "Untouched"), ("HWU64:acc_1shot",), expect="level")
    assert summarize(judge(table, level_claim), "level").startswith("does not hold: ahead in 1 of 1")


def test_each_columns_best_gives_the_gap_of_a_row_the_rule_cannot_judge_against_it():
    # HWU64: a one-seed row has the best mean; the untouched row (no seeds) beside it gives a gap
    # only, SimCSE (3 seeds) is judged: behind, so off the list and not a gap.
    table = _table(_row("One seed", {"HWU64": {"acc_1shot": 60.0}}, seeds=(1,)),
                   _row("SimCSE", {"HWU64": {"acc_1shot": 50.0}}, {"HWU64": {"acc_1shot": 1.0}}, SEEDS),
                   _row("Untouched", {"HWU64": {"acc_1shot": 57.5}}))
    assert table["best"] == {"HWU64 1-shot acc.": ["One seed"]}
    assert unmeasured_beside_best(table) == {"HWU64 1-shot acc.": [("Untouched", -2.5)]}
    text = findings_markdown(table, [])
    assert "| HWU64 1-shot acc. | One seed | Untouched (-2.50) |" in text
    assert findings_dict(table, [])["gap_only_beside_best"] == {"HWU64 1-shot acc.": [{"model": "Untouched",
                                                                                        "gap": -2.5}]}
    # Every row judged: the column stays as before.
    assert unmeasured_beside_best(TABLE) == {} and "Gap only: rows" not in findings_markdown(TABLE, [])


def test_a_claimed_lead_ahead_nowhere_but_behind_somewhere_does_not_hold():
    claim = Claim("P", "o", "SimCSE", ("DSE",), ("Banking77:acc_1shot", "HWU64:acc_1shot"))
    assert summarize(judge(TABLE, claim)) == "does not hold: ahead in 0 of 2 comparisons, level in 1, behind in 1"


def test_a_claim_is_judged_per_column_and_row_with_missing_cells_named():
    verdicts = judge(TABLE, CLAIM)
    assert [(v.column, v.other, v.outcome) for v in verdicts] == [
        ("Banking77:acc_1shot", "SimCSE", LEADS), ("Banking77:acc_1shot", "Untouched", BEHIND),
        ("HWU64:acc_1shot", "SimCSE", LEVEL), ("HWU64:acc_1shot", "Untouched", MISSING)]
    assert verdicts[0].row_cell == Cell(52.0, 0.5, 3) and verdicts[1].other_cell == Cell(53.5, 0.0, 0)
    assert summarize(verdicts) == ("holds in part: ahead in 1 of 3 comparisons, level in 1, behind in 1 "
                                   "(1 not in the table)")


@pytest.mark.parametrize("others, expected", [
    (("SimCSE",), "holds in part"),
    (("Nobody",), "not scored"),
])
def test_summaries_name_the_standing(others, expected):
    claim = Claim("P", "o", "DSE", others, ("Banking77:acc_1shot", "HWU64:acc_1shot"))
    assert summarize(judge(TABLE, claim)).startswith(expected)
    assert summarize(judge(TABLE, Claim("P", "o", "DSE", ("SimCSE",), ("Banking77:acc_1shot",)))).startswith("holds:")
    assert summarize(judge(TABLE, Claim("P", "o", "SimCSE", ("DSE",), ("Banking77:acc_1shot",)))).startswith(
        "reversed:")
    assert summarize(judge(TABLE, Claim("P", "o", "DSE", ("SimCSE",), ("HWU64:acc_1shot",)))).startswith("level:")


def test_a_claimed_level_holds_only_where_every_comparison_is_level():
    level_only = Claim("P", "DSE level with SimCSE", "DSE", ("SimCSE",), ("HWU64:acc_1shot",), expect="level")
    assert summarize(judge(TABLE, level_only), "level").startswith("holds: ahead in 0 of 1 comparisons, level in 1")
    both = Claim("P", "o", "DSE", ("SimCSE",), ("Banking77:acc_1shot", "HWU64:acc_1shot"), expect="level")
    assert summarize(judge(TABLE, both), "level").startswith("does not hold: ahead in 1 of 2")
    assert "does not hold" in findings_markdown(TABLE, [both])


def test_moves_are_the_cells_beyond_the_rule_and_rows_either_table_lacks():
    previous = _table(
        _row("DSE", {"Banking77": {"acc_1shot": 50.0}, "HWU64": {"acc_1shot": 49.0}},
             {"Banking77": {"acc_1shot": 0.4}, "HWU64": {"acc_1shot": 0.8}}, SEEDS),
        _row("Gone", {"Banking77": {"acc_1shot": 10.0}}),
        # No seeds, so no spread: a change below the printed two decimals is not a move.
        _row("Untouched", {"Banking77": {"acc_1shot": 53.501}}))
    found, new, dropped = moves(previous, TABLE)
    # Banking77 52.0 against 50.0: gap 2.0 > 2 x 0.5; HWU64 50.0 against 49.0: gap 1.0 <= 2 x 1.0.
    assert [(move.model, move.column, move.moved) for move in found] == [
        ("DSE", "Banking77:acc_1shot", True), ("DSE", "HWU64:acc_1shot", False),
        ("Untouched", "Banking77:acc_1shot", False)]
    assert new == ["SimCSE"] and dropped == ["Gone"]
    text = findings_markdown(TABLE, [CLAIM], previous, "the table before")
    assert "## Against the table before" in text and "1 of the 3 cells both tables hold moved" in text
    assert "| DSE | Banking77 1-shot acc. | 50.00 ± 0.40 | 52.00 ± 0.50 | +2.00 |" in text
    assert "| Banking77 1-shot acc. | Untouched | 52.00 ± 0.50 | 53.50 | behind |" in text
    # The first table is the claims' summary, which docs copy (experiments/doc_tables.py).
    from dialoguecse_tf.experiments.doc_tables import first_table
    assert first_table(text.splitlines())[2] == (
        "| DSE paper | DSE over SimCSE and the untouched encoder | holds in part | 1 | 1 | 1 | 0 | 1 |")
    data = findings_dict(TABLE, [CLAIM], previous)
    assert json.loads(json.dumps(data))["claims"][0]["verdicts"][2]["outcome"] == LEVEL
    assert [m["moved"] for m in data["moves"]] == [True, False, False]


def test_claims_file_errors_name_the_file_and_the_claim(tmp_path):
    good = tmp_path / "claims.yaml"
    good.write_text("claims:\n  - {paper: P, ordering: A over B, row: A, over: [B, C], columns: [X:map, Y:mrr]}\n",
                    encoding="utf-8")
    assert read_claims(str(good)) == [Claim("P", "A over B", "A", ("B", "C"), ("X:map", "Y:mrr"))]
    bad = tmp_path / "bad.yaml"
    bad.write_text("claims:\n  - {paper: P, ordering: o, row: A, over: [B], columns: [X:map]}\n"
                   "  - {paper: P, ordering: o, row: A, over: [B], columns: [map]}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{bad}: claim 2 \(o\): columns \['map'\]"):
        read_claims(str(bad))
    bad.write_text("claims:\n  - {paper: P, row: A, over: [B], columns: [X:map]}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{bad}: claim 1 has"):
        read_claims(str(bad))
    bad.write_text("claims:\n  - {paper: P, ordering: o, row: A, over: [B], columns: [X:map], expect: tie}\n",
                   encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{bad}: claim 1 \(o\): expect 'tie'"):
        read_claims(str(bad))
    good.write_text("claims:\n  - {paper: P, ordering: o, row: A, over: [B], columns: [X:map], expect: level}\n",
                    encoding="utf-8")
    assert read_claims(str(good))[0].expect == "level"


def test_the_committed_claims_name_rows_and_columns_the_benchmark_has():
    claims = read_claims(os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "claims",
                                      "benchmark.yaml"))
    table = read_table(os.path.join(os.path.dirname(__file__), "..", "..", "results", "benchmark", "results.json"))
    columns = {f"{name}:{key}" for name, key, _ in table["columns"]}
    models = {row["model"] for row in table["rows"]}
    assert {claim.paper.split()[0] for claim in claims} == {"DialogueCSE", "DSE", "dial2vec"}
    for claim in claims:
        assert {claim.row, *claim.over} <= models, claim
        assert set(claim.columns) <= columns, claim


def test_a_table_is_read_from_a_file_or_from_git_history(tmp_path):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    git = lambda *args: subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True, capture_output=True,
                                       text=True).stdout.strip()
    git("init", "-q")
    path = tmp_path / "table.json"
    path.write_text(json.dumps(TABLE), encoding="utf-8")
    git("add", "table.json")
    git("commit", "-q", "-m", "first")
    first = git("rev-parse", "--short", "HEAD")
    path.write_text(json.dumps({**TABLE, "rows": TABLE["rows"][:1]}), encoding="utf-8")
    assert len(read_table(str(path))["rows"]) == 1
    assert read_table(f"{first}:table.json", str(tmp_path)) == TABLE
    with pytest.raises(ValueError, match="git cannot show it"):
        read_table(f"{first}:absent.json", str(tmp_path))
    (tmp_path / "results.json").write_text(json.dumps({"format_version": 1, "models": []}), encoding="utf-8")
    with pytest.raises(ValueError, match="not a merged results table"):
        read_table(str(tmp_path / "results.json"))


def test_every_findings_step_checks_rows_its_experiment_scores_on_columns_its_table_keeps():
    """The claims a findings step reads name rows some evaluation of the experiment (or of the one
    it extends) scores, and columns the table step it reads keeps (a table keeping every column:
    its evaluations' datasets with a registered metric)."""
    from dialoguecse_tf.evaluation.registry import display_name
    from dialoguecse_tf.evaluation.tasks.registry import metric_columns
    from dialoguecse_tf.experiments.spec import get_experiment
    metrics = {key for key, _ in metric_columns()}
    checked = 0
    for name in ("benchmark", "en_budget", "dial2vec_self_dialogue", "bfloat16_quality", "ecd_cpu"):
        spec = get_experiment(name)
        scored = {model.name for step in spec.steps for model in step.models}
        # Baseline rows are named by the evaluation from each model and --baselines.
        scored |= {display_name(baseline, model.name) for step in spec.steps
                   for baseline in step.flags.as_dict().get("baselines", "").split(",") if baseline
                   for model in step.models}
        targets = [step for step in spec.steps if not spec.targets or step.name in spec.targets]
        datasets = {entry.dataset for step in targets for entry in step.suite}
        merges = [step.flags.as_dict() for step in targets if step.tool == "merge"]
        for step in targets:
            if step.tool != "findings":
                continue
            stem = os.path.splitext(os.path.basename(step.inputs[0]))[0]
            (merge,) = [merge for merge in merges if merge.get("output_name") == stem]
            kept = (set(merge["columns"].split(",")) if merge.get("columns")
                    else {f"{dataset}:{key}" for dataset in datasets for key in metrics})
            for claim in read_claims(step.flags.as_dict()["claims"]):
                assert {claim.row, *claim.over} <= scored, (name, claim)
                assert set(claim.columns) <= kept, (name, claim)
                checked += 1
    assert checked == 17
