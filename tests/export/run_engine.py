"""Run exported rules with a real engine on one CSV; prints {check key: "pass" | "fail"} as JSON.

Runs inside .venv-engines (GX Core, Soda Core + DuckDB), never imports Iterate: it loads the file the way the
export's header says (every column text, the null values missing, numeric columns typed for GX); soda-typed
loads it as a warehouse would, each column typed by DuckDB's own CSV sniffer (numbers, dates). A check reads
"pass", "fail" or "warn" (a warning-level check that did not pass).
usage: run_engine.py gx|soda|soda-typed RULES_FILE CSV_FILES_JSON NULLS_JSON NUMERIC_JSON TABLE (one process for all files:
importing GX takes seconds)
"""

import csv
import json
import os
import re
import sys

INTEGER = r"^[+-]?\d+$"
DECIMAL = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"


def read_rows(path, nulls):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = [[None if v in nulls else v for v in row] for row in reader]
    return header, rows


def run_gx(rules_path, header, rows, numeric):
    import great_expectations as gx
    import pandas as pd

    df = pd.DataFrame(rows, columns=header, dtype=object)
    for col, kind in numeric.items():
        if col not in df.columns:
            continue  # the columns check reports it
        pattern = INTEGER if kind == "integer" else DECIMAL
        if df[col].dropna().map(lambda v, p=pattern: re.fullmatch(p, v) is not None).all():
            df[col] = pd.to_numeric(df[col])
    with open(rules_path, encoding="utf-8") as f:
        suite_dict = json.load(f)
    ctx = gx.get_context(mode="ephemeral")
    suite = gx.ExpectationSuite(name=suite_dict["name"], expectations=suite_dict["expectations"])
    batch = (
        ctx.data_sources.add_pandas("iterate")
        .add_dataframe_asset("table")
        .add_batch_definition_whole_dataframe("all")
        .get_batch(batch_parameters={"dataframe": df})
    )
    result = batch.validate(suite)
    out = {}
    for r in result.results:
        key = r.expectation_config.meta["iterate"]["check"]
        warning = str(getattr(r.expectation_config, "severity", "")).lower().endswith("warning")
        out[key] = "pass" if r.success else ("warn" if warning else "fail")
    return out


def run_soda(rules_path, header, rows, table, typed_from=None, nulls=()):
    import duckdb
    from soda.common.config_helper import ConfigHelper

    home = os.environ["HOME"]
    os.makedirs(os.path.join(home, ".soda"), exist_ok=True)
    with open(os.path.join(home, ".soda", "config.yml"), "w") as f:
        f.write("send_anonymous_usage_stats: false\n")
    ConfigHelper.get_instance(os.path.join(home, ".soda", "config.yml"))
    from soda.scan import Scan

    con = duckdb.connect()
    if typed_from is not None:
        nullstr = ", ".join("'" + n.replace("'", "''") + "'" for n in nulls)
        path = typed_from.replace("'", "''")
        con.execute(
            f"CREATE TABLE {table} AS SELECT * FROM read_csv('{path}', header = true, nullstr = [{nullstr}])"
        )
        rows = []
    else:
        cols = ", ".join('"' + h.replace('"', '""') + '" VARCHAR' for h in header)
        con.execute(f"CREATE TABLE {table} ({cols})")
    if rows:
        marks = ", ".join("?" for _ in header)
        con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    scan = Scan()
    scan.set_data_source_name("duckdb")
    scan.add_duckdb_connection(con, data_source_name="duckdb")
    with open(rules_path, encoding="utf-8") as f:
        scan.add_sodacl_yaml_str(f.read())
    scan.execute()
    out = {}
    for check in scan.get_scan_results()["checks"]:
        out[check["name"]] = {"pass": "pass", "warn": "warn"}.get(check["outcome"], "fail")
    errors = [str(log) for log in scan.get_logs_text().splitlines() if "ERROR" in log]
    return out, errors


def batch(jobs_path):
    """Many (engine, rules, file) jobs in one process: GX and Soda are imported once."""
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    out = []
    for job in jobs:
        nulls = set(job["nulls"])
        header, rows = read_rows(job["csv"], nulls)
        if job["engine"] == "gx":
            out.append({"results": run_gx(job["rules"], header, rows, job["numeric"]), "errors": []})
        else:
            typed = job["csv"] if job["engine"] == "soda-typed" else None
            results, errors = run_soda(job["rules"], header, rows, job["table"], typed, sorted(nulls))
            out.append({"results": results, "errors": errors})
    print(json.dumps(out))


def main():
    if sys.argv[1] == "batch":
        return batch(sys.argv[2])
    engine, rules_path, csv_paths, nulls, numeric, table = sys.argv[1:7]
    out = []
    for csv_path in json.loads(csv_paths):
        header, rows = read_rows(csv_path, set(json.loads(nulls)))
        if engine == "gx":
            out.append({"results": run_gx(rules_path, header, rows, json.loads(numeric)), "errors": []})
        else:
            typed = csv_path if engine == "soda-typed" else None
            results, errors = run_soda(rules_path, header, rows, table, typed, sorted(json.loads(nulls)))
            out.append({"results": results, "errors": errors})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
