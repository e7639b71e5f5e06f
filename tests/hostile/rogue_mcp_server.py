"""A hostile MCP server speaking raw JSON-RPC on stdio, so it can send what no SDK
would: `python -m tests.hostile.rogue_mcp_server MODE [FLOOD_BYTES]`.

MODE `serve` answers properly; `flood-at-start` answers `initialize` with one line
of FLOOD_BYTES (default 1 GiB) that never ends; `flood-on-call` starts properly and
answers a tool call so; `pings-on-call` answers a tool call with FLOOD_BYTES pings
of its own and never reads stdin again; `exit-on-call` exits instead of answering;
`deaf` stops reading its stdin once it has listed its tools. Among its tools are
schemas built to cost a validator hours (`$ref`s that fan out), to crash a grammar
builder (a bound no float holds) or to be refused by RE2 (lookbehind). With
`HEARTH_TEST_MCP_DIR` set it writes its pid to `<dir>/<pid>.pid` for clean-up.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

PIECE = b"x" * (1 << 20)


def _fan_out(levels: int = 40) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/d0"}}}


TOOLS = [
    {
        "name": "echo",
        "description": "Say the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
    },
    {
        "name": "any_value",
        "description": "Takes anything (a valid schema that once stopped every mount).",
        "inputSchema": {"type": "object", "properties": {"a": True}},
    },
    {"name": "fan_out", "description": "Costly to check.", "inputSchema": _fan_out()},
    {
        "name": "huge",
        "description": "No float holds its bound.",
        "inputSchema": {"type": "object", "properties": {"a": {"maxLength": 10**400}}},
    },
    {
        "name": "lookbehind",
        "description": "Not RE2.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "string", "pattern": "(?<=a)b"}},
        },
    },
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def flood(size: int) -> None:
    """One line of `size` bytes with no end, then silence."""
    sys.stdout.buffer.write(b'{"jsonrpc": "2.0", "id": 1, "result": "')
    for _ in range(size // len(PIECE)):
        sys.stdout.buffer.write(PIECE)
    sys.stdout.buffer.flush()
    time.sleep(3600)


def requests_unread(count: int) -> None:
    """`count` pings to the client (each wants an answer), never reading a reply."""
    for ident in range(count):
        sys.stdout.buffer.write(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % ident)
    sys.stdout.buffer.flush()
    time.sleep(3600)


def main() -> None:
    mode = sys.argv[1] if len(sys.argv) > 1 else "serve"
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 1 << 30
    if os.environ.get("HEARTH_TEST_MCP_DIR"):
        (Path(os.environ["HEARTH_TEST_MCP_DIR"]) / f"{os.getpid()}.pid").touch()
    for line in sys.stdin.buffer:
        request = json.loads(line)
        if "id" not in request:
            continue  # a notification
        method, ident = request.get("method"), request["id"]
        if method == "initialize":
            if mode == "flood-at-start":
                flood(size)
            version = request["params"]["protocolVersion"]
            result: Any = {
                "protocolVersion": version,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "rogue", "version": "1"},
            }
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
            if mode == "deaf":
                time.sleep(3600)
            continue
        elif method == "tools/call":
            if mode == "flood-on-call":
                flood(size)
            if mode == "pings-on-call":
                requests_unread(size)
            if mode == "exit-on-call":
                sys.exit(3)
            text = json.dumps(request["params"].get("arguments", {}))
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no"}})
            continue
        send({"jsonrpc": "2.0", "id": ident, "result": result})


if __name__ == "__main__":
    main()
