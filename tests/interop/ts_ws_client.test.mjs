// Interop over WebSocket: the official ACP TypeScript SDK's `createWebSocketStream` (with the `ws`
// package) as the client of `python -m acp_fast demo --listen 127.0.0.1:PORT`.
//
// 20 clients at once, each on its own socket: initialize, session/new, a streaming prompt, set_mode
// while a prompt runs, cancel mid-stream, a permission round trip, a second session on the same
// connection. Every 101 must carry a distinct Acp-Connection-Id. The SDK parses what it receives
// with its zod schemas (a failure is logged through console.error, which fails this test).
// Waiting is on events, never on time.
//
// Run: `node --test ts_ws_client.test.mjs` in tests/interop (ACP_FAST_PYTHON names the interpreter).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import * as acp from "@agentclientprotocol/sdk";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const PYTHON = process.env.ACP_FAST_PYTHON || "python";
const LONG = "stream 100000 5"; // only a cancel ends it
const CLIENTS = 20;

async function freePort() {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  await once(server, "close");
  return port;
}

/** `ws.WebSocket` that records the Acp-Connection-Id of each 101 it receives. */
const connectionIds = [];
class RecordingWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    this.on("upgrade", (res) => connectionIds.push(res.headers["acp-connection-id"]));
  }
}

function signal() {
  let waiters = [];
  return {
    changed() {
      const ready = waiters;
      waiters = [];
      for (const wake of ready) wake();
    },
    async until(predicate) {
      while (!predicate()) await new Promise((resolve) => waiters.push(resolve));
    },
  };
}

/** `ws.WebSocket` (which offers permessage-deflate by default) that records each 101's extensions. */
const extensionAnswers = [];
class DeflateRecordingWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    this.on("upgrade", (res) => extensionAnswers.push(res.headers["sec-websocket-extensions"]));
  }
}

async function walk(url, WebSocketClass = RecordingWebSocket) {
  const updates = [];
  const permissionRequests = [];
  const seen = signal();
  const app = acp
    .client({ name: "acp-fast-ws-interop" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params);
      seen.changed();
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      permissionRequests.push(params);
      const allow = params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: allow.optionId } };
    });
  const texts = (sid) =>
    updates
      .filter((u) => u.sessionId === sid && u.update.sessionUpdate === "agent_message_chunk")
      .map((u) => u.update.content.text);
  const stream = createWebSocketStream(url, { WebSocket: WebSocketClass });
  await app.connectWith(stream, async (agent) => {
    const prompt = (sid, text) =>
      agent.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text }] });
    const init = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "acp-fast-ws-interop", version: "0.0.0" },
    });
    assert.equal(init.protocolVersion, 1);
    const sid = (await agent.request(acp.methods.agent.session.new, { cwd: ROOT, mcpServers: [] })).sessionId;

    assert.equal((await prompt(sid, "stream 3 0")).stopReason, "end_turn");
    assert.deepEqual(texts(sid).slice(-3), ["chunk 0 ", "chunk 1 ", "chunk 2 "]);

    const before = texts(sid).length;
    let finished = false;
    const running = prompt(sid, LONG).then((r) => {
      finished = true;
      return r;
    });
    await seen.until(() => texts(sid).length > before);
    await agent.request(acp.methods.agent.session.setMode, { sessionId: sid, modeId: "code" });
    assert.equal(finished, false, "set_mode was answered while the prompt ran");
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    assert.equal((await running).stopReason, "cancelled");

    assert.equal((await prompt(sid, "tool")).stopReason, "end_turn");
    assert.equal(permissionRequests.length, 1);

    const sid2 = (await agent.request(acp.methods.agent.session.new, { cwd: ROOT, mcpServers: [] })).sessionId;
    assert.notEqual(sid2, sid);
    assert.equal((await prompt(sid2, "stream 2 0")).stopReason, "end_turn");
  });
}

/** `acp-fast demo --listen` on a free port with `extra` flags; resolves once it listens. */
async function startDemo(extra = []) {
  const port = await freePort();
  const args = ["-m", "acp_fast", "demo", "--pace-ms", "1", "--listen", `127.0.0.1:${port}`, ...extra];
  const child = spawn(PYTHON, args, { cwd: ROOT, stdio: ["ignore", "inherit", "pipe"] });
  const exited = once(child, "exit");
  let stderr = "";
  await new Promise((resolve) => {
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
      if (stderr.includes("serving ACP over WebSocket")) resolve();
    });
  });
  return { child, exited, url: `ws://127.0.0.1:${port}/acp` };
}

test("TS SDK WebSocket clients walk acp-fast demo --listen, 20 at once", async () => {
  const logged = [];
  const originalError = console.error;
  console.error = (...args) => {
    logged.push(args);
    originalError(...args);
  };
  const { child, exited, url } = await startDemo();
  try {
    await Promise.all(Array.from({ length: CLIENTS }, () => walk(url)));
    assert.equal(connectionIds.length, CLIENTS);
    assert.equal(new Set(connectionIds).size, CLIENTS, "each 101 carried a distinct Acp-Connection-Id");
    assert.ok(connectionIds.every((id) => typeof id === "string" && id.length > 0));
  } finally {
    child.kill("SIGTERM");
  }
  const [code] = await exited;
  console.error = originalError;
  assert.equal(code, 0, "the server drains and exits cleanly on SIGTERM");
  assert.deepEqual(logged, [], "the SDK reported invalid or unexpected messages");
});

test("with --ws-deflate the ws client's permessage-deflate offer is agreed and the walk holds", async () => {
  const logged = [];
  const originalError = console.error;
  console.error = (...args) => {
    logged.push(args);
    originalError(...args);
  };
  const { child, exited, url } = await startDemo(["--ws-deflate"]);
  try {
    await Promise.all(Array.from({ length: 3 }, () => walk(url, DeflateRecordingWebSocket)));
    assert.equal(extensionAnswers.length, 3);
    for (const answer of extensionAnswers) {
      assert.equal(answer, "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
    }
  } finally {
    child.kill("SIGTERM");
  }
  const [code] = await exited;
  console.error = originalError;
  assert.equal(code, 0, "the server drains and exits cleanly on SIGTERM");
  assert.deepEqual(logged, [], "the SDK reported invalid or unexpected messages");
});
