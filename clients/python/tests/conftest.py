"""The real toolrouter binary, started once per test session on 127.0.0.1 with port 0, and the
demo CRM executor (`toolrouter demo-executor`) next to it, as the Rust tests and benches do.

The binary: $TOOLROUTER_BIN, else `toolrouter` on PATH (the installed wheel), else the repo's
target/ci/toolrouter (`cargo build --profile ci`; $CARGO_TARGET_DIR is honoured)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from toolrouter_client.proto import definition_pb2 as d
from toolrouter_client.proto import registry_pb2, registry_pb2_grpc

REPO = Path(__file__).resolve().parents[3]


def server_binary() -> str:
    if os.environ.get("TOOLROUTER_BIN"):
        return os.environ["TOOLROUTER_BIN"]
    on_path = shutil.which("toolrouter")
    if on_path:
        return on_path
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    built = target / "ci" / "toolrouter"
    if built.exists():
        return str(built)
    raise RuntimeError("no toolrouter binary: set TOOLROUTER_BIN, pip install the wheel, or cargo build --profile ci")


class Process:
    """A child process whose stdout is read until a line matches, then drained in a thread."""

    def __init__(self, args: list[str], ready: str, log: Path) -> None:
        self.log = log.open("w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True, env={**os.environ, "NO_COLOR": "1"})
        assert self.proc.stdout is not None
        pattern = re.compile(ready)
        for line in self.proc.stdout:
            if m := pattern.search(line):
                self.match = m
                break
        else:
            raise RuntimeError(f"{args[:2]} exited before it was ready (code {self.proc.wait()}); log: {log.read_text()[-2000:]}")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=25)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@dataclass
class Server:
    grpc: str
    http: str
    executor: str


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    binary = server_binary()
    logs = Path(tempfile.mkdtemp(prefix="toolrouter-pytest-"))
    executor = Process([binary, "demo-executor", "--addr", "127.0.0.1:0"], r"demo executor listening on (\S+)", logs / "executor.log")
    serve = Process(
        [binary, "serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--store", "sqlite::memory:"],
        r"toolrouter listening: grpc=(\S+) http=(\S+)",
        logs / "serve.log",
    )
    try:
        yield Server(grpc=serve.match[1], http=serve.match[2], executor=executor.match[1])
    finally:
        serve.stop()
        executor.stop()


def crm_definition(executor: str) -> d.AgentDefinition:
    """The seed's CRM agent: `customer_name` and the approval-gated `refund_payment` from the
    demo executor (listed by it), and a client-executed `send_email` the host runs."""
    email = d.ToolDeclaration(
        name="send_email",
        description="Send an email to a customer from the user's own mail client.",
        input_schema_json='{"type":"object","properties":{"to":{"type":"string"},"body":{"type":"string"}},"required":["to","body"]}',
    )
    return d.AgentDefinition(
        sources=[
            d.ToolSource(
                id="crm-tools",
                instructions="Use numeric customer IDs, not display names.",
                function=d.FunctionSource(endpoint=f"http://{executor}"),
            ),
            d.ToolSource(id="mail", client=d.ClientSource(tools=[email])),
        ],
        groups={
            "crm": d.ToolGroup(description="Customer records", source_ids=["crm-tools"]),
            "mail": d.ToolGroup(description="Email", source_ids=["mail"]),
        },
    )


@pytest.fixture
def agent(server: Server) -> str:
    """A fresh CRM agent (its own id, so tests do not share runs or records)."""
    agent_id = f"crm-{uuid.uuid4().hex[:8]}"
    with grpc.insecure_channel(server.grpc) as channel:
        registry_pb2_grpc.AgentRegistryStub(channel).CreateAgentVersion(
            registry_pb2.CreateAgentVersionRequest(agent_id=agent_id, definition=crm_definition(server.executor), make_default=True)
        )
    return agent_id


@pytest.fixture
def run_id() -> str:
    return f"run-{uuid.uuid4().hex[:8]}"
