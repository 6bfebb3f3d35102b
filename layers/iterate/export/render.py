"""Render a RuleSet as a Great Expectations suite (JSON), Soda checks (SodaCL YAML) or a Glue DQDL ruleset."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from iterate.export import regex as rx
from iterate.export.quote import dqdl_str, number, spark_ident, spark_str, sql_ident, sql_str, yaml_str
from iterate.export.rules import Check, RuleSet, tidy
from iterate.profile.parse import strftime_to_regex
from iterate.visible import visible

FORMATS = ("gx", "soda", "dqdl")
# numpy dtype names: GX 1.24 does not match pandas' nullable dtypes (Int64) against any type name.
GX_INTEGER = ["int8", "int16", "int32", "int64"]
GX_DECIMAL = [*GX_INTEGER, "float32", "float64"]
# How the exported rules expect a CSV to be loaded (the tests load it exactly so).
LOADING = {
    "gx": (
        "pandas: every column read as text (object), the null values below missing; then each column listed in "
        "numeric_columns goes through pandas.to_numeric when all its values read as that kind of number, else stays text"
    ),
    "soda": (
        "DuckDB: every column VARCHAR (read_csv all_varchar), the null values below NULL; or a typed warehouse "
        "table (numbers, dates): text checks read each value cast to VARCHAR, a typed date needs no format"
    ),
    "dqdl": "a Glue table whose columns are strings (numbers as double where the rules compare them)",
}


@dataclass
class Rendered:
    text: str
    checks: list[Check]  # the checks written, in file order
    skipped: dict[str, str] = field(default_factory=dict)  # confirmed issues this file does not encode


def _finish(rules: RuleSet, written: list[Check], dropped: dict[str, str]) -> dict[str, str]:
    skipped = dict(rules.skipped)
    encoded = {i for c in written for i in c.issues}
    for c in rules.checks:
        for i in c.issues:
            if i not in encoded and i not in skipped:
                skipped[i] = dropped.get(c.id, "no check in this format encodes it")
    return skipped


# --- Great Expectations ---------------------------------------------------------------------------------------


def _gx_expectation(rules: RuleSet, c: Check) -> dict[str, Any] | None:
    col = c.columns[0]
    kw: dict[str, Any]
    if c.kind == "columns":
        typ, kw = "expect_table_columns_to_match_ordered_list", {"column_list": list(c.columns)}
    elif c.kind == "not_null":
        typ, kw = "expect_column_values_to_not_be_null", {"column": col}
    elif c.kind == "number":
        # pandas reads an integer column with missing values as float64.
        has_missing = any(p.name == col and p.missing > 0 for p in rules.columns)
        types = GX_INTEGER if c.params.get("integer") and not has_missing else GX_DECIMAL
        typ, kw = "expect_column_values_to_be_in_type_list", {"column": col, "type_list": types}
    elif c.kind == "between":
        typ = "expect_column_values_to_be_between"
        kw = {"column": col, "min_value": c.params["low"], "max_value": c.params["high"]}
        if c.params.get("strict"):
            kw |= {"strict_min": c.params["low"] is not None, "strict_max": c.params["high"] is not None}
    elif c.kind in ("in_set", "not_in_set"):
        if rules.numeric(col):
            return None
        typ = (
            "expect_column_values_to_be_in_set"
            if c.kind == "in_set"
            else "expect_column_values_to_not_be_in_set"
        )
        kw = {"column": col, "value_set": list(c.params["values"])}
    elif c.kind in ("regex", "not_regex"):
        if rules.numeric(col):
            return None
        typ = (
            "expect_column_values_to_match_regex"
            if c.kind == "regex"
            else "expect_column_values_to_not_match_regex"
        )
        regex = rx.flavour(c.params["regex"], "python")
        kw = {"column": col, "regex": regex if c.kind == "regex" else c.params["regex"]}
    elif c.kind == "date":
        typ = "expect_column_values_to_match_strftime_format"
        kw = {"column": col, "strftime_format": c.params["format"]}
    elif c.kind == "unique":
        if len(c.columns) == 1:
            typ, kw = "expect_column_values_to_be_unique", {"column": col}
        else:
            typ, kw = "expect_compound_columns_to_be_unique", {"column_list": list(c.columns)}
    elif c.kind == "dependency":
        pairs = c.params.get("pairs")
        if not pairs or any(rules.numeric(x) for x in c.columns):
            return None
        typ = "expect_column_pair_values_to_be_in_set"
        kw = {
            "column_A": c.columns[0],
            "column_B": c.columns[1],
            "value_pairs_set": pairs,
            "ignore_row_if": "either_value_is_missing",
        }
    else:  # pragma: no cover - every kind is handled above
        return None
    if "mostly" in c.params:
        kw["mostly"] = c.params["mostly"]
    meta = {"iterate": {"check": c.id, "level": c.level, "issues": list(c.issues), "why": c.why}}
    # GX reports a failed warning as unsuccessful, with severity "warning": a gate reads the critical ones.
    return {
        "type": typ,
        "kwargs": kw,
        "meta": meta,
        "severity": "critical" if c.level == "fail" else "warning",
    }


def to_gx(rules: RuleSet) -> Rendered:
    expectations, written, dropped = [], [], {}
    for c in rules.checks:
        e = _gx_expectation(rules, c)
        if e is None:
            dropped[c.id] = "GX compares a numeric column's values as numbers, or the pairs were not kept"
            continue
        expectations.append(e)
        written.append(c)
    skipped = _finish(rules, written, dropped)
    suite = {
        "name": f"iterate-{rules.dataset}",
        "expectations": expectations,
        "meta": {
            "iterate": {
                "loading": LOADING["gx"],
                "null_values": rules.null_values,
                "numeric_columns": {
                    c.name: rules.numeric(c.name) for c in rules.columns if rules.numeric(c.name)
                },
                "not_exported": skipped,
            }
        },
    }
    # ensure_ascii: every non-ASCII character (a bidi override in a value) is written as an escape.
    return Rendered(json.dumps(suite, indent=2, ensure_ascii=True) + "\n", written, skipped)


# --- Soda (SodaCL, DuckDB SQL) --------------------------------------------------------------------------------


def _re2(regex: str) -> str:
    return sql_str(rx.flavour(regex, "re2"))


def _soda_condition(c: Check) -> str | None:
    """The SQL condition a failed row of a column check meets. Text is read through CAST(... AS VARCHAR), so
    the check runs on a typed warehouse table as on an all-text one (DuckDB has no regex on a number)."""
    q = sql_ident(c.columns[0])
    text = f"CAST({q} AS VARCHAR)"
    typed = f"typeof({q}) <> 'VARCHAR'"
    present = f"{q} IS NOT NULL"
    if c.kind == "not_null":
        return f"{q} IS NULL"
    if c.kind == "number":
        regex = rx.INTEGER if c.params.get("integer") else rx.DECIMAL
        if not c.params.get("integer"):
            return f"{present} AND NOT regexp_full_match({text}, {_re2(regex)})"
        # A typed column holds numbers; whole numbers are the ones equal to their rounding (1.0 in a DOUBLE).
        val = f"TRY_CAST({text} AS DOUBLE)"
        return (
            f"{present} AND CASE WHEN {typed} THEN {val} IS NULL OR {val} <> round({val}) "
            f"ELSE NOT regexp_full_match({text}, {_re2(regex)}) END"
        )
    if c.kind == "between":
        val = f"TRY_CAST({text} AS DOUBLE)"
        low, high = c.params["low"], c.params["high"]
        below, above = ("<=", ">=") if c.params.get("strict") else ("<", ">")
        out = [f"NOT regexp_full_match({text}, {_re2(rx.DECIMAL)})"]
        if low is not None:
            out.append(f"{val} {below} {number(low)}")
        if high is not None:
            out.append(f"{val} {above} {number(high)}")
        return f"{present} AND ({' OR '.join(out)})"
    if c.kind in ("in_set", "not_in_set"):
        values = ", ".join(sql_str(v) for v in c.params["values"])
        op = "NOT IN" if c.kind == "in_set" else "IN"
        return f"{present} AND {text} {op} ({values})"
    if c.kind == "regex":
        return f"{present} AND NOT regexp_full_match({text}, {_re2(c.params['regex'])})"
    if c.kind == "not_regex":
        return f"{present} AND regexp_matches({text}, {_re2(c.params['regex'])})"
    if c.kind == "date":
        # A typed DATE or TIMESTAMP is a date whatever the file wrote; text must have the format and exist.
        shape = strftime_to_regex(c.params["format"]) or ".*"
        parsed = f"TRY_STRPTIME({text}, {sql_str(c.params['format'])})"
        return f"{present} AND NOT {typed} AND (NOT regexp_full_match({text}, {_re2(shape)}) OR {parsed} IS NULL)"
    return None


def _soda_sql(rules: RuleSet, table: str, c: Check) -> tuple[str, str] | None:
    """("fail condition" | "fail query", SQL) for one check."""
    condition = _soda_condition(c)
    if condition is not None and "mostly" in c.params:
        # A tolerance: the check fails (returns a row) only when the share of rows meeting the condition is
        # over 1 - mostly; DuckDB's AVG of a boolean is that share.
        share = number(tidy(1 - c.params["mostly"]))
        return (
            "fail query",
            f"SELECT COUNT(*) AS n FROM {table} HAVING AVG(CASE WHEN {condition} THEN 1.0 ELSE 0.0 END) > {share}",
        )
    if condition is not None:
        return "fail condition", condition
    if c.kind == "unique":
        cols = ", ".join(sql_ident(x) for x in c.columns)
        return "fail query", f"SELECT {cols}, COUNT(*) AS n FROM {table} GROUP BY {cols} HAVING COUNT(*) > 1"
    if c.kind == "dependency":
        lhs, rhs = sql_ident(c.columns[0]), sql_ident(c.columns[1])
        return (
            "fail query",
            f"SELECT {lhs}, COUNT(DISTINCT {rhs}) AS n FROM {table} WHERE {lhs} IS NOT NULL AND {rhs} IS NOT NULL "
            f"GROUP BY {lhs} HAVING COUNT(DISTINCT {rhs}) > 1",
        )
    return None


def soda_table(name: str) -> str:
    """The table name the checks are written for: a plain identifier (SodaCL does not quote it)."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or "data"
    return cleaned if not cleaned[0].isdigit() else f"t_{cleaned}"


