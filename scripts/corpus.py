"""Build the training corpus `make calibrate` fits the decision on: tables with known wrong cells, and null tables.

    python scripts/corpus.py [--out out/corpus] [--max-rows 4000]

Every table is a directory holding `dirty.csv`, `clean.csv` (same shape; the wrong cells are where they differ)
and `meta.json` (its group, kind, generator, rate and the columns left out of scoring). The corpus is made of:

- the study pairs (../shared/datasets), as published;
- bases: each study pair's clean file, each table of the real-data corpus (tests/realdata, staged by
  `make realdata-stage`) and each of ../shared/realtables (reviewed in tests/realdata/verdicts_shared.toml),
  first `--max-rows` rows; a real table's columns its verdicts say have problems are left out of scoring
  (their own errors are not known cell by cell);
- each base with errors planted by three generators with different error models:
  * `iterate`: the project's own injector (scripts/inject_errors.py: a typo, a lost value, another row's value,
    a number multiplied by ten or shifted, and in text a stray symbol or a doubled punctuation mark);
  * plus one table merged from 20 sources of varied accuracy (scripts/gen_sources.py): conflicting sources;
  * `bart`: BART-style dependency breaking: functional dependencies that hold in the base are found and their
    right-hand sides broken (a value of the active domain, a typo, a bogus value), as in BART (Arocena et al.,
    VLDB 2015), the generator of the food benchmark;
  * `rein`: the REIN / BigDaMa error-generator kinds: keyboard and OCR typos (nlpaug's augmenters), values
    swapped within a column, Gaussian noise and scaling of numbers, implicit missing values (a placeholder the
    column never held), and format changes (a thousands separator, a trailing `.0`, another date layout, case);
- null data, where every flag is false: each base as it is, and each base with every column shuffled
  independently (no dependency, sequence or block survives a shuffle).

A group is one base and everything made from it (and the study pair it came from): leave-one-out validation
holds a whole group out. The check split (../shared/datasets-check) is never read. Deterministic: the same
inputs and seed give the same files.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from inject_errors import (
    typo,  # the project's own injector's typo: a character replaced, dropped, doubled or swapped
)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
STUDY = SHARED / "datasets"
REALDATA = REPO / "out" / "realdata"
VERDICTS = REPO / "tests" / "realdata" / "verdicts.toml"
SHARED_REAL = SHARED / "realtables"
VERDICTS_SHARED = REPO / "tests" / "realdata" / "verdicts_shared.toml"
DEFAULT_OUT = REPO / "out" / "corpus"

NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)$")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
SLASH_DATE = re.compile(r"^\d{1,2}/\d{1,2}/\d{4}")
LETTERS = re.compile(r"[A-Za-z]")
RATES = (0.01, 0.02, 0.05, 0.1, 0.2)
Planted = tuple[int, str, str]  # (row, column, kind of error)
GENERATORS = ("iterate", "bart", "rein")


@dataclass
class Base:
    """A clean table errors are planted into."""

    name: str
    group: str
    frame: pd.DataFrame  # every value as text, "" for an empty cell
    ignore: list[str] = field(default_factory=list)  # columns left out of scoring


@dataclass
class Pair:
    name: str
    group: str
    kind: str  # study | injected | clean | shuffled
    dirty: pd.DataFrame
    clean: pd.DataFrame
    generator: str = ""
    rate: float = 0.0
    ignore: list[str] = field(default_factory=list)
    planted: list[Planted] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- column kinds


def kind_of(values: np.ndarray) -> str:
    """`number`, `date` or `text`: what at least 90% of a column's filled values look like."""
    filled = [v for v in values if v != ""][:500]
    if not filled:
        return "empty"
    if sum(bool(NUMBER.match(v)) for v in filled) >= 0.9 * len(filled):
        return "number"
    if sum(bool(ISO_DATE.match(v) or SLASH_DATE.match(v)) for v in filled) >= 0.9 * len(filled):
        return "date"
    return "text"


