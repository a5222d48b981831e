// Interop over Streamable HTTP: the official ACP TypeScript SDK's `createHttpStream` (Node's global
// fetch) as the client of `python -m acp_fast demo --listen 127.0.0.1:PORT`, on the same /acp
// endpoint the WebSocket clients use.
//
// 20 clients at once, each its own ACP connection: initialize (200 with Acp-Connection-Id), the
// connection event stream, session/new, the session's event stream, a streaming prompt, set_mode
// while a prompt runs, cancel mid-stream, a permission round trip (the answer POSTed with
// Acp-Session-Id), a second session on the same connection, then DELETE. Every initialize answer
// must carry a distinct Acp-Connection-Id. The SDK parses what it receives with its zod schemas (a
// failure is logged through console.error, which fails this test). Waiting is on events, never on time.
//
// Run: `node --test ts_http_client.test.mjs` in tests/interop (ACP_FAST_PYTHON names the interpreter).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import * as acp from "@agentclientprotocol/sdk";
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";

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

/** `fetch` that records the Acp-Connection-Id of each initialize answer, and every status seen. */
const connectionIds = [];
const statuses = new Map();
const fetched = signal();
async function recordingFetch(input, init) {
  const response = await fetch(input, init);
  const key = `${init?.method ?? "GET"} ${response.status}`;
  statuses.set(key, (statuses.get(key) ?? 0) + 1);
  if (init?.method === "POST" && response.status === 200) {
    connectionIds.push(response.headers.get("acp-connection-id"));
  }
  fetched.changed();
  return response;
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

async function walk(url) {
  const updates = [];
  const permissionRequests = [];
  const seen = signal();
  const app = acp
    .client({ name: "acp-fast-http-interop" })
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
  const stream = createHttpStream(url, { fetch: recordingFetch });
  await app.connectWith(stream, async (agent) => {
    const prompt = (sid, text) =>
      agent.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text }] });
    const init = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "acp-fast-http-interop", version: "0.0.0" },
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

test("TS SDK Streamable HTTP clients walk acp-fast demo --listen, 20 at once", async () => {
  const logged = [];
  const originalError = console.error;
  console.error = (...args) => {
    logged.push(args);
    originalError(...args);
  };
  const port = await freePort();
  const child = spawn(PYTHON, ["-m", "acp_fast", "demo", "--pace-ms", "1", "--listen", `127.0.0.1:${port}`], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "pipe"],
  });
  const exited = once(child, "exit");
  let stderr = "";
  const listening = new Promise((resolve) => {
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
      if (stderr.includes("serving ACP over WebSocket and Streamable HTTP")) resolve();
    });
  });
  try {
    await listening;
    const url = `http://127.0.0.1:${port}/acp`;
    await Promise.all(Array.from({ length: CLIENTS }, () => walk(url)));
    assert.equal(connectionIds.length, CLIENTS);
    assert.equal(new Set(connectionIds).size, CLIENTS, "each initialize answer carried a distinct Acp-Connection-Id");
    // The SDK sends DELETE when the stream closes, without connectWith waiting for its answer.
    await fetched.until(() => statuses.get("DELETE 202") === CLIENTS);
    assert.equal(statuses.get("GET 200"), CLIENTS * 3, `a connection stream and two session streams each: ${[...statuses]}`);
    assert.ok(connectionIds.every((id) => typeof id === "string" && id.length > 0));
  } finally {
    child.kill("SIGTERM");
  }
  const [code] = await exited;
  console.error = originalError;
  assert.equal(code, 0, "the server drains and exits cleanly on SIGTERM");
  assert.deepEqual(logged, [], "the SDK reported invalid or unexpected messages");
});
