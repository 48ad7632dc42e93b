// The host API against the real server: tools in a provider's shape, the model's parts handled
// as they came, approvals, client-executed tools, runs, and errors that name the field.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client, ClientInputError, ToolrouterError, Code } from "../dist/index.js";
import { startServer } from "./server.js";

let server, client;
before(async () => {
  server = await startServer();
  client = new Client(server.grpc);
});
after(() => server.stop());

const callTool = (group, tool, args) => ({ group, tool, arguments: args });
const assistant = (...calls) => ({
  role: "assistant",
  content: null,
  tool_calls: calls.map(([id, name, args]) => ({ id, type: "function", function: { name, arguments: JSON.stringify(args) } })),
});

test("model tools come in the provider's shape with the instructions", async () => {
  const agent = await server.crmAgent();
  const tools = await client.getModelTools(agent, "r1", { format: "openai_chat" });
  assert.deepEqual(tools.tools.map((t) => t.function.name), ["discover_tools", "describe_tool", "call_tool", "list_tool_groups", "list_tools"]);
  assert.match(tools.instructions, /discover_tools/);
  assert.equal(tools.version, 1);
});

test("the CRM lookup through call_tool answers Ada", async () => {
  const agent = await server.crmAgent();
  const out = await client.handleToolCalls(agent, "r1", assistant(["c1", "call_tool", callTool("crm", "customer_name", { customer_id: 42 })]), "openai_chat");
  assert.deepEqual(out.results, [{ role: "tool", tool_call_id: "c1", content: "Ada" }]);
  assert.deepEqual(out.deferred, []);
});

test("an approval waits, then runs once approved; a denial never runs", async () => {
  const agent = await server.crmAgent();
  const out = await client.handleToolCalls(agent, "r1", assistant(
    ["r1", "call_tool", callTool("crm", "refund_payment", { customer_id: 42, amount: 5 })],
    ["r2", "call_tool", callTool("crm", "refund_payment", { customer_id: 7, amount: 9 })],
  ), "openai_chat");
  assert.deepEqual(out.deferred.map((d) => [d.kind, d.toolCallId]), [["approval", "r1"], ["approval", "r2"]]);
  assert.deepEqual((await client.listDeferred({ agent, run: "r1" })).map((r) => r.deferred.deferredId).sort(), out.deferred.map((d) => d.deferredId).sort());
  const done = await client.resolve(out.deferred[0].deferredId, { approve: true }, { format: "openai_chat" });
  assert.deepEqual(done.content, { refunded: 5, customer_id: 42, status: "done" });
  assert.equal(done.provider.tool_call_id, "r1");
  const denied = await client.resolve(out.deferred[1].deferredId, { deny: "Too large." });
  assert.match(JSON.stringify(denied.content), /Too large\./);
  const resolved = await client.listDeferred({ agent, state: "resolved" });
  assert.deepEqual(resolved.map((r) => r.resolution).sort(), ["approved", "denied"]);
  assert.deepEqual(await client.listDeferred({ agent }), []);
});

test("a client-executed tool is answered by the host", async () => {
  const agent = await server.crmAgent();
  const out = await client.handleToolCalls(agent, "r1", [{ type: "tool_use", id: "m1", name: "call_tool", input: callTool("mail", "send_email", { to: "ada@example.com", body: "Hi" }) }], "anthropic");
  const [waiting] = out.deferred;
  assert.equal(waiting.kind, "client_execution");
  const sent = await client.resolve(waiting.deferredId, { clientResult: { sent: true } }, { format: "anthropic" });
  assert.deepEqual(sent.content, { sent: true });
  assert.equal(sent.provider.tool_use_id, "m1");
});

test("ending a run releases its version pin", async () => {
  const agent = await server.crmAgent();
  await client.getModelTools(agent, "r1");
  await client.endRun(agent, "r1");
  assert.equal((await client.getModelTools([agent, 1], { runId: "r2", identity: { user_id: "u1" } })).version, 1);
});

test("a malformed tool-call part is refused naming its field", async () => {
  const agent = await server.crmAgent();
  await assert.rejects(client.handleToolCalls(agent, "r1", [{ type: "function", function: { name: "call_tool", arguments: "{}" } }], "openai_chat"), (e) => {
    assert.ok(e instanceof ToolrouterError);
    assert.equal(e.code, Code.InvalidArgument);
    assert.match(e.fields[0], /^provider_calls_json\[0\]/);
    assert.ok(e.message.includes(e.fields[0]));
    return true;
  });
  await assert.rejects(client.getModelTools("no-such-agent", "r1"), (e) => e instanceof ToolrouterError && e.code === Code.NotFound);
});

test("bad input is a clear error naming the field", async () => {
  const cases = [
    [() => client.handleToolCalls("a", "r", "not parts", "openai_chat"), "calls"],
    [() => client.handleToolCalls("a", "r", [{ id: "x" }, 5], "openai_chat"), "calls[1]"],
    [() => client.handleToolCalls("a", "r", [], "openai"), "format"],
    [() => client.getModelTools(42, "r"), "agent"],
    [() => client.getModelTools(["a", -1], "r"), "agent[1]"],
    [() => client.getModelTools("a", { runId: "r", identity: { user_id: 7 } }), "run.identity.user_id"],
    [() => client.resolve("d", "yes"), "decision"],
    [() => client.listDeferred({ state: "done" }), "state"],
  ];
  for (const [call, field] of cases) {
    await assert.rejects(call, (e) => e instanceof ClientInputError && e.field === field && e.message.startsWith(`${field}: `), field);
  }
});

test("README's host loop answers Ada after the approved refund", async () => {
  const { hostLoop } = await import("../examples/host-loop.js");
  const agent = await server.crmAgent();
  const asked = [];
  const chat = async (messages, tools) => {
    assert.ok(tools.some((t) => t.function.name === "call_tool"));
    if (messages.at(-1).role === "user") {
      const calls = [["refund", callTool("crm", "refund_payment", { customer_id: 42, amount: 5 })], ["name", callTool("crm", "customer_name", { customer_id: 42 })]];
      return assistant(...calls.map(([id, args]) => [id, "call_tool", args]));
    }
    const answers = Object.fromEntries(messages.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, m.content]));
    assert.deepEqual(Object.keys(answers).sort(), ["name", "refund"]);
    return { role: "assistant", content: answers.name };
  };
  assert.equal(await hostLoop(client, agent, "loop", chat, async (d) => (asked.push(d.tool), true), "Refund 42, then their name?"), "Ada");
  assert.deepEqual(asked, ["refund_payment"]);
  const [record] = await client.listDeferred({ agent, state: "resolved" });
  assert.equal(record.resolution, "approved");
});
