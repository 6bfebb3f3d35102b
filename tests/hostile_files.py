"""Hostile input files, built in a test's tmp_path in well under a second each (no bomb is ever inflated).

Importable from any test (pytest puts tests/ on sys.path for the root conftest). Each builder writes one
file and returns its path; what the file would become if a reader trusted it is in the docstring.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import resource
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

MIB = 1 << 20
GIB = 1 << 30


@dataclass(frozen=True)
class Capped:
    """How a command run under a memory cap ended: exit code, output, wall time, peak memory."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_mb: float


def run_capped(
    argv: list[str], *, memory_gib: float = 4, timeout: float = 60, env: dict[str, str] | None = None
) -> Capped:
    """Run `argv` with its address space capped (RLIMIT_AS, soft: a regression fails the test with a
    MemoryError instead of taking the machine down) and killed, with every process it started, after
    `timeout` seconds. The peak resident memory comes from wait4 on that very process; Linux carries the
    forking process's high-water mark across execve into it, so it is at least this test process's memory at
    the fork (a pytest worker's hundreds of MB): a tight bound is measured by the command itself (VmHWM, as
    test_io_hostile_files' reader does)."""
    cap = int(memory_gib * GIB)

    def limit() -> None:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))

    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        preexec_fn=limit,
        start_new_session=True,
    )
    streams: dict[str, bytes] = {}

    def drain(name: str, pipe: io.BufferedReader) -> None:
        streams[name] = pipe.read()

    readers = [
        threading.Thread(target=drain, args=(name, pipe), daemon=True)
        for name, pipe in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for reader in readers:
        reader.start()
    status, usage = None, None
    while status is None:
        pid, raw, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            status, usage = raw, rusage
        elif time.perf_counter() - started > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            proc.returncode = -9
            raise AssertionError(f"{argv[-1]!r} still running after {timeout:.0f} s: killed")
        else:
            time.sleep(0.02)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    with contextlib.suppress(ProcessLookupError):  # what it left behind must not hold the pipes open
        os.killpg(proc.pid, signal.SIGKILL)
    for reader in readers:
        reader.join(timeout=10)
    return Capped(
        returncode=proc.returncode,
        stdout=streams.get("out", b"").decode("utf-8", "replace"),
        stderr=streams.get("err", b"").decode("utf-8", "replace"),
        seconds=seconds,
        max_rss_mb=usage.ru_maxrss / 1024 if usage is not None else 0.0,
    )


def iterate_cli(*args: str) -> list[str]:
    """The argv of the `iterate` command with this interpreter."""
    return [sys.executable, "-m", "iterate", *args]


def gzip_bomb(path: Path, *, gib: int = 8) -> Path:
    """A valid multi-member gzip CSV of `gib` GiB ("1,2" rows) in about 8 MB per 8 GiB (ratio ~1000).

    One 64 MiB member is compressed once (~0.3 s) and repeated: `gzip -d` accepts concatenated members.
    """
    return compressed_bomb(path, "gzip", gib=gib)


def compressed_bomb(path: Path, compression: str, *, gib: int = 8) -> Path:
    """A valid multi-member (gzip) or multi-stream (bzip2, xz) CSV bomb of `gib` GiB: one 64 MiB unit,
    compressed once (0.3-0.8 s), repeated; each decompressor's own tool accepts the concatenation."""
    import bz2
    import lzma

    pack = {"gzip": lambda b: gzip.compress(b, 9), "bz2": lambda b: bz2.compress(b, 9), "xz": lzma.compress}
    header = pack[compression](b"id,value\n")
    # bzip2's sort is slow on short periods (20 s for "1,2\n" rows) and fast on one repeated byte
    rows = b"0" * (64 * MIB) if compression == "bz2" else b"1,2\n" * (16 * MIB)
    unit = pack[compression](rows)  # 64 MiB each
    with path.open("wb") as fh:
        fh.write(header)
        for _ in range(gib * 16):
            fh.write(unit)
    return path


def wide_csv(path: Path, *, columns: int, rows: int) -> Path:
    """A `columns` × `rows` CSV of small distinct values."""
    header = ",".join(f"c{j}" for j in range(columns))
    body = "\n".join(",".join(str((i * 7 + j) % 97) for j in range(columns)) for i in range(rows))
    path.write_text(header + "\n" + body + "\n", encoding="utf-8")
    return path


def big_cell_csv(path: Path, *, cell_bytes: int) -> Path:
    """A valid CSV whose second data row holds one value of `cell_bytes` bytes (on line 3)."""
    with path.open("wb") as fh:
        fh.write(b"id,blob,note\n1,small,a\n2,")
        block = b"x" * (8 * MIB)
        left = cell_bytes
        while left > 0:
            fh.write(block[: min(left, len(block))])
            left -= len(block)
        fh.write(b",b\n3,small,c\n")
    return path


def deep_json(path: Path, *, depth: int, as_array: bool = False) -> Path:
    """JSON Lines (or a JSON array) whose second record nests objects `depth` levels deep."""
    nested = '{"a": ' * (depth - 1) + "1" + "}" * (depth - 1)
    records = ['{"id": 1, "v": "x"}', '{"id": 2, "v": ' + nested + "}", '{"id": 3, "v": "y"}']
    text = "[" + ",\n".join(records) + "]\n" if as_array else "\n".join(records) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def fifo(path: Path) -> Path:
    """A named pipe nobody writes to: opening it for reading blocks forever."""
    os.mkfifo(path)
    return path


def unix_socket(path: Path) -> tuple[Path, socket.socket]:
    """A bound Unix socket file; the caller closes the socket."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    return path, sock


# ---- .xlsx ----------------------------------------------------------------------------------------------

_SHEET_NS = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
SHEET = "xl/worksheets/sheet1.xml"


def _template(sheets: int = 1) -> dict[str, bytes]:
    """The members of a minimal valid workbook written by openpyxl, by name (sheetN.xml for N sheets)."""
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.active.append(["id", "value"])
    workbook.active.append([1, 2])
    for n in range(2, sheets + 1):
        workbook.create_sheet(f"Sheet{n}").append(["x"])
    buffer = io.BytesIO()
    workbook.save(buffer)
    with zipfile.ZipFile(buffer) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def xlsx(path: Path, *, sheets: int = 1, **replace: bytes) -> Path:
    """A workbook whose members named in `replace` (keys with / as __, e.g. xl__worksheets__sheet1_xml)
    have the given content, compressed normally."""
    members = _template(sheets)
    for key, data in replace.items():
        members[key.replace("__", "/").replace("_xml", ".xml")] = data
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def xlsx_dimension_bomb(path: Path, *, rows: int = 200_000, column: str = "XFD") -> Path:
    """A sheet of a few MB compressed that declares A1:XFD1048576 and puts one cell in `column` of every
    row: read as a grid, `rows` × 16,384 cells (200,000 rows: 3.3 billion cells, ~26 GB of pointers)."""
    body = b"".join(
        b'<row r="%d"><c r="%s%d"><v>1</v></c></row>' % (i, column.encode(), i) for i in range(2, rows)
    )
    sheet = (
        (
            f'<?xml version="1.0" encoding="UTF-8"?><worksheet {_SHEET_NS}>'
            '<dimension ref="A1:XFD1048576"/><sheetData>'
            '<row r="1"><c r="A1" t="inlineStr"><is><t>id</t></is></c></row>'
        ).encode()
        + body
        + b"</sheetData></worksheet>"
    )
    return xlsx(path, xl__worksheets__sheet1_xml=sheet)


def xlsx_entity_bomb(path: Path, *, member: str = SHEET) -> Path:
    """ "Billion laughs": ten entities of ten references each expand to 10^9 copies of "lol" (3 GB)."""
    entities = '<!ENTITY lol0 "lol">' + "".join(
        f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10)
    )
    sheet = (
        f'<?xml version="1.0" encoding="UTF-8"?><!DOCTYPE worksheet [{entities}]>'
        f'<worksheet {_SHEET_NS}><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>&lol9;</t></is></c>'
        "</row></sheetData></worksheet>"
    ).encode()
    members = _template()
    members[member] = sheet if member == SHEET else _with_doctype(members[member], entities)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _with_doctype(xml: bytes, entities: str) -> bytes:
    """`xml` with a DTD of `entities` and one reference to the largest in its root element's text."""
    declaration, rest = xml.split(b"?>", 1) if xml.startswith(b"<?xml") else (b'<?xml version="1.0"', xml)
    root = rest.lstrip()[1:].split(b" ", 1)[0].split(b">", 1)[0].decode()
    # the reference goes right after the root's start tag, as text content
    start = rest.index(b">") + 1
    return (
        declaration
        + b"?>"
        + f"<!DOCTYPE {root} [{entities}]>".encode()
        + rest[:start]
        + b"&lol9;"
        + rest[start:]
    )


def xlsx_deflate_bomb(path: Path, *, gib: int = 3, forged_size: int | None = None) -> Path:
    """A workbook whose sheet inflates to `gib` GiB of blank space inside <sheetData> (~3 MB on disk).

    The deflate stream is one 1 MiB block of spaces, compressed once after a full flush and repeated (a
    full flush makes every block independent). The member declares its true size, or `forged_size`
    (zipfile then stops inflating there). Its CRC is left 0: nothing may ever read that far.
    """
    prefix = (
        f'<?xml version="1.0" encoding="UTF-8"?><worksheet {_SHEET_NS}><sheetData>'
        '<row r="1"><c r="A1" t="inlineStr"><is><t>id</t></is></c></row>'
    ).encode()
    suffix = b"</sheetData></worksheet>"
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = packer.compress(prefix) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(b" " * MIB) + packer.flush(zlib.Z_FULL_FLUSH)
    tail = packer.compress(suffix) + packer.flush(zlib.Z_FINISH)
    count = gib * 1024
    size = len(prefix) + count * MIB + len(suffix)
    members = [
        (name, 8, zlib.compress(data)[2:-4], zlib.crc32(data), len(data))
        for name, data in _template().items()
        if name != SHEET
    ]
    stream = head + block * count + tail
    members.append((SHEET, 8, stream, 0, forged_size if forged_size is not None else size))
    _write_zip(path, members)
    return path


def _write_zip(path: Path, members: list[tuple[str, int, bytes, int, int]]) -> None:
    """A zip from (name, method, raw member data, crc, declared size), written by hand so that sizes and
    data need not agree (sizes up to 4 GiB: no zip64)."""
    local = io.BytesIO()
    central = io.BytesIO()
    for name, method, data, crc, size in members:
        raw = name.encode()
        offset = local.tell()
        local.write(
            struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0x21, crc, len(data), size, len(raw), 0)
        )
        local.write(raw)
        local.write(data)
        central.write(
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                method,
                0,
                0x21,
                crc,
                len(data),
                size,
                len(raw),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
        )
        central.write(raw)
    directory = central.getvalue()
    end = struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), local.tell(), 0
    )
    path.write_bytes(local.getvalue() + directory + end)
