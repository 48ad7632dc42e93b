// Drives an MCP endpoint (toolrouter's /mcp/agents/{agent}) with the official TypeScript MCP
// client (@modelcontextprotocol/client 2.x):
//
//   node client.mjs URL MODE CALLS [ANSWER]
//
// MODE: `modern` (pinned to 2026-07-28: server/discover, then stateless requests carrying the
// per-request _meta envelope), `legacy` (the 2025-11-25 initialize handshake and a session) or
// `auto` (probe with server/discover, fall back to initialize).
// CALLS: a JSON array of {"name", "arguments", "_meta"?}; `_meta` goes into the tools/call
// params as given (e.g. {"io.toolrouter/run_id": "r1", "io.toolrouter/tool_call_id": "c1"}).
// ANSWER: an ElicitResult as JSON; given, the client declares form elicitation and answers
// every question with it (a 2025 elicitation/create request, or a 2026 input_required round).
//
// Prints one JSON object: the negotiated protocol version and era, the server's identity,
// instructions and (2026-07-28) server/discover result, the listed tools, each call's result
// (or its error), the questions asked and, for every HTTP request the client sent, its
// JSON-RPC method, MCP headers and the response status. A session (legacy) is ended with
// DELETE at the end.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [url, mode, callsJson, answerJson] = process.argv.slice(2);
if (!url || !mode || !callsJson) {
    console.error('usage: node client.mjs URL modern|legacy|auto CALLS_JSON [ELICIT_RESULT_JSON]');
    process.exit(2);
}
const calls = JSON.parse(callsJson);
const answer = answerJson === undefined ? undefined : JSON.parse(answerJson);

const negotiation = { modern: { pin: '2026-07-28' }, legacy: 'legacy', auto: 'auto' }[mode];
if (negotiation === undefined) {
    console.error(`unknown mode ${mode}`);
    process.exit(2);
}

// Every HTTP exchange, as the server saw it.
const wire = [];
async function recordingFetch(input, init) {
    const headers = new Headers(init?.headers);
    let method;
    try {
        method = JSON.parse(init?.body ?? 'null')?.method;
    } catch {
        method = undefined;
    }
    const response = await fetch(input, init);
    wire.push({
        http: init?.method ?? 'GET',
        method: method ?? null,
        protocol_version: headers.get('mcp-protocol-version'),
        session: headers.get('mcp-session-id'),
        status: response.status,
        session_returned: response.headers.get('mcp-session-id')
    });
    return response;
}

const client = new Client(
    { name: 'toolrouter-ts-test', version: '0.1.0' },
    {
        capabilities: answer === undefined ? {} : { elicitation: { form: {} } },
        versionNegotiation: { mode: negotiation }
    }
);
const asked = [];
if (answer !== undefined) {
    client.setRequestHandler('elicitation/create', async request => {
        asked.push({ message: request.params.message, schema: request.params.requestedSchema, mode: request.params.mode ?? null });
        return answer;
    });
}

const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
await client.connect(transport);

const listed = await client.listTools();
const results = [];
for (const call of calls) {
    const params = { name: call.name, arguments: call.arguments ?? {} };
    if (call._meta) params._meta = call._meta;
    try {
        const r = await client.callTool(params);
        const text = (r.content ?? []).find(c => c.type === 'text');
        results.push({ is_error: Boolean(r.isError), text: text ? text.text : null, structured: r.structuredContent ?? null });
    } catch (e) {
        results.push({ error: { name: e?.name ?? null, code: e?.code ?? null, message: String(e?.message ?? e), data: e?.data ?? null } });
    }
}

const out = {
    protocol_version: client.getNegotiatedProtocolVersion() ?? null,
    era: client.getProtocolEra() ?? null,
    server: client.getServerVersion() ?? null,
    instructions: client.getInstructions() ?? null,
    discover: client.getDiscoverResult() ?? null,
    session: transport.sessionId ?? null,
    tools: listed.tools.map(t => ({ name: t.name, input_schema: t.inputSchema })),
    results,
    asked,
    wire
};
// A session (2025-11-25) is ended with DELETE, as a client done with it does.
if (transport.sessionId) await transport.terminateSession();
out.wire = wire;
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
