"""A real MCP server written with the official Python SDK (mcp 2.x), serving streamable HTTP
on 127.0.0.1. Prints "PORT <n>" once it listens. Used by tests/mcp_python.rs as a source."""

import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("python-crm")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Report the run header, the MCP session and the protocol version of this call.")
def whoami(note: str, ctx: Context) -> dict:
    headers = ctx.headers or {}
    return {
        "note": note,
        "run": headers.get("x-run"),
        "user": headers.get("x-user"),
        "session": headers.get("mcp-session-id"),
        "protocol": ctx.protocol_version,
        "traceparent": headers.get("traceparent"),
    }


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
