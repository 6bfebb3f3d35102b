"""Format, compression and encoding sniffing: magic bytes and BOMs first, the file extension second."""

from __future__ import annotations

import codecs
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from iterate.io.errors import DatasetReadError

HEAD_BYTES = 64 * 1024

# Bytes that cp1252 leaves undefined: a file containing them can only be latin-1.
CP1252_UNDEFINED = b"\x81\x8d\x8f\x90\x9d"

_BOMS: list[tuple[bytes, str]] = [
    # UTF-32 first: its little-endian BOM starts with the UTF-16 one.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
]

_COMPRESSIONS: list[tuple[bytes, str]] = [
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
]

# Files people give by mistake; the hint says what to do instead. Magics are long enough (or binary
# enough) that no text header starts with one; other binaries are caught by their NUL/control bytes.
_NOT_TABLES: list[tuple[bytes, str, str]] = [
    (
        b"\x89PNG",
        "is a PNG image, not a text table",
        "save the data as CSV, TSV, Parquet, JSON Lines or .xlsx",
    ),
    (
        b"\xff\xd8\xff",
        "is a JPEG image, not a text table",
        "save the data as CSV, TSV, Parquet, JSON Lines or .xlsx",
    ),
    (
        b"GIF87a",
        "is a GIF image, not a text table",
        "save the data as CSV, TSV, Parquet, JSON Lines or .xlsx",
    ),
    (
        b"GIF89a",
        "is a GIF image, not a text table",
        "save the data as CSV, TSV, Parquet, JSON Lines or .xlsx",
    ),
    (b"%PDF-", "is a PDF document, not a text table", "export the table from its source as CSV or .xlsx"),
    (b"SQLite format 3\x00", "is an SQLite database, not a text table", "export the table you want as CSV"),
    (b"7z\xbc\xaf\x27\x1c", "is a 7-Zip archive, not a text table", "extract it and analyze the file inside"),
    (b"Rar!\x1a\x07", "is a RAR archive, not a text table", "extract it and analyze the file inside"),
    (b"\x7fELF", "is a program, not a text table", "analyze the data file instead"),
]

_BZIP2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")
_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

SUPPORTED = "CSV, TSV, Parquet, JSON Lines or .xlsx"

# Extensions we know and cannot read, with what to do about each.
_UNSUPPORTED_EXTENSIONS: dict[str, str] = {
    ".xls": "open it in Excel or LibreOffice and save it as .xlsx or CSV",
    ".xlsb": "open it in Excel and save it as .xlsx or CSV",
    ".ods": "open it in LibreOffice and save it as .xlsx or CSV",
    ".numbers": "export it from Numbers as CSV or .xlsx",
    ".sav": "export it from SPSS as CSV",
    ".dta": "export it from Stata as CSV",
    ".sas7bdat": "export it from SAS as CSV",
    ".avro": "convert it to Parquet or CSV",
    ".orc": "convert it to Parquet or CSV",
    ".h5": "export the table as Parquet or CSV",
    ".hdf5": "export the table as Parquet or CSV",
    ".pkl": "save the DataFrame with df.to_parquet() or df.to_csv()",
    ".pickle": "save the DataFrame with df.to_parquet() or df.to_csv()",
    ".docx": "copy the table into a spreadsheet and save it as .xlsx or CSV",
    ".zip": "extract it and analyze the file inside",
}


@dataclass(frozen=True)
class Detected:
    """What the first bytes say: a container format, or text with its encoding."""

    format: str  # "parquet" | "xlsx" | "text"
    compression: str | None = None
    encoding: str | None = None  # Python codec name for text


def read_head(path: Path, n: int = HEAD_BYTES) -> bytes:
    with path.open("rb") as fh:
        return fh.read(n)


