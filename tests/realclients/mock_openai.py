"""A scripted OpenAI Responses API server on loopback, for the real Codex CLI.

Codex 0.169 with a provider whose `wire_api = "responses"` POSTs `{base_url}/responses` with
`stream: true` and reads Server-Sent Events. Each response is one turn of the "model":

    event: response.created            data: {"type": "response.created", "response": {...}}
    event: response.output_item.added  data: {"type": …, "output_index": i, "item": {...}}
    event: response.output_text.delta  data: {"type": …, "item_id": …, "delta": "text"}
    event: response.output_item.done   data: {"type": …, "output_index": i, "item": {...}}
    event: response.completed          data: {"type": …, "response": {"id": …, "usage": {...}}}

Output items are `message` (assistant text), `function_call` (the `exec_command` /
`shell` tools: `arguments` is a JSON string; MCP tools with a `namespace`) and
`custom_tool_call` (freeform `apply_patch`: `input` is the patch text). Codex runs the calls
and sends the next request with the whole conversation, ending in `function_call_output` /
`custom_tool_call_output` items whose `output` is what the tool printed (or the denial text of
a hook). A test scripts the model as a function from the request to the next output items and
reads every request afterwards. Codex 0.169 asks for nothing else (no /models).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socketserver
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Item = dict[str, Any]


@dataclass
class Turn:
    """One request Codex sent: path, headers and the JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def input(self) -> list[Item]:
        """The conversation so far (instructions are separate, in `instructions`)."""
        items = self.body.get("input")
        return items if isinstance(items, list) else []

    @property
    def tools(self) -> list[str]:
        """Names of the tools Codex offered the model."""
        return [str(t.get("name", t.get("type", ""))) for t in self.body.get("tools", [])]

    def user_text(self) -> str:
        """All user message text, joined (the prompt, AGENTS.md and hook context land here)."""
        parts: list[str] = []
        for item in self.input:
            if item.get("type") == "message" and item.get("role") in ("user", "developer"):
                for chunk in item.get("content", []):
                    if isinstance(chunk, dict) and "text" in chunk:
                        parts.append(str(chunk["text"]))
        return "\n".join(parts)

    def outputs(self) -> list[Item]:
        """The tool results Codex sent back, oldest first."""
        kinds = ("function_call_output", "custom_tool_call_output")
        return [item for item in self.input if item.get("type") in kinds]

    def output_for(self, call_id: str) -> str:
        """The text of the result of one call ('' when absent)."""
        for item in self.outputs():
            if item.get("call_id") == call_id:
                return output_text(item)
        return ""

    def calls_made(self) -> int:
        """How many tool calls the model has made so far in this conversation."""
        kinds = ("function_call", "custom_tool_call", "local_shell_call")
        return sum(1 for item in self.input if item.get("type") in kinds)


def output_text(item: Item) -> str:
    """A tool result's text: `output` is a string, or content items, or {content: …}."""
    out = item.get("output")
    if isinstance(out, str):
        return out
    if isinstance(out, dict):
        return str(out.get("content", out))
    if isinstance(out, list):
        return "\n".join(str(c.get("text", "")) for c in out if isinstance(c, dict))
    return ""


Script = Callable[[Turn], list[Item]]
_ids = itertools.count(1)


def message(text: str) -> Item:
    """An assistant message item."""
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": f"msg_{next(_ids)}", "role": "assistant",
            "status": "completed", "content": content}  # fmt: skip


def function_call(name: str, arguments: dict[str, Any], call_id: str = "") -> Item:
    """A function tool call (`exec_command`, `shell`, an MCP tool …)."""
    call_id = call_id or f"call_{next(_ids)}"
    return {"type": "function_call", "id": f"fc_{next(_ids)}", "status": "completed",
            "name": name, "arguments": json.dumps(arguments), "call_id": call_id}  # fmt: skip


