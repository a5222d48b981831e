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
import { createHttpStream } from "@agentclientprotocol/sdk/experimental/http-client";
import { captureConsoleErrors, signal, startDemo, walk } from "./common.mjs";

const CLIENTS = 20;

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

test("TS SDK Streamable HTTP clients walk acp-fast demo --listen, 20 at once", async () => {
  const errors = captureConsoleErrors();
  const { child, exited, port } = await startDemo("serving ACP over WebSocket and Streamable HTTP");
  try {
    const url = `http://127.0.0.1:${port}/acp`;
    const walkOne = () => walk("acp-fast-http-interop", createHttpStream(url, { fetch: recordingFetch }));
    await Promise.all(Array.from({ length: CLIENTS }, walkOne));
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
  errors.restore();
  assert.equal(code, 0, "the server drains and exits cleanly on SIGTERM");
  assert.deepEqual(errors.logged, [], "the SDK reported invalid or unexpected messages");
});
