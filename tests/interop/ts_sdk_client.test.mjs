// Interop: the official ACP TypeScript SDK (@agentclientprotocol/sdk, pinned in package.json) as the
// client of `python -m acp_fast demo` over real pipes.
//
// The SDK validates what it receives: requests and notifications from the agent are parsed by its
// zod schemas before our handlers run (a failure is logged through console.error, which this test
// turns into a failure), and every response is parsed here with the SDK's own zod schemas.
// Raw lines in both directions are recorded to check R04/R06: each request gets exactly one
// response and the session/cancel notifications get none. Waiting is on events, never on time.
//
// Run: `node --test` in tests/interop (ACP_FAST_PYTHON names the interpreter; pytest sets it).

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";
import { PYTHON, ROOT, captureConsoleErrors, recordingClient } from "./common.mjs";

// The SDK's own zod schemas (not re-exported by the package entry point, so imported by path).
const z = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/schema/zod.gen.js", import.meta.url).href
);

const LONG = "stream 100000 10"; // far longer than the test runs: only a cancel ends it

/** Records every complete line that passes through, then forwards the bytes unchanged. */
function tap(lines) {
  const decoder = new TextDecoder();
  let partial = "";
  return new TransformStream({
    transform(chunk, controller) {
      partial += decoder.decode(chunk, { stream: true });
      const parts = partial.split("\n");
      partial = parts.pop();
      for (const part of parts) if (part.trim()) lines.push(JSON.parse(part));
      controller.enqueue(chunk);
    },
  });
}

test("TS SDK client walks acp-fast demo: stream, cancel, R07, R10, mode, permission, fs, R06", async () => {
  const errors = captureConsoleErrors();

  const child = spawn(PYTHON, ["-m", "acp_fast", "demo"], { cwd: ROOT, stdio: ["pipe", "pipe", "inherit"] });
  const exited = once(child, "exit");
  const sent = []; // client -> agent, raw
  const received = []; // agent -> client, raw
  const toAgent = tap(sent);
  void toAgent.readable.pipeTo(Writable.toWeb(child.stdin)).catch(() => {});
  const fromAgent = Readable.toWeb(child.stdout).pipeThrough(tap(received));
  const stream = acp.ndJsonStream(toAgent.writable, fromAgent);

  const files = new Map();
  const client = recordingClient("acp-fast-interop");
  const { updates, permissionRequests, seen, texts } = client;
  const app = client.app
    .onRequest(acp.methods.client.fs.writeTextFile, ({ params }) => {
      files.set(params.path, params.content);
      return {};
    })
    .onRequest(acp.methods.client.fs.readTextFile, ({ params }) => ({ content: files.get(params.path) }));

  const sentCount = (method) => sent.filter((m) => m.method === method).length;

  await app.connectWith(stream, async (agent) => {
    const prompt = async (sid, text) =>
      z.zPromptResponse.parse(
        await agent.request(acp.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text }] }),
      );

    const init = z.zInitializeResponse.parse(
      await agent.request(acp.methods.agent.initialize, {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: { fs: { readTextFile: true, writeTextFile: true } },
        clientInfo: { name: "acp-fast-interop", version: "0.0.0" },
      }),
    );
    assert.equal(init.protocolVersion, 1);
    const session = z.zNewSessionResponse.parse(
      await agent.request(acp.methods.agent.session.new, { cwd: ROOT, mcpServers: [] }),
    );
    const sid = session.sessionId;
    assert.ok(session.modes.availableModes.some((m) => m.id === "code"));

    // Streaming prompt: all updates before the response (R05).
    assert.equal((await prompt(sid, "stream 3 0")).stopReason, "end_turn");
    assert.deepEqual(texts(sid).slice(-3), ["chunk 0 ", "chunk 1 ", "chunk 2 "]);

    // Cancel mid-stream, after the first chunk arrived.
    let before = texts(sid).length;
    let running = prompt(sid, LONG);
    await seen.until(() => texts(sid).length > before);
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    assert.equal((await running).stopReason, "cancelled");

    // R07: a second prompt on the busy session is refused at once with -32000 naming the session.
    before = texts(sid).length;
    running = prompt(sid, LONG);
    await seen.until(() => texts(sid).length > before);
    await assert.rejects(prompt(sid, "hello"), (err) => {
      assert.equal(err.code, -32000);
      assert.match(err.message, new RegExp(sid));
      return true;
    });
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    assert.equal((await running).stopReason, "cancelled");

    // R10: cancel written right behind the prompt (the SDK writes in call order).
    running = prompt(sid, LONG);
    await agent.notify(acp.methods.agent.session.cancel, { sessionId: sid });
    assert.equal((await running).stopReason, "cancelled");
    assert.equal(sentCount("session/cancel"), 3);

    // Permission: the demo asks before its tool call; this client allows.
    assert.equal((await prompt(sid, "tool")).stopReason, "end_turn");
    assert.equal(permissionRequests.length, 1);
    const statuses = updates
      .filter((u) => u.sessionId === sid && u.update.sessionUpdate === "tool_call_update")
      .map((u) => u.update.status);
    assert.equal(statuses.at(-1), "completed");

    // fs: write, then read back through this client.
    const path = "/tmp/acp-fast-ts-interop.txt";
    assert.equal((await prompt(sid, `write ${path} hello world`)).stopReason, "end_turn");
    assert.equal(files.get(path), "hello world");
    assert.equal((await prompt(sid, `read ${path}`)).stopReason, "end_turn");
    assert.equal(texts(sid).at(-1), `${path} has 11 characters`);

    // Set mode: answered in order after every cancel above, so it is also the R06 barrier.
    z.zSetSessionModeResponse.parse(
      await agent.request(acp.methods.agent.session.setMode, { sessionId: sid, modeId: "code" }),
    );
    await assert.rejects(
      agent.request(acp.methods.agent.session.setMode, { sessionId: sid, modeId: "no-such-mode" }),
      (err) => err.code === -32602,
    );
  });

  // The SDK closed its side when the workflow ended; the agent must still exit cleanly.
  child.stdin.end();
  const [code] = await exited;
  errors.restore();
  assert.equal(code, 0, "the agent exits cleanly");

  // R04/R06 on the raw lines: one response per request id, none for the notifications.
  const requestIds = sent.filter((m) => "method" in m && "id" in m).map((m) => m.id).sort();
  const responseIds = received.filter((m) => !("method" in m)).map((m) => m.id).sort();
  assert.deepEqual(responseIds, requestIds);
  // Every notification the agent sent passed the SDK's schema and reached the handler.
  assert.equal(received.filter((m) => m.method === "session/update").length, updates.length);
  assert.deepEqual(errors.logged, [], "the SDK reported invalid or unexpected messages");
});
