"""A local fake of the Messages API: the real anthropic SDK talks to it through base_url; tests script replies."""

from __future__ import annotations

import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A conservative estimate for JSON-heavy prompts (Claude's tokenizer averages ~3.5 chars per token on such
# text); the budget test relies on it overestimating, never underestimating.
CHARS_PER_TOKEN = 3.0
MIN_CACHEABLE_TOKENS = 1024  # Sonnet's minimum cacheable prefix


def estimate_tokens(obj: Any) -> int:
    text = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw: bytes | None = None


Responder = Callable[[dict[str, Any]], Reply]


def tool_reply(name: str, payload: dict[str, Any], *, text: str = "") -> Responder:
    """A Messages answer calling tool `name`; usage is filled in by the server from the request."""

    def respond(_: dict[str, Any]) -> Reply:
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content.append(
            {"type": "tool_use", "id": f"toolu_{int(time.time() * 1e6)}", "name": name, "input": payload}
        )
        return Reply(body={"content": content, "stop_reason": "tool_use"})

    return respond


def text_reply(text: str) -> Responder:
    return lambda _: Reply(body={"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"})


def error_reply(status: int, kind: str = "api_error", *, retry_after: float | None = None) -> Responder:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    body = {"type": "error", "error": {"type": kind, "message": f"scripted {status}"}}
    return lambda _: Reply(status=status, body=body, headers=headers)


def slow(responder: Responder, delay_s: float) -> Responder:
    def respond(req: dict[str, Any]) -> Reply:
        reply = responder(req)
        reply.delay_s = delay_s
        return reply

    return respond


class FakeAnthropic:
    """Scripted replies in order; when the script runs out, `default` answers (or a 500 says so)."""

    def __init__(self, default: Responder | None = None) -> None:
        self.script: deque[Responder] = deque()
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._cached_prefixes: set[str] = set()
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                reply = fake._answer(request, dict(self.headers))
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def add(self, *responders: Responder) -> FakeAnthropic:
        self.script.extend(responders)
        return self

    def _answer(self, request: dict[str, Any], headers: dict[str, str]) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.headers.append(headers)
            responder = self.script.popleft() if self.script else self.default
        if responder is None:
            return error_reply(500, "api_error")(request)
        reply = responder(request)
        if reply.status == 200 and reply.body is not None and reply.raw is None:
            reply.body = self._complete(request, reply.body)
        return reply

    def _complete(self, request: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        """Fill id, model and a usage estimate: the cacheable prefix (tools + system) is read from cache
        from the second identical call on, as the real API does once it reaches the minimum length."""
        prefix = estimate_tokens([request.get("tools", []), request.get("system", "")])
        rest = estimate_tokens(request.get("messages", []))
        cache_read = cache_write = 0
        key = json.dumps([request.get("tools", []), request.get("system", "")], sort_keys=True)
        if prefix >= MIN_CACHEABLE_TOKENS:
            with self._lock:
                if key in self._cached_prefixes:
                    cache_read = prefix
                else:
                    cache_write = prefix
                    self._cached_prefixes.add(key)
            uncached = rest
        else:
            uncached = prefix + rest
        output = estimate_tokens(body.get("content", []))
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "fake"),
            "stop_sequence": None,
            **body,
            "usage": {
                "input_tokens": uncached,
                "output_tokens": output,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_write,
            },
        }

    def tool_names(self) -> list[str | None]:
        """The forced tool of each request received, in order."""
        return [(r.get("tool_choice") or {}).get("name") for r in self.requests]
