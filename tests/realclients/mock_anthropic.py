"""A scripted Anthropic Messages API on 127.0.0.1 for running the real Claude Code offline.

It speaks the wire format Claude Code reads: `POST /v1/messages` answered as a server-sent
event stream (message_start, content_block_start with a text or tool_use block,
content_block_delta with text_delta / input_json_delta, content_block_stop, message_delta with
the stop_reason and usage, message_stop) or as one JSON message when the request does not ask
for a stream; `POST /v1/messages/count_tokens` answers a token count; anything else gets `{}`.

A test scripts the "model": a list of turns (consumed one per main-loop request) or a function
that gets the request and returns the next turn. Claude Code also makes side calls (a title for
the session, a quota probe, summaries): requests that offer the model no tools. They are
answered with a short text and never consume the script. Every request is logged, so a test
reads what the client sent back: tool results with their is_error flag and text (a hook's deny
reason), the system prompt, and the role "system" messages that carry hooks' additionalContext.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socketserver
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


@dataclass
class Turn:
    """One assistant message: some text and/or tool calls (tool_use blocks)."""

    text: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)

    def blocks(self) -> list[dict[str, Any]]:
        """The message content blocks, with fresh tool_use ids."""
        out: list[dict[str, Any]] = []
        if self.text or not self.tools:
            out.append({"type": "text", "text": self.text or "Done."})
        for call in self.tools:
            out.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_mock{next(_ids):06d}",
                    "name": call["name"],
                    "input": call["input"],
                }
            )
        return out


def tool(name: str, **tool_input: Any) -> dict[str, Any]:
    """A tool call for a Turn: `tool("Write", file_path=..., content=...)`."""
    return {"name": name, "input": tool_input}


def say(text: str) -> Turn:
    """A final answer (end_turn)."""
    return Turn(text=text)


def call(name: str, **tool_input: Any) -> Turn:
    """A turn that makes exactly one tool call."""
    return Turn(tools=[tool(name, **tool_input)])


@dataclass
class Request:
    """One request the client made (parsed body), with helpers to read the conversation."""

    path: str
    body: dict[str, Any]
    side: bool  # a side call (no tools offered): not part of the scripted conversation

    @property
    def messages(self) -> list[dict[str, Any]]:
        msgs = self.body.get("messages")
        return msgs if isinstance(msgs, list) else []

    def blocks(self, role: str = "user") -> Iterator[dict[str, Any]]:
        """Every content block of the messages with `role` (strings become text blocks)."""
        for msg in self.messages:
            if msg.get("role") != role:
                continue
            content = msg.get("content")
            if isinstance(content, str):
                yield {"type": "text", "text": content}
            elif isinstance(content, list):
                yield from (b for b in content if isinstance(b, dict))

    def tool_results(self) -> list[dict[str, Any]]:
        """tool_result blocks, content flattened to text."""
        out = []
        for block in self.blocks():
            if block.get("type") == "tool_result":
                out.append({**block, "text": _text_of(block.get("content"))})
        return out

    def last_tool_result(self) -> dict[str, Any] | None:
        results = self.tool_results()
        return results[-1] if results else None

    def user_text(self) -> str:
        """All user-side text (prompts, system reminders, tool results) joined."""
        parts = []
        for block in self.blocks():
            if block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif block.get("type") == "tool_result":
                parts.append(_text_of(block.get("content")))
        return "\n".join(parts)

    def system_text(self) -> str:
        """The system prompt plus the role "system" messages, where Claude Code 2.1 puts the
        hooks' additionalContext ("SessionStart hook additional context: ...")."""
        parts = [_text_of(self.body.get("system"))]
        parts += [_text_of(m.get("content")) for m in self.messages if m.get("role") == "system"]
        return "\n".join(parts)

    def all_text(self) -> str:
        """Everything the client told the model in this request."""
        return self.system_text() + "\n" + self.user_text()

    def tool_names(self) -> list[str]:
        tools = self.body.get("tools") or []
        return [t.get("name", "") for t in tools if isinstance(t, dict)]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) if isinstance(b, dict) else str(b) for b in content)
    return ""


Script = Callable[[Request], Turn]


class MockAnthropic:
    """The server; use as a context manager. `url` is the ANTHROPIC_BASE_URL to give the client."""

    def __init__(self, script: list[Turn] | Script | None = None) -> None:
        self.requests: list[Request] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._turns: list[Turn] = []
        self._fn: Script | None = None
        self.script(script or [])
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        # The same API on a unix socket, for a client in a network namespace of its own
        # (clients.offline_command bridges its 127.0.0.1:port to this socket).
        self._dir = tempfile.mkdtemp(prefix="mock-anthropic-")
        self.unix_socket = os.path.join(self._dir, "api.sock")
        self._unix = _UnixHTTPServer(self.unix_socket, _handler(self))
        self._threads = [
            threading.Thread(target=server.serve_forever, daemon=True)
            for server in (self._server, self._unix)
        ]

    def script(self, script: list[Turn] | Script) -> None:
        """Replace what the model says next (a list is consumed one turn per request)."""
        with self._lock:
            if callable(script):
                self._fn, self._turns = script, []
            else:
                self._fn, self._turns = None, list(script)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> MockAnthropic:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for server in (self._server, self._unix):
            server.shutdown()
            server.server_close()
        shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def main(self) -> list[Request]:
        """The scripted conversation's requests (side calls left out)."""
        return [r for r in self.requests if not r.side]

    def last(self) -> Request:
        assert self.main, f"the client made no main request; errors: {self.errors}"
        return self.main[-1]

    def next_turn(self, request: Request) -> Turn:
        with self._lock:
            if self._fn is not None:
                return self._fn(request)
            if self._turns:
                return self._turns.pop(0)
        return say("Nothing more to do.")  # the script ran out: end the turn politely

    def answer(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any] | None, Turn]:
        side = not body.get("tools")
        request = Request(path, body, side)
        with self._lock:
            self.requests.append(request)
        if side:
            return None, Turn(text="ok")
        try:
            return None, self.next_turn(request)
        except Exception as exc:  # a script bug: tell the test, end the conversation
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return None, say(f"mock script error: {exc}")


def _message(body: dict[str, Any], turn: Turn) -> dict[str, Any]:
    blocks = turn.blocks()
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": f"msg_mock{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-mock"),
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


def sse_events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The stream of (event, data) pairs that delivers `message`."""
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {"input_tokens": 10, "output_tokens": 1}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            empty = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": empty,
            },
        )
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    )
    yield "message_stop", {"type": "message_stop"}


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _handler(mock: MockAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def address_string(self) -> str:  # a unix socket's peer has no host
            return "local"

        def _send_json(self, data: dict[str, Any], status: int = 200) -> None:
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._send_json({})

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            path = self.path.split("?", 1)[0]
            if path.endswith("/count_tokens"):
                self._send_json({"input_tokens": 10})
                return
            if not isinstance(body, dict):
                body = {}
            if not path.endswith("/v1/messages"):
                with mock._lock:
                    mock.requests.append(Request(path, body, True))
                self._send_json({})
                return
            _, turn = mock.answer(path, body)
            message = _message(body, turn)
            if not body.get("stream"):
                self._send_json(message)
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("connection", "close")
            self.end_headers()
            for event, data in sse_events(message):
                self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    return Handler
