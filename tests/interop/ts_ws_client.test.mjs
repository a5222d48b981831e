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
import WebSocket from "ws";
import { createWebSocketStream } from "@agentclientprotocol/sdk/experimental/ws-client";
import { captureConsoleErrors, startDemo, walk } from "./common.mjs";

const CLIENTS = 20;

/** `ws.WebSocket` that records the Acp-Connection-Id of each 101 it receives. */
const connectionIds = [];
class RecordingWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    this.on("upgrade", (res) => connectionIds.push(res.headers["acp-connection-id"]));
  }
}

/** `ws.WebSocket` (which offers permessage-deflate by default) that records each 101's extensions. */
const extensionAnswers = [];
class DeflateRecordingWebSocket extends WebSocket {
  constructor(...args) {
    super(...args);
    this.on("upgrade", (res) => extensionAnswers.push(res.headers["sec-websocket-extensions"]));
  }
}

/** The demo listening with `extra` flags, and one client's walk over a `WebSocketClass` socket. */
async function startWsDemo(extra = []) {
  const { child, exited, port } = await startDemo("serving ACP over WebSocket", extra);
  const url = `ws://127.0.0.1:${port}/acp`;
  const walkOne = (WebSocketClass) =>
    walk("acp-fast-ws-interop", createWebSocketStream(url, { WebSocket: WebSocketClass }));
  return { child, exited, walkOne };
}

test("TS SDK WebSocket clients walk acp-fast demo --listen, 20 at once", async () => {
  const errors = captureConsoleErrors();
  const { child, exited, walkOne } = await startWsDemo();
  try {
    await Promise.all(Array.from({ length: CLIENTS }, () => walkOne(RecordingWebSocket)));
    assert.equal(connectionIds.length, CLIENTS);
    assert.equal(new Set(connectionIds).size, CLIENTS, "each 101 carried a distinct Acp-Connection-Id");
    assert.ok(connectionIds.every((id) => typeof id === "string" && id.length > 0));
  } finally {
    child.kill("SIGTERM");
  }
  const [code] = await exited;
  errors.restore();
  assert.equal(code, 0, "the server drains and exits cleanly on SIGTERM");
  assert.deepEqual(errors.logged, [], "the SDK reported invalid or unexpected messages");
});

test("with --ws-deflate the ws client's permessage-deflate offer is agreed and the walk holds", async () => {
  const errors = captureConsoleErrors();
  const { child, exited, walkOne } = await startWsDemo(["--ws-deflate"]);
  try {
    await Promise.all(Array.from({ length: 3 }, () => walkOne(DeflateRecordingWebSocket)));
    assert.equal(extensionAnswers.length, 3);
    for (const answer of extensionAnswers) {
      assert.equal(answer, "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
    }
  } finally {
    child.kill("SIGTERM");
  }
  const [code] = await exited;
  errors.restore();
  assert.equal(code, 0, "the server drains and exits cleanly on SIGTERM");
  assert.deepEqual(errors.logged, [], "the SDK reported invalid or unexpected messages");
});