def _ends_with(path: Path, magic: bytes) -> bool:
    with path.open("rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - len(magic)))
        return fh.read() == magic


def sniff_compression(head: bytes) -> str | None:
    # bzip2 starts with the letters "BZh": check the block-size digit and block magic too.
    if _BZIP2.match(head):
        return "bz2"
    for magic, name in _COMPRESSIONS:
        if head.startswith(magic):
            return name
    return None


def sniff_container(path: Path, head: bytes) -> str | None:
    """'parquet' / 'xlsx' from magic bytes, an error for binary formats we cannot read, else None."""
    # "PAR1" is also four letters a CSV header could start with; Parquet follows it with binary pages.
    if head.startswith(b"PAR1") and (b"\x00" in head[:4096] or _ends_with(path, b"PAR1")):
        return "parquet"
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _sniff_zip(path)
    if head.startswith(_OLE2):
        raise DatasetReadError(
            path,
            "is a legacy Excel 97-2003 workbook (.xls) or a password-protected file, which cannot be read",
            "open it in Excel or LibreOffice and save it as .xlsx (without a password) or CSV",
        )
    for magic, problem, hint in _NOT_TABLES:
        if head.startswith(magic):
            raise DatasetReadError(path, problem, hint)
    return None


def _sniff_zip(path: Path) -> str:
    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise DatasetReadError(
            path,
            f"is a damaged or truncated zip/.xlsx file ({exc})",
            "re-save the workbook, or get the complete file if it was cut off",
        ) from exc
    if "xl/workbook.xml" in names:
        return "xlsx"
    if "content.xml" in names:
        raise DatasetReadError(path, "is an OpenDocument spreadsheet (.ods)", _UNSUPPORTED_EXTENSIONS[".ods"])
    if "word/document.xml" in names:
        raise DatasetReadError(path, "is a Word document, not a table", _UNSUPPORTED_EXTENSIONS[".docx"])
    raise DatasetReadError(path, "is a zip archive, not a table file", _UNSUPPORTED_EXTENSIONS[".zip"])


def unsupported_extension(path: Path) -> None:
    """Refuse known unreadable extensions once the content did not prove to be something we read."""
    suffix = path.suffix.lower()
    if suffix in _UNSUPPORTED_EXTENSIONS:
        raise DatasetReadError(
            path, f"has the unsupported extension '{suffix}'", _UNSUPPORTED_EXTENSIONS[suffix]
        )


def sniff_text_encoding(head: bytes) -> str:
    """The codec of a text head: BOM, BOM-less UTF-16, UTF-8, else cp1252 (or latin-1 if cp1252 cannot fit)."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    utf16 = _bomless_utf16(head)
    if utf16:
        return utf16
    try:
        # final=False: the head may end in the middle of a multi-byte character.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        return "utf-8"
    except UnicodeDecodeError:
        return legacy_encoding(head)


def legacy_encoding(data: bytes) -> str:
    """cp1252 when every byte is defined there (the usual Windows export), else latin-1 (any byte fits)."""
    return "latin-1" if any(b in data for b in CP1252_UNDEFINED) else "cp1252"


def _bomless_utf16(head: bytes) -> str | None:
    sample = head[:4096]
    if len(sample) < 8:
        return None
    even, odd = sample[0::2], sample[1::2]
    # ASCII text in UTF-16 has a NUL in every other byte: LE puts it second, BE first.
    if odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.05 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.4 * len(even) and odd.count(0) < 0.05 * len(odd):
        return "utf-16-be"
    return None


def check_text(path: Path, text: str, *, encoding: str) -> None:
    """Refuse heads that decode but are not text: NUL characters or many control characters."""
    nul = text.find("\x00")
    if nul >= 0:
        raise DatasetReadError(
            path,
            "contains NUL bytes, so it is not a text table (it is binary, or its encoding was not recognised)",
            f"save the data as {SUPPORTED}, in UTF-8",
            line=text.count("\n", 0, nul) + 1,
        )
    if not text:
        return
    controls = sum(1 for ch in text if ch < " " and ch not in "\t\r\n\f\v") + text.count("\ufffd")
    if controls > max(3, 0.01 * len(text)):
        raise DatasetReadError(
            path,
            f"is not a text table ({controls} control characters in its first {len(text)} characters"
            f" read as {encoding})",
            f"save the data as {SUPPORTED}",
        )
