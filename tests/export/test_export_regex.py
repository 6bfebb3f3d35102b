"""Regexes written once (Python flavour) and translated for RE2 (DuckDB) and Java (Glue)."""

from __future__ import annotations

import re

from iterate.export import regex as rx


def test_flavours_spell_unicode_classes_and_the_end_anchor_per_engine() -> None:
    shape = rx.from_shape("a-9")
    assert re.fullmatch(rx.flavour(shape, "python"), "Éa-12")
    assert not re.search(rx.flavour(shape, "python"), "ab-12\n")  # `$` would let a trailing newline through
    assert rx.flavour(shape, "re2") == r"^\p{L}+\-\p{Nd}+\z"
    assert rx.flavour(shape, "java") == r"^\p{L}+\-\p{Nd}+\z"
    assert rx.flavour(r"a\\d$", "re2") == r"a\\d\z"  # an escaped backslash is not a digit class
    assert rx.flavour(r"[\u0080-\u00bf]", "re2") == r"[\x{0080}-\x{00bf}]"
    assert rx.flavour(r"[\u0080-\u00bf]", "java") == r"[\u0080-\u00bf]"


def test_strftime_formats_become_date_shapes() -> None:
    assert rx.from_strftime("%Y-%m-%d") == r"^\d{4}\-\d{2}\-\d{2}$"
    assert re.fullmatch(rx.from_strftime("%d/%m/%Y %H:%M") or "", "05/11/2026 13:45")
    assert rx.from_strftime("%Q") is None


def test_numbers_and_trimmed_text() -> None:
    assert [bool(re.fullmatch(rx.DECIMAL, v)) for v in ("1", "-2.5", ".5", "1e3", "$1", "1,5", "")] == [
        True, True, True, True, False, False, False,
    ]  # fmt: skip
    assert [bool(re.fullmatch(rx.TRIMMED, v)) for v in ("a", "a b", " a", "a ", "a\n")] == [
        True, True, False, False, False,
    ]  # fmt: skip
