"""Findings written by the project's one rule for orderings, from a merged results table.

A row leads another on a column only when their means differ by more than twice the larger of
the two rows' seed standard deviations (`tables.level`; a row without seeds counts 0), otherwise
they are level. A row trained with one seed has no measured spread, so against another such row
or a row without seeds the rule cannot call a lead: that comparison gives its gap only (as the
docs say of one-seed rows). From a table (the JSON `evaluation/merge_results.py` writes, `ResultsTable.to_dict`)
this module states, by that rule alone:

- per claim (declared in a claims file: a row a paper puts ahead of other rows on some columns,
  or a row that should match others, as a bfloat16 run its float32 one), on each column and
  against each other row, whether the row leads, is level or is behind, or, between rows of one
  seed or none, their gap only; and whether the claim holds on all it decides;
- per ranked column, the best mean and every row the rule finds level with it (the table's bold);
- against an earlier version of the same table, every cell that moved by more than the rule
  allows, and the rows either version lacks.

Why a number moved is the docs' to say (results/SUPERSEDED.md lists the changes); this says what.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess

import yaml

from dialoguecse_tf.evaluation.tables import level, metric_directions, metric_text, spread_unmeasured

LEADS, LEVEL, BEHIND, MISSING = "leads", "level", "behind", "missing"
GAP_ONLY = "gap only"
_CLAIM_FIELDS = ("paper", "ordering", "row", "over", "columns")
_OPTIONAL_FIELDS = ("expect",)
EXPECTATIONS = ("lead", "level")
RULE = ("A row leads another on a column only when their means differ by more than twice the larger of the two "
        "rows' seed standard deviations (a row without seeds counts 0); otherwise they are level. Where one row has "
        "one seed and the other one seed or none, no spread is measured: the gap alone is given (gap only).")


@dataclasses.dataclass(frozen=True)
class Claim:
    """One claim: `row` ahead of (`expect="lead"`) or level with (`"level"`) each of `over` on each
    of `columns`."""

    paper: str  # whose claim, e.g. "DSE (Zhou et al., 2022)"
    ordering: str  # the claim in words, e.g. "DSE over SimCSE on 1-shot intent classification"
    row: str  # the model the claim is about, as the table names it (seeds folded)
    over: tuple  # the models it is compared with
    columns: tuple  # "Dataset:metric_key", e.g. "Banking77:acc_1shot"
    expect: str = "lead"  # "lead": the row should lead every other; "level": be level with them


@dataclasses.dataclass(frozen=True)
class Cell:
    """One row's number in one column: the mean over its seeds and their sample std (0 without seeds)."""

    value: float
    std: float
    seeds: int

    def text(self) -> str:
        return metric_text(self.value, self.std if self.seeds > 1 else None)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """How `claim.row` stands against `other` on `column` by the rule."""

    claim: Claim
    column: str
    other: str
    outcome: str  # LEADS, LEVEL, BEHIND, GAP_ONLY, or MISSING when either row lacks the column
    row_cell: Cell | None
    other_cell: Cell | None


@dataclasses.dataclass(frozen=True)
class Move:
    """One cell of a row both tables have, before and after."""

    model: str
    column: str
    before: Cell
    after: Cell

    @property
    def moved(self) -> bool:
        """Whether the two numbers differ by more than the rule calls level, and in the two decimals
        tables print. A row of one seed or none has no spread, so any change counts: it is the same
        run's number, which a rerun of unchanged code repeats."""
        return (not level(self.after.value, self.after.std, self.before.value, self.before.std)
                and metric_text(self.after.value) != metric_text(self.before.value))


def read_claims(path: str) -> list[Claim]:
    """The claims of a YAML file: `claims:`, a list of mappings with the `Claim` fields (`expect` optional).

    Args:
      path: the claims file.

    Returns:
      list of Claim, in file order.

    Raises:
      ValueError: naming the file and the claim, if a claim lacks a field, has an unknown one, or
        names a column not written `Dataset:metric_key`.
    """
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or not isinstance(data.get("claims"), list) or not data["claims"]:
        raise ValueError(f"{path}: a claims file holds `claims:`, a list of mappings with {', '.join(_CLAIM_FIELDS)}")
    claims = []
    for index, item in enumerate(data["claims"], start=1):
        if not isinstance(item, dict) or not set(_CLAIM_FIELDS) <= set(item) <= {*_CLAIM_FIELDS, *_OPTIONAL_FIELDS}:
            given = sorted(item) if isinstance(item, dict) else type(item).__name__
            raise ValueError(f"{path}: claim {index} has {given}; it needs {', '.join(_CLAIM_FIELDS)} "
                             f"(and may give {', '.join(_OPTIONAL_FIELDS)})")
        expect = str(item.get("expect", "lead"))
        if expect not in EXPECTATIONS:
            raise ValueError(f"{path}: claim {index} ({item['ordering']}): expect {expect!r} is not one of "
                             f"{', '.join(EXPECTATIONS)}")
        columns = tuple(str(column) for column in item["columns"])
        bad = [column for column in columns if column.count(":") != 1 or not all(column.split(":"))]
        if bad:
            raise ValueError(f"{path}: claim {index} ({item['ordering']}): columns {bad} are not Dataset:metric_key")
        claims.append(Claim(str(item["paper"]), str(item["ordering"]), str(item["row"]),
                            tuple(str(name) for name in item["over"]), columns, expect))
    return claims