def soda_name(c: Check) -> str:
    """A check's name in the Soda file: its id, why it exists and the issues it encodes (results name it so)."""
    issues = f" (issues: {', '.join(c.issues)})" if c.issues else ""
    return f"[{c.id}] {c.why}{issues}"


def to_soda(rules: RuleSet, table: str | None = None) -> Rendered:
    table = soda_table(table or rules.dataset)
    lines = [
        "# Soda checks written by `iterate export` from a run's profile and confirmed issues.",
        "# Each check's name starts with its id; conditions are DuckDB SQL on a table loaded as:",
        f"#   {LOADING['soda']}",
        f"#   null values: {json.dumps(rules.null_values)}",
        f"checks for {table}:",
    ]
    written = []
    for c in rules.checks:
        name = yaml_str(soda_name(c))
        if c.kind == "columns":
            cols = ", ".join(yaml_str(x) for x in c.columns)
            lines += [
                "  - schema:",
                f"      name: {name}",
                "      fail:",
                f"        when required column missing: [{cols}]",
            ]
            written.append(c)
            continue
        sql = _soda_sql(rules, table, c)
        if sql is None:
            continue
        key, text = sql
        lines += ["  - failed rows:", f"      name: {name}", f"      {key}: {yaml_str(text)}"]
        if c.level == "warn":  # a profile observation: reported, never a failure
            lines.append("      warn: when > 0")
        written.append(c)
    skipped = _finish(rules, written, {})
    if skipped:
        lines.append("# Confirmed issues no check here encodes:")
        lines += [f"#   {json.dumps(i)}: {json.dumps(why)}" for i, why in skipped.items()]
    return Rendered("\n".join(lines) + "\n", written, skipped)