def decimals(v: str) -> int:
    return len(v.split(".")[1]) if "." in v else 0


def write_number(x: float, like: str) -> str:
    d = decimals(like)
    return f"{x:.{d}f}" if d else str(round(x))


# ---------------------------------------------------------------------------------------------- error kinds


def stray_symbol(value: str, rng: np.random.Generator) -> str:
    """A stray mark: a symbol appended or inserted (`Civic*`, `NY-#`), or a punctuation mark doubled."""
    marks = [i for i, ch in enumerate(value) if ch in "'-.,/&"]
    if marks and rng.random() < 0.4:
        i = int(rng.choice(marks))
        return value[: i + 1] + value[i:]
    symbol = str(rng.choice(list("*#~^|+!?")))
    if rng.random() < 0.6 or len(value) < 2:
        return value + symbol
    i = int(rng.integers(1, len(value)))
    return value[:i] + symbol + value[i:]


class Augmenters:
    """nlpaug's keyboard and OCR character augmenters (one character of one word changed), built once."""

    def __init__(self, seed: int) -> None:
        import random

        import nlpaug.augmenter.char as nac

        random.seed(seed)  # nlpaug draws from the random module
        one = {"aug_char_min": 1, "aug_char_max": 1, "aug_word_min": 1, "aug_word_max": 1}
        self.keyboard = nac.KeyboardAug(**one, include_special_char=False, min_char=2)
        self.ocr = nac.OcrAug(**one, min_char=2)

    def apply(self, which: str, value: str) -> str:
        aug = self.keyboard if which == "keyboard" else self.ocr
        try:
            out = aug.augment(value)
        except Exception:  # nlpaug refuses some inputs (no word long enough): fall back to a plain typo
            return value
        text = out[0] if isinstance(out, list) and out else str(out)
        # nlpaug re-joins the words it split on spaces; keep the value's own spacing where nothing changed.
        return text if text.replace(" ", "") != value.replace(" ", "") else value


def other_value(values: np.ndarray, filled: np.ndarray, v: str, rng: np.random.Generator) -> str:
    for _ in range(10):
        w = values[filled[int(rng.integers(filled.size))]]
        if w != v:
            return w
    return v


def placeholder_for(kind: str, present: set[str], rng: np.random.Generator) -> str:
    """An implicit missing value the column never held."""
    pool = {
        "number": ["", "-1", "0", "99999", "-999", "N/A", "?"],
        "date": ["", "1900-01-01", "01/01/1970", "N/A", "?"],
        "text": ["", "N/A", "?", "-", "unknown", "NULL", "none"],
        "empty": [""],
    }[kind]
    choices = [p for p in pool if p not in present] or [""]
    return str(rng.choice(choices))


def reformat(v: str, kind: str, rng: np.random.Generator) -> str:
    """The same value written another way (a format change)."""
    if kind == "number":
        d = decimals(v)
        x = float(v)
        options = []
        if abs(x) >= 1000 and d == 0:
            options.append(f"{int(x):,}")
        if d == 0:
            options.append(v + ".0")
        else:
            options.append(f"{x:.{d + 1}f}")
        return str(rng.choice(options))
    if kind == "date":
        try:
            ts = pd.Timestamp(v)
        except (ValueError, TypeError):
            return v
        if ISO_DATE.match(v):
            return ts.strftime(str(rng.choice(["%m/%d/%Y", "%d.%m.%Y", "%b %d %Y"])))
        return ts.strftime("%Y-%m-%d")
    options = [v.upper(), v.lower(), v.title(), " " + v, v + " "]
    options = [o for o in options if o != v]
    return str(rng.choice(options)) if options else v


# ---------------------------------------------------------------------------------------------- generators


def _columns(frame: pd.DataFrame, ignore: list[str], rng: np.random.Generator, share: float) -> list[str]:
    usable = [
        c
        for c in frame.columns
        if c not in ignore and (frame[c] != "").sum() >= 20 and frame[c].nunique() >= 2
    ]
    if not usable:
        return []
    k = max(1, round(share * len(usable)))
    return [usable[i] for i in sorted(rng.choice(len(usable), size=k, replace=False))]