def cells(table: dict) -> dict:
    """{(model, "Dataset:key"): Cell} for every number of a merged table's rows.

    Args:
      table: a merged table as JSON (`ResultsTable.to_dict`): rows with `model`, `metrics`,
        `spread`, `seeds` and, where a metric has fewer seeds than its row, `metric_seeds`.
    """
    found = {}
    for row in table["rows"]:
        for dataset, values in row["metrics"].items():
            for key, value in values.items():
                std = row.get("spread", {}).get(dataset, {}).get(key, 0.0)
                seeds = row.get("metric_seeds", {}).get(dataset, {}).get(key, row.get("seeds", []))
                found[(row["model"], f"{dataset}:{key}")] = Cell(value, std, len(seeds))
    return found


def outcome(cell: Cell, other: Cell, higher_is_better: bool = True) -> str:
    """LEADS, LEVEL or BEHIND: `cell` against `other` by the rule; GAP_ONLY where neither has a
    measured spread and one is a single seed's (two rows without seeds are exact: the rule applies)."""
    if spread_unmeasured(cell.seeds, other.seeds):
        return GAP_ONLY
    if level(cell.value, cell.std, other.value, other.std):
        return LEVEL
    ahead = cell.value > other.value if higher_is_better else cell.value < other.value
    return LEADS if ahead else BEHIND


def judge(table: dict, claim: Claim) -> list[Verdict]:
    """Every (column, other row) comparison of `claim` in `table`, in the claim's order.

    Args:
      table: a merged table as JSON.
      claim: Claim.

    Returns:
      list of Verdict, columns outer, other rows inner; MISSING where either row lacks the column.
    """
    found = cells(table)
    directions = metric_directions()
    verdicts = []
    for column in claim.columns:
        higher_is_better = directions.get(column.split(":")[1])
        for other in claim.over:
            mine, theirs = found.get((claim.row, column)), found.get((other, column))
            result = MISSING if mine is None or theirs is None else outcome(mine, theirs, higher_is_better is not False)
            verdicts.append(Verdict(claim, column, other, result, mine, theirs))
    return verdicts


def tally(verdicts: list[Verdict], expect: str = "lead") -> dict:
    """The claim's standing ("holds", "level", "reversed", "holds in part", "does not hold", "gap
    only" or "not scored") and its counts of each outcome, under LEADS, LEVEL, BEHIND, GAP_ONLY and
    MISSING. The standing reads the comparisons the rule decides (`scored`); a claimed lead: holds
    (ahead in all), level (level in all), reversed (behind in all), holds in part (ahead in some)
    or does not hold (ahead in none, behind in some); a claimed level: holds or does not hold."""
    counts = {name: sum(verdict.outcome == name for verdict in verdicts)
              for name in (LEADS, LEVEL, BEHIND, GAP_ONLY, MISSING)}
    scored = len(verdicts) - counts[MISSING] - counts[GAP_ONLY]
    if not scored:
        standing = "gap only" if counts[GAP_ONLY] else "not scored"
    elif expect == "level":
        standing = "holds" if counts[LEVEL] == scored else "does not hold"
    elif counts[LEADS] == scored:
        standing = "holds"
    elif counts[BEHIND] == scored:
        standing = "reversed"
    elif counts[LEVEL] == scored:
        standing = "level"
    else:
        standing = "holds in part" if counts[LEADS] else "does not hold"
    return {"standing": standing, "scored": scored, **counts}