# --- AWS Glue Data Quality (DQDL) ------------------------------------------------------------------------------


def _dqdl_rule(rules: RuleSet, c: Check, has_missing: bool) -> str | None:
    col = dqdl_str(c.columns[0]) if c.columns else ""
    ident = spark_ident(c.columns[0]) if c.columns else ""
    where = f" where {dqdl_str(f'{ident} is not null')}" if has_missing else ""
    if c.kind == "columns":
        return f"ColumnCount = {len(c.columns)}"
    if c.kind == "not_null" and "mostly" in c.params:
        return f"Completeness {col} >= {number(c.params['mostly'])}"
    if c.kind == "not_null":
        # Glue reads a blank CSV string as "", not NULL: both are refused.
        return f"ColumnValues {col} not in [ NULL, EMPTY ]"
    if c.kind == "number":
        regex = rx.INTEGER if c.params.get("integer") else rx.DECIMAL
        return f"ColumnValues {col} matches {dqdl_str(rx.flavour(regex, 'java'))}{where}"
    if c.kind == "between":
        lt, gt = ("<", ">") if c.params.get("strict") else ("<=", ">=")
        parts = [
            f"ColumnValues {col} {op} {number(c.params[k])}{where}"
            for k, op in (("low", gt), ("high", lt))
            if c.params[k] is not None
        ]
        return " and ".join(f"({p})" for p in parts) if len(parts) > 1 else (parts[0] if parts else None)
    if c.kind == "in_set":
        values = [dqdl_str(v) for v in c.params["values"]]
        if has_missing:
            values += ["NULL", "EMPTY"]
        return f"ColumnValues {col} in [ {', '.join(values)} ]"
    if c.kind == "not_in_set":
        return f"ColumnValues {col} not in [ {', '.join(dqdl_str(v) for v in c.params['values'])} ]"
    if c.kind in ("regex", "date"):
        pattern: str | None = (
            c.params["regex"] if c.kind == "regex" else strftime_to_regex(c.params["format"])
        )
        if pattern is None:
            return None
        return f"ColumnValues {col} matches {dqdl_str(rx.flavour(pattern, 'java'))}{where}"
    if c.kind == "not_regex":
        sql = f"select count(*) from primary where {ident} rlike {spark_str(rx.flavour(c.params['regex'], 'java'))}"
        return f"CustomSql {dqdl_str(sql)} = 0"
    if c.kind == "unique":
        if len(c.columns) == 1:
            return f"IsUnique {col}"
        cols = ", ".join(spark_ident(x) for x in c.columns)
        sql = f"select count(*) from (select {cols} from primary group by {cols} having count(*) > 1) t"
        return f"CustomSql {dqdl_str(sql)} = 0"
    if c.kind == "dependency":
        lhs, rhs = spark_ident(c.columns[0]), spark_ident(c.columns[1])
        sql = (
            f"select count(*) from (select {lhs} from primary where {lhs} is not null and {rhs} is not null "
            f"group by {lhs} having count(distinct {rhs}) > 1) t"
        )
        return f"CustomSql {dqdl_str(sql)} = 0"
    return None


