"""The profile's statistics computed in a forked process while the caller runs the detectors.

Threads could not overlap the two: both hold the GIL for much of their per-column work. A forked child
shares the table's memory copy-on-write, computes exactly what `profile_table` would, and sends the profile
back through a pipe. If the child cannot be started or fails, the caller computes the profile itself, so the
result never depends on where it was computed.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from multiprocessing.connection import Connection

from iterate.contracts.profile import DatasetProfile
from iterate.profile.dataset import profile_table
from iterate.table import Table

logger = logging.getLogger(__name__)

# A long table's own profile already spreads its columns over threads whose kernels release the GIL, and
# holding the detectors' and the profile's working memory at once would raise the run's peak. The child
# pays where the cost is per column, not per cell: tables of at most this many rows.
MAX_ROWS = 100_000
# The child was forked while other threads ran (the sandbox loading its data): one of them may have held a
# lock the child then waits on forever. A child not done this long after the caller asks, and at least as long
# again as the caller worked meanwhile, is stopped and the profile computed in-process.
MIN_WAIT_S = 60.0


class BackgroundProfile:
    """`profile_table(table, null_marker=...)`, started now and collected by `result()`."""

    def __init__(self, table: Table, null_marker: str) -> None:
        self._table = table
        self._null_marker = null_marker
        self._received: list[DatasetProfile] = []
        self._process: multiprocessing.process.BaseProcess | None = None
        self._reader: threading.Thread | None = None
        self._started = time.perf_counter()
        if not _can_fork(table):
            return
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        try:
            self._process = context.Process(
                target=_child, args=(table, null_marker, send), name="iterate-profile", daemon=True
            )
            self._process.start()
        except OSError as exc:  # no fork (e.g. out of processes): computed in the caller
            logger.info("profile computed in-process: %s", exc)
            self._process = None
            receive.close()
            return
        finally:
            send.close()
        # The pipe is drained while the caller works, so a large profile never blocks the child on a full pipe.
        self._reader = threading.Thread(target=self._receive, args=(receive,), daemon=True)
        self._reader.start()

    @property
    def forked(self) -> bool:
        """Whether a child computes the profile; if not, `result()` computes it in the caller."""
        return self._process is not None

    def _receive(self, receive: Connection) -> None:
        try:
            self._received.append(receive.recv())
        except (EOFError, OSError):  # the child died before sending: result() computes it here
            pass
        finally:
            receive.close()

    def result(self, wait_s: float | None = None) -> DatasetProfile:
        """The profile; `wait_s`: how long to wait for the child (default: see MIN_WAIT_S)."""
        if self._process is not None and self._reader is not None:
            if wait_s is None:
                wait_s = max(MIN_WAIT_S, time.perf_counter() - self._started)
            self._reader.join(wait_s)
            if self._reader.is_alive():
                logger.warning(
                    "profile child gave no answer in %.0f s: stopped, computing in-process", wait_s
                )
                self._process.kill()
            self._process.join()
            if self._received and self._process.exitcode == 0:
                return self._received[0]
            logger.warning("profile child ended with code %s: computing in-process", self._process.exitcode)
        return profile_table(self._table, null_marker=self._null_marker)


def _can_fork(table: Table) -> bool:
    return (
        table.n_rows <= MAX_ROWS
        and (os.cpu_count() or 1) > 1
        and "fork" in multiprocessing.get_all_start_methods()
    )


def _child(table: Table, null_marker: str, send: Connection) -> None:
    try:
        send.send(profile_table(table, null_marker=null_marker))
    except Exception:  # the caller computes it again and raises the error where it can be reported
        raise SystemExit(1) from None
    finally:
        send.close()