def custom_tool_call(name: str, text: str, call_id: str = "") -> Item:
    """A freeform tool call (Codex's `apply_patch` takes the patch as raw text)."""
    call_id = call_id or f"call_{next(_ids)}"
    return {"type": "custom_tool_call", "id": f"ctc_{next(_ids)}", "status": "completed",
            "name": name, "input": text, "call_id": call_id}  # fmt: skip


def mcp_call(server: str, tool: str, arguments: dict[str, Any], call_id: str = "") -> Item:
    """A call of an MCP tool: Codex 0.169 offers each server's tools as a `namespace` tool
    named `mcp__<server>` and expects the call's `namespace` beside the tool's own name (its
    hooks see `mcp__<server>__<tool>`)."""
    return {**function_call(tool, arguments, call_id), "namespace": f"mcp__{server}"}


def shell(command: str, workdir: str = "", call_id: str = "") -> Item:
    """Run a shell command through Codex's `exec_command` tool."""
    args: dict[str, Any] = {"cmd": command}
    if workdir:
        args["workdir"] = workdir
    return function_call("exec_command", args, call_id)


def add_file_patch(path: str, text: str) -> str:
    """An apply_patch envelope that adds one file."""
    lines = "".join(f"+{line}\n" for line in text.splitlines())
    return f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n"


@dataclass
class MockOpenAI:
    """The server; `script` decides each turn; `turns` records every request."""

    script: Script
    drop_first: int = 0  # cut this many /responses streams before response.completed first
    turns: list[Turn] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _unix: socketserver.UnixStreamServer | None = None
    _dir: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        """The loopback port."""
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, what a Codex model provider's base_url names."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def unix_socket(self) -> str:
        """The same API on a unix socket, for a client in a network namespace of its own
        (clients.offline_command serves its 127.0.0.1:PORT from it)."""
        return os.path.join(self._dir, "api.sock")

    def start(self) -> MockOpenAI:
        """Listen on an ephemeral loopback port and on a unix socket, in daemon threads."""
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._dir = tempfile.mkdtemp(prefix="mock-openai-")
        self._unix = _UnixHTTPServer(self.unix_socket, _handler(self))
        for server in (self._server, self._unix):
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        for server in (self._server, self._unix):
            if server is not None:
                server.shutdown()
                server.server_close()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> MockOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def answer(self, turn: Turn) -> list[Item]:
        """Record the turn and ask the script; a script error becomes a visible message."""
        with self._lock:
            self.turns.append(turn)
        try:
            return self.script(turn)
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            return [message(f"mock script failed: {exc}")]

    def all_outputs(self) -> list[str]:
        """Every tool result text Codex sent back, across all turns, without repeats."""
        seen: dict[str, str] = {}
        for turn in self.turns:
            for item in turn.outputs():
                seen.setdefault(str(item.get("call_id")), output_text(item))
        return list(seen.values())