def to_dqdl(rules: RuleSet) -> Rendered:
    missing = {c.name: c.missing > 0 for c in rules.columns}
    out, written, dropped = [], [], {}
    for c in rules.checks:
        parse_issues = set(c.params.get("parse_issues") or ())
        if parse_issues:
            # DQDL matches a date's shape; no rule type parses it, so impossible dates are not encoded here.
            c = replace(c, issues=tuple(i for i in c.issues if i not in parse_issues))
        rule = _dqdl_rule(rules, c, missing.get(c.columns[0], False) if c.columns else False)
        if rule is None:
            continue
        if visible(rule) != rule:
            # DQDL strings escape only `"` and `\`: a newline, tab or control character would stand raw.
            dropped[c.id] = "a name or value holds a control character, which a DQDL string cannot escape"
            continue
        out.append(rule)
        written.append(c)
    skipped = _finish(rules, written, dropped)
    for c in rules.checks:
        for i in c.params.get("parse_issues") or ():
            if i not in {j for w in written for j in w.issues}:
                skipped[i] = "DQDL checks a date's shape, not that the day exists"
    body = ",\n".join(f"    {r}" for r in out)
    return Rendered(f"Rules = [\n{body}\n]\n" if out else "Rules = [ ]\n", written, skipped)


def render(rules: RuleSet, fmt: str, *, table: str | None = None) -> Rendered:
    if fmt == "gx":
        return to_gx(rules)
    if fmt == "soda":
        return to_soda(rules, table)
    if fmt == "dqdl":
        return to_dqdl(rules)
    raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
