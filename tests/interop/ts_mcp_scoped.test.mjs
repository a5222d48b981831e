// Interop, R17: the TypeScript SDK's own MCP-over-ACP binding (McpOverAcpProvider, McpOverAcpCaller:
// the request-scoped `mcp/message {serverId, requestId}` of schema 1.24) against acp-fast over real pipes.
//
// The agent is tests/test_r17_mcp_scoped.py:E2EAgent: it hosts server "tools" and, for a prompt
// "SERVER METHOD", calls that server of the client's with `self.client.mcp_request`, then reports
// what it got (outcome and scoped notifications) as one message chunk.
//
// Run: `node --test` in tests/interop (ACP_FAST_PYTHON names the interpreter; pytest sets it).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk/unstable"; // the MCP-over-ACP binding is unstable
import { PYTHON, ROOT, captureConsoleErrors, signal } from "./common.mjs";

test("R17: TS McpOverAcpProvider serves acp-fast's calls; TS McpOverAcpCaller calls acp-fast's server", async () => {
  const errors = captureConsoleErrors();
  const child = spawn(PYTHON, ["-m", "acp_fast", "serve", "tests.test_r17_mcp_scoped:E2EAgent"], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "inherit"],
    env: { ...process.env, PYTHONPATH: `${ROOT}/tests` }, // the agent's module imports the schema oracle
  });
  const exited = once(child, "exit");
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

  const provider = new acp.McpOverAcpProvider();
  const caller = new acp.McpOverAcpCaller({ clientInfo: { name: "ts-interop", version: "0" } });
  const handled = [];
  const scopedNotes = [];
  const noted = signal();
  const texts = [];
  const app = acp
    .client({ name: "acp-fast-mcp-interop" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      if (params.update.sessionUpdate === "agent_message_chunk") texts.push(params.update.content.text);
    })
    .onRequest(acp.methods.client.mcp.message, provider.handleRequest)
    // In the schema only agents receive scoped notifications, so a calling client wires them itself.
    // The SDK runs notification handlers through an async chain while a response settles its request
    // at once, so McpOverAcpCaller may see the progress after the request ended and drop it (its
    // documented behaviour for late ones); they are recorded here instead. The wire order (the
    // notification first) is checked by tests/test_r17_mcp_scoped.py over pipes.
    .onNotification("mcp/message", (params) => params, ({ params }) => {
      scopedNotes.push(params);
      noted.changed();
    });

  await app.connectWith(stream, async (agent) => {
    await agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    const tools = provider.registerServer(agent, {
      name: "client-tools",
      handler: async (ctx) => {
        handled.push([ctx.method, ctx.protocolVersion]);
        await ctx.notify("notifications/progress", { progress: 1 });
        if (ctx.method === "fail") throw new acp.McpProtocolError(-32601, "no such tool");
        return { result: { content: [{ type: "text", text: `from TS: ${ctx.params.x}` }] } };
      },
    });
    const { sessionId } = await agent.request(acp.methods.agent.session.new, {
      cwd: ROOT,
      mcpServers: [tools.declaration],
    });

    // acp-fast as the MCP client, the TS SDK as the provider.
    const prompt = { sessionId, prompt: [{ type: "text", text: `${tools.serverId} tools/call` },
                                         { type: "text", text: `${tools.serverId} fail` }] };
    assert.equal((await agent.request(acp.methods.agent.session.prompt, prompt)).stopReason, "end_turn");
    assert.deepEqual(handled, [["tools/call", "2026-07-28"], ["fail", "2026-07-28"]]);
    const report = texts.at(-1);
    assert.match(report, /\('result', \{'content': \[\{'type': 'text', 'text': 'from TS: 1'\}\]\}\)/);
    assert.match(report, /\('McpError', -32601, 'no such tool'\)/);
    assert.match(report, /\('notifications\/progress', \{'progress': 1\}\)/);

    // acp-fast as the provider, the TS SDK as the caller.
    const outcome = await caller.request(agent, "tools", "tools/call", { name: "echo", arguments: { text: "hi" } }, {
      requestId: "ts-1",
    });
    assert.deepEqual(outcome, { result: { content: [{ type: "text", text: "hi" }] } });
    await noted.until(() => scopedNotes.length === 1);
    assert.deepEqual(scopedNotes, [
      { serverId: "tools", requestId: "ts-1", method: "notifications/progress", params: { progress: 1 } },
    ]);
    const inner = await caller.request(agent, "tools", "fail", {});
    assert.deepEqual(inner, { error: { code: -32042, message: "inner failure", data: { why: "test" } } });
    await assert.rejects(caller.request(agent, "nope", "tools/list", {}), (err) => err.code === -33001);
  });

  child.stdin.end();
  const [code] = await exited;
  assert.equal(code, 0);
  errors.restore();
  assert.deepEqual(errors.logged, [], "the SDK rejected something acp-fast sent");
});