def sse(items: list[Item], response_id: str) -> bytes:
    """The SSE stream of one response with these output items."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}
    ]
    for index, item in enumerate(items):
        events.append({"type": "response.output_item.added", "output_index": index,
                       "item": {**item, "status": "in_progress"}})  # fmt: skip
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append({"type": "response.output_text.delta", "item_id": item["id"],
                           "output_index": index, "content_index": 0, "delta": text})  # fmt: skip
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 110}  # fmt: skip
    done = {"id": response_id, "status": "completed", "usage": usage}
    events.append({"type": "response.completed", "response": done})
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def _handler(mock: MockOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def address_string(self) -> str:  # a unix socket's peer has no host
            return "local"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: requests are in mock.turns."""

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _cut(self, partial: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(partial)
            self.wfile.flush()
            self.close_connection = True

        def do_GET(self) -> None:
            with mock._lock:
                mock.other.append(f"GET {self.path}")
            if self.path.split("?")[0].endswith("/models"):
                self._send(200, json.dumps({"models": [], "data": []}).encode())
            else:
                self._send(404, b'{"error": {"message": "not found"}}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.split("?")[0].endswith("/responses"):
                with mock._lock:
                    mock.other.append(f"POST {self.path}")
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"unparsed": raw.decode(errors="replace")}
            with mock._lock:
                dropping = mock.drop_first > 0
                mock.drop_first -= 1 if dropping else 0
                if dropping:
                    mock.other.append(f"POST {self.path} -> stream cut")
            if dropping:  # the start of a stream, then the connection closes
                self._cut(sse([], "resp_cut").split(b"event: response.completed")[0])
                return
            turn = Turn(self.path, dict(self.headers.items()), body)
            items = mock.answer(turn)
            self._send(200, sse(items, f"resp_{next(_ids)}"), "text/event-stream")

    return Handler


MODEL = "taskgate-mock"
KEY_ENV = "TASKGATE_MOCK_OPENAI_KEY"  # the provider's env_key: any value, never a real key
# Model metadata, so that Codex offers its `apply_patch` tool (freeform) and sends short
# instructions; fields as in Codex's own models.json (`model_catalog_json`).
CATALOG = {
    "models": [
        {
            "slug": MODEL, "display_name": MODEL, "description": "taskgate test model",
            "base_instructions": "You are a scripted test model.",
            "default_reasoning_level": "low",
            "supported_reasoning_levels": [{"effort": "low", "description": "low"}],
            "shell_type": "unified_exec", "visibility": "list", "supported_in_api": True,
            "priority": 1, "additional_speed_tiers": [], "service_tiers": [],
            "availability_nux": None, "upgrade": None,
            "include_skills_usage_instructions": False,
            "include_plugin_usage_instructions": False,
            "include_apps_usage_instructions": False,
            "supports_reasoning_summaries": False, "default_reasoning_summary": "none",
            "support_verbosity": False, "default_verbosity": None,
            "apply_patch_tool_type": "freeform", "web_search_tool_type": "text",
            "truncation_policy": {"mode": "tokens", "limit": 10000},
            "supports_parallel_tool_calls": False, "supports_image_detail_original": False,
            "context_window": 200000, "max_context_window": 200000,
            "effective_context_window_percent": 95, "experimental_supported_tools": [],
            "input_modalities": ["text"], "supports_search_tool": False,
            "use_responses_lite": False, "tool_mode": "default",
        }
    ]
}  # fmt: skip


def codex_config(home: Path, mock: MockOpenAI, *, catalog: Path | None = None) -> Path:
    """Write `$HOME/.codex/config.toml`: the mock as the only model provider (Responses wire
    API, loopback), no login, no update check, no plugin marketplaces, no analytics or feedback
    upload, no web search.

    Top-level keys come before any table (a key after `[x]` belongs to `x`, and Codex then
    silently falls back to the OpenAI provider). `catalog` is where the model catalog is
    written (default beside the config; a path other processes can read when Codex runs in
    taskgate's own sandbox, whose HOME holds only a copy of config.toml).
    """
    codex = home / ".codex"
    codex.mkdir(parents=True, exist_ok=True)
    catalog = catalog or codex / "catalog.json"
    catalog.parent.mkdir(parents=True, exist_ok=True)
    catalog.write_text(json.dumps(CATALOG, indent=1))
    config = codex / "config.toml"
    config.write_text(
        f'model = "{MODEL}"\n'
        'model_provider = "taskgate-mock"\n'
        f"model_catalog_json = {json.dumps(str(catalog))}\n"
        'approval_policy = "never"\n'
        "check_for_update_on_startup = false\n"
        'web_search = "disabled"\n'
        # The plugin marketplaces are looked up on github.com and chatgpt.com at start-up
        # (strace shows the DNS queries); with these off Codex 0.169 connects to nothing but
        # the mock.
        "\n[features]\nplugins = false\nremote_plugin = false\n"
        "\n[analytics]\nenabled = false\n"
        "\n[feedback]\nenabled = false\n"
        "\n[model_providers.taskgate-mock]\n"
        'name = "taskgate mock"\n'
        f'base_url = "{mock.base_url}"\n'
        'wire_api = "responses"\n'
        f'env_key = "{KEY_ENV}"\n'
        "request_max_retries = 0\n"
        "stream_max_retries = 0\n"
        "supports_websockets = false\n"
    )
    return config
