// The real toolrouter binary on 127.0.0.1 with port 0 and the demo CRM executor next to it, as
// the Rust tests do: $TOOLROUTER_BIN, else `toolrouter` on PATH (the wheel), else target/ci.
import { spawn, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { AgentRegistry } from "../dist/gen/toolrouter/v1/registry_pb.js";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

function binary() {
  if (process.env.TOOLROUTER_BIN) return process.env.TOOLROUTER_BIN;
  try {
    return execFileSync("sh", ["-c", "command -v toolrouter"], { encoding: "utf8" }).trim();
  } catch {}
  const built = path.join(process.env.CARGO_TARGET_DIR ?? path.join(repo, "target"), "ci", "toolrouter");
  if (existsSync(built)) return built;
  throw new Error("no toolrouter binary: set TOOLROUTER_BIN, pip install the wheel, or cargo build --profile ci");
}

function start(args, ready) {
  const child = spawn(binary(), args, { stdio: ["ignore", "pipe", "ignore"] });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on("line", (line) => {
      const m = line.match(ready);
      if (m) resolve({ child, match: m });
    });
    child.on("exit", (code) => reject(new Error(`${args[0]} exited with ${code} before it was ready`)));
  });
}

export async function startServer() {
  const executor = await start(["demo-executor", "--addr", "127.0.0.1:0"], /demo executor listening on (\S+)/);
  const serve = await start(["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--store", "sqlite::memory:"], /toolrouter listening: grpc=(\S+) http=(\S+)/);
  const grpc = `http://${serve.match[1]}`;
  const registry = createClient(AgentRegistry, createGrpcTransport({ baseUrl: grpc }));
  return {
    grpc,
    /** A fresh CRM agent: customer_name and the approval-gated refund_payment from the demo
     * executor, and a client-executed send_email. */
    async crmAgent() {
      const agentId = `crm-${randomUUID().slice(0, 8)}`;
      await registry.createAgentVersion({
        agentId,
        makeDefault: true,
        definition: {
          sources: [
            { id: "crm-tools", instructions: "Use numeric customer IDs, not display names.", kind: { case: "function", value: { endpoint: `http://${executor.match[1]}` } } },
            { id: "mail", kind: { case: "client", value: { tools: [{ name: "send_email", description: "Send an email from the user's mail client.", inputSchemaJson: JSON.stringify({ type: "object", properties: { to: { type: "string" }, body: { type: "string" } }, required: ["to", "body"] }) }] } } },
          ],
          groups: { crm: { description: "Customer records", sourceIds: ["crm-tools"] }, mail: { description: "Email", sourceIds: ["mail"] } },
        },
      });
      return agentId;
    },
    stop() {
      serve.child.kill("SIGTERM");
      executor.child.kill("SIGTERM");
    },
  };
}