def gen_iterate(
    frame: pd.DataFrame, ignore: list[str], rate: float, rng: np.random.Generator, log: list[Planted]
) -> pd.DataFrame:
    dirty = frame.copy()
    tokens = [
        t for t in frame.to_numpy().ravel().tolist() if t.strip().lower() in {"", "n/a", "na", "?", "-"}
    ]
    # The table's commonest missing token (ties: the first in order, whatever the hash seed).
    missing = max(sorted(set(tokens)), key=tokens.count) if tokens else ""
    for name in _columns(frame, ignore, rng, 1.0):
        values = frame[name].to_numpy(dtype=object)
        filled = np.flatnonzero(values != "")
        numeric = kind_of(values) == "number"
        chosen = rng.choice(filled, max(1, round(rate * filled.size)), replace=False)
        out = values.copy()
        for r in chosen:
            v = values[r]
            k = int(rng.integers(4))
            if k == 0:
                out[r] = typo(v, rng)
            elif k == 1:
                out[r] = missing
            elif k == 2:
                out[r] = other_value(values, filled, v, rng)
            elif numeric and NUMBER.match(v):
                x = float(v)
                y = x * 10 if rng.random() < 0.5 else x + (abs(x) + 1) * float(rng.choice([-3, 3]))
                out[r] = write_number(y, v)
            else:
                out[r] = stray_symbol(v, rng)
            log.append((int(r), name, ("typo", "missing", "swap", "noise" if numeric else "symbol")[k]))
        dirty[name] = out
    return dirty


def dependencies(frame: pd.DataFrame, ignore: list[str]) -> list[tuple[str, str]]:
    """Functional dependencies lhs → rhs that hold on at least 99.5% of the rows, lhs repeating (3+ rows per
    value on average: a dependency read off pairs of rows is chance as often as a rule) and rhs not
    constant."""
    out = []
    n = len(frame)
    cols = [c for c in frame.columns if frame[c].nunique() > 1]
    uniq = {c: frame[c].nunique() for c in cols}
    for lhs in cols:
        if uniq[lhs] > n / 3:
            continue
        for rhs in cols:
            if rhs == lhs or rhs in ignore or uniq[rhs] < 2 or uniq[rhs] > uniq[lhs]:
                continue
            top = frame.groupby(lhs, sort=False)[rhs].agg(lambda s: s.value_counts().iloc[0]).sum()
            if top >= 0.995 * n:
                out.append((lhs, rhs))
    return out


def gen_bart(
    frame: pd.DataFrame, ignore: list[str], rate: float, rng: np.random.Generator, log: list[Planted]
) -> pd.DataFrame:
    """Break the table's dependencies: each wrong cell is a dependent (rhs) value changed to another value of
    its domain (60%), a typo (25%) or a bogus value (15%). A table without dependencies is left as it is (and
    left out of the corpus)."""
    dirty = frame.copy()
    fds = dependencies(frame, ignore)
    targets = sorted({rhs for _, rhs in fds})
    for name in targets:
        values = frame[name].to_numpy(dtype=object)
        filled = np.flatnonzero(values != "")
        if filled.size < 2:
            continue
        chosen = rng.choice(filled, max(1, round(rate * filled.size)), replace=False)
        out = dirty[name].to_numpy(dtype=object)
        for r in chosen:
            v = values[r]
            u = rng.random()
            if u < 0.6:
                out[r] = other_value(values, filled, v, rng)
            elif u < 0.85:
                out[r] = typo(v, rng)
            else:
                out[r] = (
                    write_number(float(rng.integers(0, 10_000)), v)
                    if kind_of(values) == "number"
                    else "".join(rng.choice(list(string.ascii_lowercase), size=6))
                )
            log.append((int(r), name, "fd-swap" if u < 0.6 else "fd-typo" if u < 0.85 else "fd-bogus"))
        dirty[name] = out
    return dirty


