// Interop: the kinds of schema 1.25-1.34 between the official TypeScript SDK and `python -m acp_fast demo`
// over real pipes: systemPrompt, notices and plan operations.
//
// Two clients, each as strict as the SDK makes it: one on the SDK's unstable entry point (its zod
// schemas know plan operations, subagents and systemPrompt), which opts in to notices and plans;
// and one on the stable entry point, which cannot opt in to plans and so must be sent the old
// `plan` update. The SDK parses every notification before the handler runs and reports a failure
// through console.error, which these tests turn into a failure.

import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { Readable, Writable } from "node:stream";
import * as stable from "@agentclientprotocol/sdk";
import * as unstable from "@agentclientprotocol/sdk/unstable";
import { PYTHON, ROOT, captureConsoleErrors, signal } from "./common.mjs";

const zu = await import(
  new URL("./node_modules/@agentclientprotocol/sdk/dist/v1/unstable/schema/zod.gen.js", import.meta.url).href
);
const SYSTEM = { mode: "append", content: [{ type: "text", text: "be brief" }] };

/** The demo over stdio with `acp` as the client library; `run(agent, updates, seen)` is the walk. */
async function withDemo(acp, name, run) {
  const errors = captureConsoleErrors();
  const child = spawn(PYTHON, ["-m", "acp_fast", "demo", "--pace-ms", "1"], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const exited = once(child, "exit");
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const updates = [];
  const seen = signal();
  const app = acp.client({ name }).onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
    seen.changed();
  });
  await app.connectWith(stream, (agent) => run(agent, updates, seen));
  child.stdin.end();
  const [code] = await exited;
  errors.restore();
  assert.equal(code, 0, "the agent exits cleanly");
  assert.deepEqual(errors.logged, [], "the SDK reported invalid or unexpected messages");
}

const kinds = (updates, sid) => updates.filter((u) => u.sessionId === sid).map((u) => u.update.sessionUpdate);
const lastText = (updates, sid) =>
  updates.filter((u) => u.sessionId === sid && u.update.sessionUpdate === "agent_message_chunk").at(-1)?.update
    .content.text;

test("unstable TS SDK client: systemPrompt, a notice and plan operations when it opts in", async () => {
  await withDemo(unstable, "acp-fast-current", async (agent, updates, seen) => {
    const init = zu.zInitializeResponse.parse(
      await agent.request(unstable.methods.agent.initialize, {
        protocolVersion: unstable.PROTOCOL_VERSION,
        clientCapabilities: { session: { notices: {} }, plan: {} },
        clientInfo: { name: "acp-fast-current", version: "0.0.0" },
      }),
    );
    assert.deepEqual(init.agentCapabilities.sessionCapabilities.systemPrompt, { mode: { override: {} } });

    const created = zu.zNewSessionResponse.parse(
      await agent.request(unstable.methods.agent.session.new, { cwd: ROOT, mcpServers: [], systemPrompt: SYSTEM }),
    );
    const sid = created.sessionId;
    // The start callback: commands, then a notice that the system prompt was applied.
    await seen.until(() => kinds(updates, sid).includes("notice"));
    const notice = updates.find((u) => u.sessionId === sid && u.update.sessionUpdate === "notice").update;
    assert.equal(notice.title, "System prompt applied");

    const prompt = async (text) =>
      zu.zPromptResponse.parse(
        await agent.request(unstable.methods.agent.session.prompt, { sessionId: sid, prompt: [{ type: "text", text }] }),
      );
    assert.equal((await prompt("system")).stopReason, "end_turn");
    assert.equal(lastText(updates, sid), "system prompt: append, 'be brief'");

    const before = updates.length;
    assert.equal((await prompt("plan")).stopReason, "end_turn");
    const planKinds = updates.slice(before).map((u) => u.update.sessionUpdate);
    assert.deepEqual(planKinds, [
      "plan_update",
      "plan_update",
      "plan_update",
      "plan_removed",
      "notice",
      "agent_message_chunk",
    ]);
    const last = updates.slice(before).filter((u) => u.update.sessionUpdate === "plan_update").at(-1).update;
    assert.ok(last.plan.entries.every((e) => e.status === "completed"));

    // A mode the demo does not apply, and a system prompt that is not an object: -32602, serving goes on.
    await assert.rejects(
      agent.request(unstable.methods.agent.session.new, {
        cwd: ROOT,
        mcpServers: [],
        systemPrompt: { mode: "_sideways", content: SYSTEM.content },
      }),
      (err) => err.code === -32602,
    );
    zu.zNewSessionResponse.parse(await agent.request(unstable.methods.agent.session.new, { cwd: ROOT, mcpServers: [] }));
  });
});

test("stable TS SDK client: no opt-in, so the whole-plan update and no notice", async () => {
  await withDemo(stable, "acp-fast-stable", async (agent, updates) => {
    await agent.request(stable.methods.agent.initialize, {
      protocolVersion: stable.PROTOCOL_VERSION,
      clientCapabilities: {},
      clientInfo: { name: "acp-fast-stable", version: "0.0.0" },
    });
    const sid = (await agent.request(stable.methods.agent.session.new, { cwd: ROOT, mcpServers: [] })).sessionId;
    const before = updates.length;
    const answer = await agent.request(stable.methods.agent.session.prompt, {
      sessionId: sid,
      prompt: [{ type: "text", text: "plan" }],
    });
    assert.equal(answer.stopReason, "end_turn");
    const got = updates.slice(before).map((u) => u.update.sessionUpdate);
    assert.ok(got.includes("plan") && !got.includes("plan_update") && !got.includes("notice"), got.join(","));
  });
});
