"""Running compiled investigation code in its namespace, and reading its result as a verdict."""

import errno
import json
import math
import sys
import traceback

from .inprocess import CODE_NAME, SandboxViolation


class OutputTooLarge(Exception):
    """Printed output went past the cap."""


class CappedWriter:
    """Stands in for sys.stdout: keeps what is printed, up to a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[str] = []
        self.size = 0

    def write(self, text: str) -> int:
        text = str(text)
        self.size += len(text)
        if self.size > self.cap:
            raise OutputTooLarge(f"printed output exceeded {self.cap} characters")
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        return None

    def getvalue(self) -> str:
        return "".join(self.parts)


def _jsonable(value: object, depth: int = 0) -> object:
    """Plain JSON values; numpy scalars and arrays converted, NaN and infinities to None."""
    import numpy as np

    if depth > 50:
        raise ValueError("result nested too deeply")
    if isinstance(value, dict):
        return {str(_jsonable(k, depth + 1)): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v, depth + 1) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    raise TypeError(f"result contains a {type(value).__name__}, which is not JSON-serialisable")


def run_code(codes: tuple, user_globals: dict, captured: "CappedWriter", cap: int) -> dict:
    """Run compiled investigation code (compile_batch_item's) in `user_globals` with stdout going to
    `captured`: its verdict."""
    sys.stdout = captured  # type: ignore[assignment]
    try:
        for code in codes:
            exec(code, user_globals)
        return collect(user_globals.get("result"), captured.getvalue(), cap)
    except OutputTooLarge as exc:
        return {"error": str(exc), "stopped": "output_size"}
    except MemoryError:
        return {"error": "MemoryError: the code ran out of its memory budget", "stopped": "memory"}
    except OSError as exc:
        if exc.errno == errno.EFBIG:  # RLIMIT_FSIZE: writing straight to a descriptor past the cap
            return {"error": "output exceeded the file size limit", "stopped": "output_size"}
        return {"error": user_traceback(exc), "stopped": "error"}
    except SandboxViolation as exc:
        return {"error": str(exc), "stopped": "policy"}
    except BaseException as exc:
        return {"error": user_traceback(exc), "stopped": "error"}
    finally:
        sys.stdout = sys.__stdout__


def collect(result: object, printed: str, cap: int) -> dict:
    set_result = result is not None
    if result is None:
        text = printed.strip()
        if not text:
            return {
                "error": "the code neither set `result` nor printed a JSON object",
                "stopped": "invalid_output",
            }
        try:
            result = json.loads(text)
        except ValueError:
            return {"error": "printed output is not exactly one JSON object", "stopped": "invalid_output"}
    if not isinstance(result, dict):
        return {"error": f"result must be a dict, got {type(result).__name__}", "stopped": "invalid_output"}
    try:
        output = _jsonable(result)
        size = len(json.dumps(output))
    except (TypeError, ValueError, RecursionError) as exc:
        return {"error": f"result is not JSON-serialisable: {exc}", "stopped": "invalid_output"}
    if size > cap:
        return {"error": f"result is {size} bytes, over the {cap}-byte cap", "stopped": "output_size"}
    verdict: dict = {"success": True, "output": output}
    if set_result and printed.strip():
        # print() beside `result` (debugging, a table) is kept, within what the cap leaves after the output.
        verdict["printed"] = _fit(printed, cap - size)
    return verdict


def _fit(text: str, budget: int) -> str:
    """`text`, cut so that its JSON encoding takes at most `budget` bytes (the supervisor caps the report)."""
    while text and len(json.dumps(text)) > budget:
        text = text[: len(text) // 2]
    return text


def user_traceback(exc: BaseException) -> str:
    # lookup_lines=False: reading source lines would open files, which the armed audit hook refuses.
    summary = traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__), lookup_lines=False)
    frames = [f for f in summary if f.filename == CODE_NAME]
    where = f" (line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}"[:2000] + where