def gen_rein(
    frame: pd.DataFrame, ignore: list[str], rate: float, rng: np.random.Generator, log: list[Planted]
) -> pd.DataFrame:
    """REIN / BigDaMa kinds, one or two per column, chosen by the column's kind."""
    aug = Augmenters(int(rng.integers(1 << 30)))
    dirty = frame.copy()
    for name in _columns(frame, ignore, rng, 0.6):
        values = frame[name].to_numpy(dtype=object)
        filled = np.flatnonzero(values != "")
        kind = kind_of(values)
        menu: list[str] = ["swap", "missing", "format"]
        if kind == "number":
            menu += ["gaussian", "scale", "gaussian"]
        elif kind == "text":
            menu += ["keyboard", "ocr", "keyboard"]
        else:
            menu += ["ocr"]
        kinds = list(rng.choice(menu, size=int(rng.integers(1, 3)), replace=False))
        chosen = rng.choice(filled, max(1, round(rate * filled.size)), replace=False)
        out = values.copy()
        present = set(values.tolist())
        hole = placeholder_for(kind, present, rng)
        numbers = (
            np.array([float(v) for v in values[filled] if NUMBER.match(v)]) if kind == "number" else None
        )
        spread = float(np.std(numbers)) if numbers is not None and numbers.size else 1.0
        factor = float(rng.choice([10.0, 100.0, 1000.0, 0.1, 0.01]))
        for r in chosen:
            v = values[r]
            k = str(rng.choice(kinds))
            if k == "swap":
                out[r] = other_value(values, filled, v, rng)
            elif k == "missing":
                out[r] = hole
            elif k == "format":
                out[r] = reformat(v, kind, rng)
            elif k in ("keyboard", "ocr"):
                out[r] = aug.apply(k, v)
                if out[r] == v:
                    out[r] = typo(v, rng)
            elif NUMBER.match(v):
                x = float(v)
                y = (
                    x + float(rng.normal(0, spread * float(rng.choice([0.5, 1.0, 2.0]))))
                    if k == "gaussian"
                    else x * factor
                )
                out[r] = write_number(y, v)
            else:
                out[r] = typo(v, rng)
                k = "typo"
            log.append((int(r), name, k))
        dirty[name] = out
    return dirty


GENERATE: dict[
    str, Callable[[pd.DataFrame, list[str], float, np.random.Generator, list[Planted]], pd.DataFrame]
] = {
    "iterate": gen_iterate,
    "bart": gen_bart,
    "rein": gen_rein,
}