def summarize(verdicts: list[Verdict], expect: str = "lead") -> str:
    """The claim's standing in one sentence, with the counts (`tally`)."""
    counts = tally(verdicts, expect)
    gap_only = (f"{counts[GAP_ONLY]} between rows of one seed or none, which give their gap only"
                if counts[GAP_ONLY] else "")
    missing = f"{counts[MISSING]} not in the table" if counts[MISSING] else ""
    if not counts["scored"]:
        if not gap_only:
            return "not scored: the table lacks these rows or columns"
        return f"gap only: {gap_only}" + (f" ({missing})" if missing else "")
    text = (f"{counts['standing']}: ahead in {counts[LEADS]} of {counts['scored']} comparisons, level in "
            f"{counts[LEVEL]}, behind in {counts[BEHIND]}")
    notes = [note for note in (gap_only, missing) if note]
    return text + (f" ({'; '.join(notes)})" if notes else "")


def moves(previous: dict, table: dict) -> tuple[list[Move], list[str], list[str]]:
    """How `table` differs from `previous`, an earlier version of it.

    Args:
      previous, table: merged tables as JSON.

    Returns:
      (moves, new rows, dropped rows): a Move for every cell both tables have for a model both
      have, in `table`'s order; the models only `table` has; the models only `previous` has.
    """
    before, after = cells(previous), cells(table)
    models_before = [row["model"] for row in previous["rows"]]
    models_after = [row["model"] for row in table["rows"]]
    found = [Move(model, column, before[(model, column)], cell) for (model, column), cell in after.items()
             if (model, column) in before and not column.endswith("_std")]
    return (found, [name for name in models_after if name not in models_before],
            [name for name in models_before if name not in models_after])


def _header(table: dict, column: str) -> str:
    dataset, key = column.split(":")
    for name, metric, header in table.get("columns", []):
        if (name, metric) == (dataset, key):
            return header
    return f"{dataset} {key}"


def findings_markdown(table: dict, claims: list[Claim], previous: dict | None = None,
                      previous_name: str = "") -> str:
    """The findings as Markdown: the claims, the columns' leaders, and what moved against `previous`.

    Args:
      table: the merged table as JSON.
      claims: list of Claim.
      previous: optional, an earlier version of the table as JSON.
      previous_name: how the text names `previous` (e.g. "the table at d878363").

    Returns:
      str, the Markdown text.
    """
    judged = [(claim, judge(table, claim)) for claim in claims]
    lines = ["# Findings", "", RULE, "",
             "| Whose | Claim | Standing | Ahead | Level | Behind | Gap only | Not in the table |",
             "|:--|:--|:--|--:|--:|--:|--:|--:|"]
    for claim, verdicts in judged:
        counts = tally(verdicts, claim.expect)
        lines.append(f"| {claim.paper} | {claim.ordering} | {counts['standing']} | {counts[LEADS]} | {counts[LEVEL]} | "
                     f"{counts[BEHIND]} | {counts[GAP_ONLY]} | {counts[MISSING]} |")
    lines += ["", "Ahead, level, behind, gap only: the claim's row against each other row on each column "
              "(`## The claims`).",
              "", "## The claims", ""]
    for claim, verdicts in judged:
        lines += [f"### {claim.paper}: {claim.ordering}", "", f"{summarize(verdicts, claim.expect)}.", "",
                  f"| Column | Against | {claim.row} | The other | Outcome |", "|:--|:--|--:|--:|:--|"]
        for verdict in verdicts:
            mine = verdict.row_cell.text() if verdict.row_cell else "–"
            theirs = verdict.other_cell.text() if verdict.other_cell else "–"
            result = verdict.outcome
            if result == GAP_ONLY:
                result += f" ({verdict.row_cell.value - verdict.other_cell.value:+.2f})"
            lines.append(f"| {_header(table, verdict.column)} | {verdict.other} | {mine} | {theirs} | {result} |")
        lines.append("")
    best = table.get("best", {})
    if best:
        # The gap-only column only where some column has such rows: the other tables stay as they were.
        gaps = unmeasured_beside_best(table)
        titles = ["Column", "Best mean and the rows level with it"] + (
            ["Gap only: rows the rule cannot judge against the best mean (one seed beside one seed or none)"]
            if gaps else [])
        lines += ["## Each column's best", "", "| " + " | ".join(titles) + " |", "|" + ":--|" * len(titles)]
        for header, models in best.items():
            row = [header, ", ".join(models)] + (
                [", ".join(f"{model} ({gap:+.2f})" for model, gap in gaps.get(header, [])) or "–"] if gaps else [])
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    if previous is not None:
        found, new, dropped = moves(previous, table)
        moved = [move for move in found if move.moved]
        lines += [f"## Against {previous_name or 'the previous table'}", "",
                  f"{len(moved)} of the {len(found)} cells both tables hold moved by more than the rule calls level"
                  + (f"; rows only in this table: {', '.join(new)}" if new else "")
                  + (f"; rows only in the previous one: {', '.join(dropped)}" if dropped else "") + ".", ""]
        if moved:
            lines += ["| Row | Column | Before | After | Change |", "|:--|:--|--:|--:|--:|"]
            lines += [f"| {move.model} | {_header(table, move.column)} | {move.before.text()} | {move.after.text()} | "
                      f"{move.after.value - move.before.value:+.2f} |" for move in moved]
            lines.append("")
    return "\n".join(lines)


