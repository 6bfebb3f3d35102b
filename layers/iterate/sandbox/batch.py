"""A batch of template proofs in one run: each code's items in a process of its own, forked from the runner.

A template is its head (imports and the PARAMS line) and a body that the batch's other items of the same
template share: the body is compiled once per batch, and its items run in one child process, apart from
every other code's. The runner itself runs no investigation code.
"""

import contextlib
import json
import os
import re
import time

from .confine.kernel import PR_SET_DUMPABLE, exit_code
from .frames import select_columns
from .inprocess import CODE_NAME
from .runcode import CappedWriter, run_code

# Code that begins with import lines and then `PARAMS = json.loads('<one string literal>')` on a line of its
# own: the engine's templates, hundreds per run on a wide table, differ in nothing else. The static policy
# (policy.check_policy) and a batch's compiler (compile_batch_item) read it with this one pattern.
PARAMS_HEAD = re.compile(
    r"(?P<head>(?:(?:import [A-Za-z_.]+(?: as [A-Za-z_]+)?)?\n)*PARAMS = json\.loads\()"
    r"(?P<literal>'(?:[^'\\\n]|\\.)*')\)\n"
)


_BODIES: dict = {}  # compile_batch_item's compiled bodies, by their text


def compile_batch_item(code: str) -> tuple:
    """`code` compiled as the code objects that, run in turn in one namespace, do what `code` does.

    A template (PARAMS_HEAD) is its head (imports and the PARAMS line) and a body that a batch's other items
    of the same template share: the body is compiled once per batch, not once per item. It is compiled with
    the head's lines blank and a `pass` on the PARAMS line, so its line numbers are the code's own and its
    first statement is never a docstring or a `__future__` import that would only be one after the split.
    """
    found = PARAMS_HEAD.match(code)
    if found is None:
        return (compile(code, CODE_NAME, "exec"),)
    head = code[: found.end()]
    lines = head.count("\n")
    body = "\n" * (lines - 1) + "pass\n" + code[found.end() :]
    compiled = _BODIES.get(body)
    if compiled is None:
        if len(_BODIES) >= 64:  # a warm Lambda sandbox serves many batches: the cache stays small
            _BODIES.clear()
        compiled = _BODIES[body] = compile(body, CODE_NAME, "exec")
    return (compile(head, CODE_NAME, "exec"), compiled)


def prepare_item(item: dict, base, narrowed: bool, narrowable: bool):  # type: ignore[no-untyped-def]
    """(compiled code, its frame) for one batch item, or its verdict when it cannot run in this batch.

    The frame is what a single run with the item's columns gets: picked from the whole table as a
    preloaded run would; from the batch's columns (`narrowed`) only when a single run would narrow too.
    """
    wanted = item.get("columns")
    try:
        code = compile_batch_item(item["code"])
    except SyntaxError as exc:
        return {"error": f"SyntaxError: {exc.msg} (line {exc.lineno})", "stopped": "error"}
    if not narrowed:
        return code, select_columns(base, narrowable, wanted)
    if wanted is None or not set(wanted) & set(base.columns):
        # Alone it would see the whole table, which this batch did not load.
        return {
            "error": "not run: its columns are not among the batch's",
            "stopped": "crash",
            "skipped": True,
        }
    return code, select_columns(base, True, wanted)


def run_batch(prepared: list, violations: list[str], cap: int, *, arm=None, apart: bool = True) -> dict:  # type: ignore[no-untyped-def]
    """Each item in its own namespace (its own `df` object, `result`, builtins and stdout); one item's
    failure is its own. A refusal ends the batch: the host then discards it whole (and runs each alone).

    `apart`: the items of one code (a template's body with its own PARAMS each) run in a process of
    their own, forked from this one, which runs no investigation code itself: no code can change what
    another code computes or reports (the interpreter, the frame, the modules are each process's own
    copy). Within one code's process an item can only meet what that same code did. Without new
    processes, every item shares this one.
    """
    if apart:
        return _run_apart(prepared, violations, cap, arm)
    if arm is not None:
        arm()
    items: list[dict] = []
    for k, entry in enumerate(prepared):
        prepared[k] = None  # an item's namespace (and what it cached) goes once it has run
        if isinstance(entry, dict):
            items.append({"success": False, "output": None, **entry})
            continue
        items.append(_run_item(entry, cap))
        del entry
        if violations:
            return _refused(items, violations)
    return {"success": True, "output": {"items": items}}


def _run_item(entry: tuple, cap: int) -> dict:
    """One prepared item (its compiled code and namespace): its verdict, timed."""
    began = time.perf_counter()
    item: dict = {"success": False, "output": None, "error": None, "stopped": None}
    code, user_globals = entry
    item.update(run_code(code, user_globals, CappedWriter(cap), cap))
    item["elapsed_ms"] = (time.perf_counter() - began) * 1000
    return item


