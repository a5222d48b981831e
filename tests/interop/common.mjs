// What the TypeScript interop tests share: where the checkout and its Python are, an event-driven
// waiter, console.error capture (the SDK logs what its zod schemas reject there), `acp-fast demo
// --listen` on a free port, and the walk every network client takes. Not a test file itself.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import * as acp from "@agentclientprotocol/sdk";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const PYTHON = process.env.ACP_FAST_PYTHON || "python";
const LONG = "stream 100000 5"; // only a cancel ends it

/** A tiny event-driven waiter: `changed()` after each observation, `until(pred)` resolves once true. */
export function signal() {
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

/** Record every console.error call (still printed) until `restore()`; `logged` must stay empty. */
export function captureConsoleErrors() {
  const logged = [];
  const originalError = console.error;
  console.error = (...args) => {
    logged.push(args);
    originalError(...args);
  };
  return { logged, restore: () => (console.error = originalError) };
}

async function freePort() {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address();
  server.close();
  await once(server, "close");
  return port;
}

/** `acp-fast demo --listen` on a free port with `extra` flags; resolves once its stderr says `ready`. */
export async function startDemo(ready, extra = []) {
  const port = await freePort();
  const args = ["-m", "acp_fast", "demo", "--pace-ms", "1", "--listen", `127.0.0.1:${port}`, ...extra];
  const child = spawn(PYTHON, args, { cwd: ROOT, stdio: ["ignore", "inherit", "pipe"] });
  const exited = once(child, "exit");
  let stderr = "";
  await new Promise((resolve) => {
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
      if (stderr.includes(ready)) resolve();
    });
  });
  return { child, exited, port };
}

/**
 * A client app that records the session updates it receives and allows every permission request;
 * `texts(sid)` is the agent_message_chunk texts of one session, `seen` changes after each update.
 */
export function recordingClient(name) {
  const updates = [];
  const permissionRequests = [];
  const seen = signal();
  const app = acp
    .client({ name })
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
  return { app, updates, permissionRequests, seen, texts };
}

/**
 * One client's walk over `stream`: initialize, session/new, a streaming prompt, set_mode while a
 * prompt runs, cancel mid-stream, a permission round trip, a second session on the same connection.
 */
export async function walk(name, stream) {
  const { app, permissionRequests, seen, texts } = recordingClient(name);
  await app.connectWith(stream, async (agent) => {
    const prompt = (sid, text) =>
      agent.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text }] });
    const init = await agent.request(acp.methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name, version: "0.0.0" },
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