def unmeasured_beside_best(table: dict) -> dict:
    """{header: [(model, gap to the best mean)]}: for each column of the table's `best`, the rows
    not listed there whose comparison with the best-mean row the rule cannot decide (one of them
    a single seed's, neither with a measured spread): the list calls them neither level nor behind.

    Args:
      table: a merged table as JSON (`ResultsTable.to_dict`).

    Returns:
      the rows per column header, in row order; columns without such rows are left out.
    """
    found = cells(table)
    directions = metric_directions()
    keys = {header: (f"{dataset}:{key}", key) for dataset, key, header in table.get("columns", [])}
    result = {}
    for header, models in table.get("best", {}).items():
        column, key = keys[header]
        listed = [found[(model, column)] for model in models]
        best = (max if directions[key] else min)(cell.value for cell in listed)
        # A row left off the list is behind the best mean by the rule unless no best-mean row has
        # a spread to judge it by; level rows beside the best do not decide it.
        leaders = [cell for cell in listed if cell.value == best]
        for row in table["rows"]:
            cell = found.get((row["model"], column))
            if cell is None or row["model"] in models:
                continue
            if all(spread_unmeasured(cell.seeds, leader.seeds) for leader in leaders):
                result.setdefault(header, []).append((row["model"], cell.value - best))
    return result


def findings_dict(table: dict, claims: list[Claim], previous: dict | None = None) -> dict:
    """The findings as JSON-ready data: every verdict and, with `previous`, every move."""
    result = {"rule": RULE, "claims": []}
    for claim in claims:
        verdicts = judge(table, claim)
        result["claims"].append({
            **dataclasses.asdict(claim), "summary": summarize(verdicts, claim.expect),
            "verdicts": [{"column": v.column, "other": v.other, "outcome": v.outcome,
                          "row": dataclasses.asdict(v.row_cell) if v.row_cell else None,
                          "other_row": dataclasses.asdict(v.other_cell) if v.other_cell else None}
                         for v in verdicts]})
    result["best"] = table.get("best", {})
    gaps = unmeasured_beside_best(table)
    if gaps:
        result["gap_only_beside_best"] = {header: [{"model": model, "gap": gap} for model, gap in rows]
                                          for header, rows in gaps.items()}
    if previous is not None:
        found, new, dropped = moves(previous, table)
        result["moves"] = [{"model": m.model, "column": m.column, "before": dataclasses.asdict(m.before),
                            "after": dataclasses.asdict(m.after), "moved": m.moved} for m in found]
        result["new_rows"], result["dropped_rows"] = new, dropped
    return result


def output_paths(output_dir: str, stem: str) -> tuple[str, str]:
    """(Markdown path, JSON path) of the findings `stem` in `output_dir`."""
    return os.path.join(output_dir, stem + ".md"), os.path.join(output_dir, stem + ".json")


def read_table(source: str, repo_root: str = ".") -> dict:
    """A merged table as JSON, from a file or from git history.

    Args:
      source: a table's path, or `REV:PATH` (git's notation: the file PATH as commit REV holds it,
        e.g. `d878363:results/benchmark/results.json`), read in `repo_root`.
      repo_root: the repository git reads `REV:PATH` from.

    Returns:
      dict, the table.

    Raises:
      ValueError: naming `source`, if it is neither a file nor a `REV:PATH` git can show, or not a table.
    """
    if os.path.isfile(source):
        with open(source, encoding="utf-8") as f:
            text = f.read()
    elif ":" in source:
        done = subprocess.run(["git", "show", source], cwd=repo_root, capture_output=True, text=True)
        if done.returncode:
            raise ValueError(f"{source}: not a file, and git cannot show it: {done.stderr.strip().splitlines()[-1]}")
        text = done.stdout
    else:
        raise ValueError(f"{source}: no such file (give a table's path, or REV:PATH of one in git history)")
    try:
        table = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{source}: not JSON ({error})") from None
    if not isinstance(table, dict) or not isinstance(table.get("rows"), list):
        raise ValueError(f"{source}: not a merged results table (no `rows`; evaluation/merge_results.py writes one)")
    return table
