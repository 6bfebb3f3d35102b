"""What `iterate analyze` says about files it reads differently from their name, or cannot read at all."""

from __future__ import annotations

import ast
import gzip
import subprocess
import sys
import zipfile
from pathlib import Path

import openpyxl
import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def iterate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iterate", *args], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def workbook(path: Path) -> Path:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["id", "city"])
    for n, city in enumerate(["Paris", "Lyon", "Paris", "Nice"]):
        sheet.append([n, city])
    book.save(path)
    return path


def test_an_xlsx_named_xls_is_read_as_the_workbook_it_is(tmp_path):
    # Given an .xlsx workbook saved under an .xls name (what "Save as" in some tools does)
    data = workbook(tmp_path / "cities.xls")
    # When it is analyzed
    done = iterate("analyze", str(data), "--out", str(tmp_path / "out"), cwd=tmp_path)
    # Then it is read by its content: 4 rows, exit 0 (it was "unexpected InvalidFileException", exit 1)
    assert done.returncode == 0, done.stderr
    assert "4 rows × 2 columns" in done.stdout


def _zip(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("orders.csv", "a,b\n1,2\n")
    return path


def _bytes(data: bytes):
    def write(path: Path) -> Path:
        path.write_bytes(data)
        return path

    return write


BAD = {
    "empty.csv": _bytes(b""),
    "image.csv": _bytes(b"\x89PNG\r\n\x1a\n" + bytes(200)),
    "orders.zip": _zip,
    "cut.csv.gz": _bytes(
        gzip.compress(b"a,b\n" + b"".join(b"%d,%d\n" % (i, i * 7919 % 10007) for i in range(5000)))[:2000]
    ),
    "quote.csv": _bytes(b'a,b\n1,"open\n2,3\n'),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_unreadable_files_get_advice_that_fits_a_laptop(tmp_path, name):
    # Given a file that cannot be read, analyzed on a laptop (where nothing is uploaded)
    data = BAD[name](tmp_path / name)
    # When it is analyzed
    done = iterate("analyze", str(data), "--out", str(tmp_path / "out"), cwd=tmp_path)
    # Then one line, exit 2, naming the file, and no advice to upload anything
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and name in done.stderr
    assert "upload" not in done.stderr.lower()


def test_no_reader_message_speaks_of_uploading():
    # The same messages reach the API's users (who did upload) and the command's (who did not): every string
    # the readers can raise is worded for both. Catches the messages no file above provokes.
    found = []
    for source in sorted((REPO / "layers" / "iterate" / "io").glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and "upload" in node.value.lower()
            ):
                found.append(f"{source.name}:{node.lineno}: {node.value[:60]}")
    assert found == []
