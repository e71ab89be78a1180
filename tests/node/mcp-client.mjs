// A real MCP client (the official TypeScript SDK, v1 or v2) driving one server session from a
// plan, for tests/test_mcp_clients.py. Usage: node mcp-client.mjs PLAN.json
//
// PLAN: {"sdk": "v1" | "v2", "era": "legacy" | "modern", "server": {"command", "args", "cwd"}
//        or {"url", "token"}, "answers": ["approve" | "decline-in-form" | "decline" | "cancel"],
//        "roots": ["file:///..."] (omit: no roots capability), "steps": [{"op": "listTools"} |
//        {"op": "callTool", "name", "arguments"} | {"op": "readResource", "uri"} |
//        {"op": "getPrompt", "name"} | {"op": "listPrompts"} | {"op": "listResources"} |
//        {"op": "writeFile", "path", "text"} | {"op": "removeFile", "path"}]}
//        (the file steps change the store between calls, as a person or git would)
//
// Prints one JSON object: {"protocolVersion", "asked": [messages shown], "serverStderr" (what a
// stdio server wrote on stderr), "steps": [{"result"} or {"thrown": {"name", "code",
// "message", "data"}}]}. A step that throws is reported, not fatal: the test decides whether a
// throw (for example the SDK's own output-schema check) is a failure.

import { readFileSync, rmSync, writeFileSync } from 'node:fs';

const plan = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const asked = [];
const answers = [...(plan.answers ?? [])];

function answer(params) {
  asked.push(params.message);
  const next = answers.shift();
  if (next === 'approve') return { action: 'accept', content: { decision: 'approve' } };
  if (next === 'decline-in-form') return { action: 'accept', content: { decision: 'decline' } };
  if (next === 'decline' || next === 'cancel') return { action: next };
  throw new Error(`the test's person has no answer left for: ${params.message.slice(0, 80)}`);
}

const roots = () => ({ roots: (plan.roots ?? []).map((uri) => ({ uri, name: 'project' })) });
const capabilities = { elicitation: { form: {} } };
if (plan.roots) capabilities.roots = {};
const info = { name: `filemem-test-${plan.sdk}`, version: '1.0.0' };
let serverStderr = '';
const stdio = () => ({ ...plan.server, stderr: 'pipe' });
const collect = (transport) => transport.stderr?.on('data', (chunk) => { serverStderr += chunk; });

async function v1Client() {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const types = await import('@modelcontextprotocol/sdk/types.js');
  if (plan.era !== 'legacy') throw new Error('the v1 SDK speaks the handshake era only');
  const client = new Client(info, { capabilities: { ...capabilities, elicitation: {} } });
  client.setRequestHandler(types.ElicitRequestSchema, async (request) => answer(request.params));
  if (plan.roots) client.setRequestHandler(types.ListRootsRequestSchema, async () => roots());
  let transport;
  if (plan.server.url) {
    const { StreamableHTTPClientTransport } = await import(
      '@modelcontextprotocol/sdk/client/streamableHttp.js');
    transport = new StreamableHTTPClientTransport(new URL(plan.server.url), {
      requestInit: { headers: { Authorization: `Bearer ${plan.server.token}` } } });
  } else {
    const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
    transport = new StdioClientTransport(stdio());
    collect(transport);
  }
  let negotiated = null;  // the v1 client keeps no record of it: read it off the wire
  const start = transport.start.bind(transport);
  transport.start = async () => {
    const onmessage = transport.onmessage;
    transport.onmessage = (message, extra) => {
      negotiated ??= message?.result?.protocolVersion ?? null;
      onmessage?.(message, extra);
    };
    return start();
  };
  await client.connect(transport);
  return { client, version: () => negotiated };
}

async function v2Client() {
  const sdk = await import('@modelcontextprotocol/client');
  const mode = plan.era === 'modern' ? { pin: '2026-07-28' } : 'legacy';
  const client = new sdk.Client(info, { capabilities, versionNegotiation: { mode } });
  client.setRequestHandler('elicitation/create', async (request) => answer(request.params));
  if (plan.roots) client.setRequestHandler('roots/list', async () => roots());
  let transport;
  if (plan.server.url) {
    transport = new sdk.StreamableHTTPClientTransport(new URL(plan.server.url), {
      requestInit: { headers: { Authorization: `Bearer ${plan.server.token}` } } });
  } else {
    const { StdioClientTransport } = await import('@modelcontextprotocol/client/stdio');
    transport = new StdioClientTransport(stdio());
    collect(transport);
  }
  await client.connect(transport);
  return { client, version: () => client.getNegotiatedProtocolVersion() ?? null };
}

function thrown(error) {
  return { name: error?.constructor?.name ?? typeof error, code: error?.code ?? null,
           message: String(error?.message ?? error), data: error?.data ?? null };
}

const { client, version } = plan.sdk === 'v1' ? await v1Client() : await v2Client();
const steps = [];
for (const step of plan.steps) {
  try {
    let result;
    if (step.op === 'listTools') result = await client.listTools();
    else if (step.op === 'callTool') {
      result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} });
    } else if (step.op === 'readResource') result = await client.readResource({ uri: step.uri });
    else if (step.op === 'listResources') result = await client.listResources();
    else if (step.op === 'getPrompt') result = await client.getPrompt({ name: step.name });
    else if (step.op === 'listPrompts') result = await client.listPrompts();
    else if (step.op === 'writeFile') result = writeFileSync(step.path, step.text) ?? {};
    else if (step.op === 'removeFile') result = rmSync(step.path) ?? {};
    else throw new Error(`unknown step ${step.op}`);
    steps.push({ result });
  } catch (error) {
    steps.push({ thrown: thrown(error) });
  }
}
const protocolVersion = version();
await client.close();
process.stdout.write(JSON.stringify({ protocolVersion, asked, serverStderr, steps }) + '\n');