def _refused(items: list[dict], violations: list[str]) -> dict:
    """The batch's verdict once an item was refused: the last item carries the refusal."""
    error = "; ".join(violations[:5])
    items[-1].update(success=False, output=None, stopped="policy", error=error)
    return {"success": False, "output": None, "stopped": "policy", "error": error, "items": items}


PROCESSES_AT_ONCE = 2  # code processes in flight: a second core tears one down while another runs


def _run_apart(prepared: list, violations: list[str], cap: int, arm) -> dict:  # type: ignore[no-untyped-def]
    """The batch with each code's items in a child process of their own, up to PROCESSES_AT_ONCE at a time.

    A child keeps only a pipe of its own (the run's report pipe and control socket are closed in it
    first), sends one length-prefixed JSON message (its items' verdicts and its in-process refusals: its
    copy of `violations`) and exits. Anything else (a signal, an exit without a message, a malformed
    one) fails that child's items alone. This process is made non-dumpable first: no child can open its
    memory.
    """
    import ctypes
    import select

    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    limit = cap * 2 * len(prepared) + 65536
    at_once = min(PROCESSES_AT_ONCE, max(1, len(os.sched_getaffinity(0))))
    results: list[dict | None] = [None] * len(prepared)
    groups: dict[int, list[int]] = {}  # the compiled body (compile_batch_item shares it) -> items
    for k, entry in enumerate(prepared):
        if isinstance(entry, dict):
            results[k] = {"success": False, "output": None, **entry}
        else:
            groups.setdefault(id(entry[0][-1]), []).append(k)
    waiting = list(groups.values())[::-1]
    running: dict[int, tuple[list[int], int, bytearray]] = {}  # read end -> (items, pid, received)
    refused = False
    while running or (waiting and not refused):
        while waiting and not refused and len(running) < at_once:
            members = waiting.pop()
            entries = [prepared[k] for k in members]
            for k in members:
                prepared[k] = None
            fd, pid = _start_process(entries, arm, cap, violations)
            del entries
            running[fd] = (members, pid, bytearray())
        for fd in select.select(list(running), [], [])[0]:
            members, pid, received = running[fd]
            chunk = os.read(fd, 65536)
            received += chunk
            size = int.from_bytes(received[:8], "big") if len(received) >= 8 else None
            if chunk and len(received) <= limit and (size is None or len(received) < 8 + size):
                continue
            os.close(fd)
            del running[fd]
            verdicts, seen = _process_message(pid, received, len(members))
            for k, verdict in zip(members, verdicts, strict=True):
                results[k] = {"success": False, "output": None, "error": None, "stopped": None, **verdict}
            if seen:
                violations.extend(seen)
                refused = True
        with contextlib.suppress(ChildProcessError):  # children that sent their verdicts and have exited
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
    done = [r for r in results if r is not None]
    if refused:
        return _refused(done, violations)
    return {"success": True, "output": {"items": done}}


def _start_process(entries: list, arm, cap: int, violations: list[str]) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Fork the child that runs `entries` (one code's items) in turn: (the read end of its pipe, its pid)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.closerange(3, write_end)  # close_range(2): one call, not one per descriptor
            os.closerange(write_end + 1, 1024)
            if arm is not None:
                arm()
            verdicts = []
            for k, entry in enumerate(entries):
                entries[k] = None
                verdicts.append(_run_item(entry, cap))
                del entry
                if violations:
                    break
            message = {"verdicts": verdicts, "violations": [str(v) for v in violations[:20]]}
            data = json.dumps(message).encode()
            view = memoryview(len(data).to_bytes(8, "big") + data)
            while view:
                view = view[os.write(write_end, view) :]
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    return read_end, pid


def _process_message(pid: int, received: bytes | bytearray, count: int) -> tuple[list[dict], list[str]]:
    """(one verdict per item, in-process refusals) from what a child sent; every item failed if it sent
    nothing usable. A child stopped by a refusal sends fewer verdicts: its other items were not run."""
    message = None
    size = int.from_bytes(received[:8], "big") if len(received) >= 8 else 0
    if size and len(received) == 8 + size:
        with contextlib.suppress(ValueError):
            message = json.loads(bytes(received[8:]))
    verdicts = message.get("verdicts") if isinstance(message, dict) else None
    ok = (
        isinstance(verdicts, list)
        and 0 < len(verdicts) <= count
        and all(isinstance(v, dict) for v in verdicts)
    )
    if not ok or verdicts is None:
        _, status = os.waitpid(pid, 0)
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"status {exit_code(status)}"
        failed = {"error": f"the item's process ended without a verdict ({how})", "stopped": "crash"}
        return [dict(failed) for _ in range(count)], []
    seen = [str(v) for v in message.get("violations") or []][:20]  # type: ignore[union-attr]
    skipped = {"error": "not run: an item before it in its process was refused", "stopped": "policy"}
    return list(verdicts) + [dict(skipped) for _ in range(count - len(verdicts))], seen
