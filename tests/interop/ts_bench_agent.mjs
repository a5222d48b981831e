// The demo agent's benchmark behaviour written on the official ACP TypeScript SDK 2.4.0 and served by
// its experimental `AcpServer` over WebSocket (the `ws` package, no permessage-deflate), for the
// hosting bench (acp_fast/tools/bench/hosting.py, benchmarks/hosting_idle.py --ts).
//
//   node tests/interop/ts_bench_agent.mjs [--port N]
//
// Serves ws://127.0.0.1:PORT/acp. Without --port (or with 0) it takes any free port and prints
// `listening PORT` on stdout once it accepts connections.
// Same wire behaviour as acp_fast/tools/bench/sdk_demo_agent.py: initialize, session/new (modes ask/code, a
// model config option, then an available_commands_update), session/set_mode,
// session/set_config_option, session/cancel and session/prompt with `stream N DELAY_MS` (N
// agent_message_chunk updates, waiting DELAY_MS after each and yielding to the event loop even at 0,
// then end_turn; cancelled when cancelled). Any other prompt gets one short chunk. One agent app per
// connection (`createAgent`), as the other targets build one agent per connection. A cancel sets a
// flag the stream loop checks and cuts short a wait in progress.

import { createServer } from "node:http";
import { WebSocketServer } from "ws";
import * as acp from "@agentclientprotocol/sdk";
import { AcpServer } from "@agentclientprotocol/sdk/experimental/server";
import {
  createNodeHttpHandler,
  createNodeWebSocketUpgradeHandler,
} from "@agentclientprotocol/sdk/experimental/node";

const MODES = [
  { id: "ask", name: "Ask", description: "Answer without touching files" },
  { id: "code", name: "Code", description: "May read and write files" },
];
const MODELS = [
  { value: "demo-small", name: "Demo small" },
  { value: "demo-large", name: "Demo large" },
];
const COMMANDS = [
  { name: "stream", description: "stream N chunks DELAY_MS apart", input: { hint: "N DELAY_MS" } },
  { name: "tool", description: "run a pretend tool after asking permission" },
];

function modelOption(value) {
  return { id: "model", name: "Model", category: "model", type: "select", currentValue: value, options: MODELS };
}

function invalidParams(data) {
  return acp.RequestError.invalidParams(data);
}

/** A wait that a cancel can cut short; 0 ms still yields to the event loop once (setImmediate). */
function pause(ms, running) {
  return new Promise((resolve) => {
    const timer = ms > 0 ? setTimeout(resolve, ms) : setImmediate(resolve);
    running.wake = () => {
      if (ms > 0) clearTimeout(timer);
      else clearImmediate(timer);
      resolve();
    };
  });
}

function createDemoAgent() {
  const sessions = new Set();
  const running = new Map(); // sessionId -> { cancelled, wake }
  let nextSession = 1;

  function known(sessionId) {
    if (!sessions.has(sessionId)) throw invalidParams({ sessionId, reason: "unknown session" });
  }

  async function stream(ctx, sessionId, n, delayMs, state) {
    for (let i = 0; i < n; i++) {
      if (state.cancelled) return;
      await ctx.client.notify(acp.methods.client.session.update, {
        sessionId,
        update: {
          sessionUpdate: "agent_message_chunk",
          content: { type: "text", text: `chunk ${i} ` },
          messageId: "m1",
        },
      });
      await pause(delayMs, state);
    }
  }

  return acp
    .agent({ name: "ts-bench-agent" })
    .onRequest(acp.methods.agent.initialize, () => ({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: { promptCapabilities: { embeddedContext: true } },
      agentInfo: { name: "ts-demo", title: "TS SDK demo agent", version: "0.1.0" },
      authMethods: [],
    }))
    .onRequest(acp.methods.agent.session.new, (ctx) => {
      const sessionId = `demo-${nextSession++}`;
      sessions.add(sessionId);
      setImmediate(() => {
        ctx.client
          .notify(acp.methods.client.session.update, {
            sessionId,
            update: { sessionUpdate: "available_commands_update", availableCommands: COMMANDS },
          })
          .catch(() => undefined); // the client may be gone already
      });
      return {
        sessionId,
        modes: { currentModeId: "ask", availableModes: MODES },
        configOptions: [modelOption("demo-small")],
      };
    })
    .onRequest(acp.methods.agent.session.setMode, ({ params }) => {
      known(params.sessionId);
      if (!MODES.some((m) => m.id === params.modeId)) throw invalidParams({ modeId: params.modeId });
      return {};
    })
    .onRequest(acp.methods.agent.session.setConfigOption, ({ params }) => {
      known(params.sessionId);
      if (params.configId !== "model" || !MODELS.some((m) => m.value === params.value)) {
        throw invalidParams({ configId: params.configId });
      }
      return { configOptions: [modelOption(String(params.value))] };
    })
    .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
      const state = running.get(params.sessionId);
      if (state !== undefined) {
        state.cancelled = true;
        state.wake();
      }
    })
    .onRequest(acp.methods.agent.session.prompt, async (ctx) => {
      const { sessionId, prompt } = ctx.params;
      known(sessionId);
      if (running.has(sessionId)) {
        throw new acp.RequestError(-32000, `a prompt is already running in session '${sessionId}'`);
      }
      const state = { cancelled: false, wake: () => undefined };
      running.set(sessionId, state);
      try {
        const block = prompt.find((b) => b.type === "text");
        const words = block ? block.text.trim().split(/\s+/) : [];
        if (words[0] === "stream" && words.length === 3 && /^\d+$/.test(words[1])) {
          await stream(ctx, sessionId, Number(words[1]), Number(words[2]), state);
        } else {
          await ctx.client.notify(acp.methods.client.session.update, {
            sessionId,
            update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text: "ok" } },
          });
        }
      } finally {
        running.delete(sessionId);
      }
      return { stopReason: state.cancelled ? "cancelled" : "end_turn" };
    });
}

function parsePort(argv) {
  const at = argv.indexOf("--port");
  return at >= 0 ? Number(argv[at + 1]) : 0;
}

const server = new AcpServer({ createAgent: createDemoAgent });
const webSockets = new WebSocketServer({ noServer: true, perMessageDeflate: false });
const upgrade = createNodeWebSocketUpgradeHandler(server, webSockets);
const http = createServer(createNodeHttpHandler(server));
http.on("upgrade", (req, socket, head) => {
  if (new URL(req.url ?? "/", "http://localhost").pathname !== "/acp") {
    socket.destroy();
    return;
  }
  upgrade(req, socket, head);
});
const port = parsePort(process.argv);
http.listen(port, "127.0.0.1", 4096, () => {
  if (port === 0) process.stdout.write(`listening ${http.address().port}\n`);
});
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.once(sig, () => {
    void server.close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 2000).unref();
  });
}
