// An MCP server written with the official TypeScript SDK (@modelcontextprotocol/server 2.x),
// serving streamable HTTP at http://127.0.0.1:<port>/mcp. Prints "PORT <n>" once it listens.
// Used by tests/mcp_typescript.rs as a tool source of an agent definition.
//
//   node server.mjs [--era both|modern|legacy] [--log]
//
// --era both (default): 2026-07-28 requests (those carrying the per-request _meta envelope)
//   are served statelessly by createMcpHandler; 2025-era traffic gets sessions (initialize
//   opens one, Mcp-Session-Id names it), the SDK's sessionful streamable HTTP wiring routed in
//   front of it with isLegacyRequest.
// --era modern: createMcpHandler with `legacy: 'reject'`: 2025-era requests (initialize
//   included) are refused with the unsupported-protocol-version error.
// --era legacy: a 2025-only deployment: every request goes to the sessionful wiring, so a
//   2026-07-28 request (server/discover, or any request without a session) is refused with
//   400, as a server predating 2026-07-28 refuses it.
// --log: one line per HTTP request on stderr (method, JSON-RPC method, MCP headers, status).
//
// Tools: add(a, b) and whoami(note), which reports the request's x-run, x-user and
// mcp-session-id headers and the protocol version the call was made with.

import { randomUUID } from 'node:crypto';
import http from 'node:http';

import {
    createMcpHandler,
    fromJsonSchema,
    isInitializeRequest,
    isLegacyRequest,
    McpServer,
    WebStandardStreamableHTTPServerTransport
} from '@modelcontextprotocol/server';

const args = process.argv.slice(2);
const eraIndex = args.indexOf('--era');
const era = eraIndex >= 0 ? args[eraIndex + 1] : 'both';
const log = args.includes('--log');
if (!['both', 'modern', 'legacy'].includes(era)) {
    console.error(`unknown --era ${era}: both, modern or legacy`);
    process.exit(2);
}

/** A fresh server instance (one per modern request, one per legacy session). */
function makeServer({ era: served }) {
    const server = new McpServer({ name: 'ts-crm', version: '1.0.0' });
    server.registerTool(
        'add',
        {
            description: 'Add two integers.',
            inputSchema: fromJsonSchema({
                type: 'object',
                properties: { a: { type: 'integer' }, b: { type: 'integer' } },
                required: ['a', 'b']
            })
        },
        async ({ a, b }) => {
            const result = { result: a + b };
            return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
        }
    );
    server.registerTool(
        'whoami',
        {
            description: 'Report the run and user headers, the MCP session and the protocol version this call arrived with.',
            inputSchema: fromJsonSchema({ type: 'object', properties: { note: { type: 'string' } }, required: ['note'] })
        },
        async ({ note }, ctx) => {
            const headers = ctx.http?.req?.headers;
            const header = name => headers?.get(name) ?? null;
            // The per-request _meta envelope (2026-07-28 only), its reserved keys as sent.
            const envelope = ctx.mcpReq.envelope ?? {};
            const report = {
                note,
                run: header('x-run'),
                user: header('x-user'),
                session: header('mcp-session-id') ?? ctx.sessionId ?? null,
                // The envelope's version on 2026-07-28; the header's on 2025-era requests.
                protocol_version: envelope['io.modelcontextprotocol/protocolVersion'] ?? header('mcp-protocol-version'),
                protocol_version_header: header('mcp-protocol-version'),
                era: served,
                traceparent: header('traceparent')
            };
            return { content: [{ type: 'text', text: JSON.stringify(report) }], structuredContent: report };
        }
    );
    return server;
}

// 2026-07-28: a fresh instance per request, nothing kept between requests.
const modern = createMcpHandler(makeServer, { legacy: 'reject' });

// 2025-era sessions: a transport (and server instance) per session.
const sessions = new Map();
async function legacy(request) {
    const id = request.headers.get('mcp-session-id');
    if (id) {
        const transport = sessions.get(id);
        if (!transport) return jsonRpcError(404, -32001, 'Session not found');
        return transport.handleRequest(request);
    }
    let body;
    if (request.method === 'POST') {
        try {
            body = await request.clone().json();
        } catch {
            body = undefined;
        }
    }
    if (!isInitializeRequest(body)) return jsonRpcError(400, -32000, 'Bad Request: No valid session ID provided');
    const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: sid => sessions.set(sid, transport),
        onsessionclosed: sid => sessions.delete(sid)
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await makeServer({ era: 'legacy' }).connect(transport);
    return transport.handleRequest(request, { parsedBody: body });
}

function jsonRpcError(status, code, message) {
    return Response.json({ jsonrpc: '2.0', id: null, error: { code, message } }, { status });
}

async function handle(request) {
    if (new URL(request.url).pathname !== '/mcp') return new Response('not found', { status: 404 });
    switch (era) {
        case 'modern':
            return modern.fetch(request);
        case 'legacy':
            return legacy(request);
        default:
            return (await isLegacyRequest(request)) ? legacy(request) : modern.fetch(request);
    }
}

/** node:http in front of the web-standard handlers. */
const listener = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
        for (const v of Array.isArray(value) ? value : [value]) if (v !== undefined) headers.append(name, v);
    }
    const aborted = new AbortController();
    res.on('close', () => aborted.abort());
    const request = new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url}`, {
        method: req.method,
        headers,
        body: req.method === 'GET' || req.method === 'HEAD' || body.length === 0 ? undefined : body,
        signal: aborted.signal
    });
    let response;
    try {
        response = await handle(request);
    } catch (e) {
        console.error('server.mjs: handler failed:', e);
        response = jsonRpcError(500, -32603, String(e?.message ?? e));
    }
    if (log) {
        let method = null;
        try {
            method = JSON.parse(body.toString() || 'null')?.method ?? null;
        } catch {
            /* not JSON */
        }
        const h = name => req.headers[name] ?? '-';
        console.error(
            `server.mjs: ${req.method} ${method ?? '-'} version=${h('mcp-protocol-version')} session=${h('mcp-session-id')} x-run=${h('x-run')} -> ${response.status}`
        );
    }
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
        try {
            for await (const chunk of response.body) res.write(chunk);
        } catch {
            /* the client went away */
        }
    }
    res.end();
});

listener.listen(0, '127.0.0.1', () => {
    process.stdout.write(`PORT ${listener.address().port}\n`);
});