def shuffled(frame: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame({c: frame[c].to_numpy()[rng.permutation(len(frame))] for c in frame.columns})


# ---------------------------------------------------------------------------------------------- bases


def read_text(path: Path) -> pd.DataFrame:
    """Every value as text, the way the benchmarks are read."""
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def read_staged(path: Path) -> pd.DataFrame:
    """A real-data table through the engine's reader (it knows each file's delimiter and encoding)."""
    from iterate.io import read_table

    frame = read_table(path, name=path.stem).to_pandas()
    seen: dict[str, int] = {}
    names = []
    for c in map(
        str, frame.columns
    ):  # a header that repeats a name gets it numbered (the generators use names)
        seen[c] = seen.get(c, 0) + 1
        names.append(c if seen[c] == 1 else f"{c} ({seen[c]})")
    frame.columns = names
    return frame.fillna("").astype(str)


def bases(max_rows: int) -> list[Base]:
    out = []
    for ds in sorted(p for p in STUDY.iterdir() if (p / "clean.csv").exists()):
        frame = read_text(ds / "clean.csv").head(max_rows)
        out.append(Base(f"{ds.name}-clean", ds.name, frame))
    for prefix, folder, reviewed in (("real", REALDATA, VERDICTS), ("shared", SHARED_REAL, VERDICTS_SHARED)):
        verdicts = tomllib.loads(reviewed.read_text()).get("tables", {}) if reviewed.exists() else {}
        for path in sorted(folder.glob("*.csv")):
            frame = read_staged(path).head(max_rows)
            if frame.shape[1] < 2 or len(frame) < 30:
                continue
            problems = sorted(verdicts.get(path.stem, {}).get("problems", {}))
            name = f"{prefix}-{path.stem}"
            out.append(Base(name, name, frame, [c for c in problems if c in frame]))
    return out


def merged_sources() -> Pair:
    """A table merged from 20 sources of varied accuracy that write times their own way (scripts/gen_sources.py,
    seed 4): the conflicting-sources kind, a group of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, str(REPO / "scripts" / "gen_sources.py"), tmp],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        dirty, clean = read_text(Path(tmp) / "dirty.csv"), read_text(Path(tmp) / "clean.csv")
    return Pair(
        "sources-sim",
        "sources-sim",
        "injected",
        dirty,
        clean,
        "sources",
        float((dirty != clean).to_numpy().mean()),
    )


def pairs(max_rows: int, seed: int) -> list[Pair]:
    out = [merged_sources()]
    for ds in sorted(p for p in STUDY.iterdir() if (p / "dirty.csv").exists()):
        out.append(Pair(ds.name, ds.name, "study", read_text(ds / "dirty.csv"), read_text(ds / "clean.csv")))
    for i, base in enumerate(bases(max_rows)):
        rng = np.random.default_rng([seed, i])
        out.append(Pair(f"{base.name}", base.group, "clean", base.frame, base.frame, ignore=base.ignore))
        out.append(
            Pair(
                f"{base.name}-shuffled",
                base.group,
                "shuffled",
                shuffled(base.frame, rng),
                None,
                ignore=base.ignore,
            )  # type: ignore[arg-type]
        )
        for gen in GENERATORS:
            rate = float(rng.choice(RATES))
            log: list[Planted] = []
            dirty = GENERATE[gen](base.frame, base.ignore, rate, rng, log)
            if not log:
                continue  # nothing this generator can break here (bart: no dependency)
            out.append(
                Pair(
                    f"{base.name}-{gen}",
                    base.group,
                    "injected",
                    dirty,
                    base.frame,
                    gen,
                    rate,
                    base.ignore,
                    log,
                )
            )
    return out


def write(pair: Pair, root: Path) -> None:
    target = root / pair.name
    target.mkdir(parents=True, exist_ok=True)
    clean = pair.clean if pair.clean is not None else pair.dirty
    pair.dirty.to_csv(target / "dirty.csv", index=False)
    clean.to_csv(target / "clean.csv", index=False)
    wrong = int((pair.dirty.to_numpy() != clean.to_numpy()).sum())
    meta = {
        "name": pair.name,
        "group": pair.group,
        "kind": pair.kind,
        "generator": pair.generator,
        "rate": pair.rate,
        "ignore": pair.ignore,
        "rows": len(pair.dirty),
        "columns": int(pair.dirty.shape[1]),
        "wrong_cells": wrong,
    }
    (target / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    if pair.planted:
        # What each planted error was (the last one planted in a cell wins): for the per-kind diagnostics.
        differs = pair.dirty.to_numpy() != clean.to_numpy()
        at = {c: j for j, c in enumerate(pair.dirty.columns)}
        kinds = {(r, c): k for r, c, k in pair.planted if differs[r, at[c]]}
        pd.DataFrame(
            [(r, c, k) for (r, c), k in sorted(kinds.items())], columns=["row", "column", "kind"]
        ).to_csv(target / "planted.csv", index=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--max-rows", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    if not REALDATA.exists():
        print("corpus: the real-data corpus is not staged: run `make realdata-stage`", file=sys.stderr)
        return 1
    made = pairs(args.max_rows, args.seed)
    for pair in made:
        write(pair, args.out)
    kinds: dict[str, int] = {}
    for p in made:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    print(
        f"corpus: {len(made)} tables in {args.out} ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
