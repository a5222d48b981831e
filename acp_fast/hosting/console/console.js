// The acp_fast web console: an ACP client in one plain script, no framework, no build step.
//
// It talks to the host that served it, at /acp, over WebSocket or Streamable HTTP, like any
// other client: the same Origin rule, auth hook and limits apply. What the agent sends is shown
// with textContent only (never parsed as HTML). A token, when the server asks for one, lives in
// this tab's memory and nowhere else; it goes in Authorization over Streamable HTTP and, since a
// browser cannot set that header on a WebSocket, as the subprotocol acp.bearer.<base64url(token)>
// beside acp (the server selects acp and never echoes the other).
"use strict";

(() => {
  const PROTOCOL_VERSION = 1;
  const ENDPOINT = "/acp";
  const SUBPROTOCOL = "acp";
  const BEARER_PREFIX = "acp.bearer.";
  const $ = (id) => document.getElementById(id);
  const ui = {
    transport: $("transport"),
    cwd: $("cwd"),
    connectForm: $("connect-form"),
    connect: $("connect"),
    disconnect: $("disconnect"),
    tokenForm: $("token-form"),
    token: $("token"),
    newSession: $("new-session"),
    refreshSessions: $("refresh-sessions"),
    sessionsNote: $("sessions-note"),
    sessions: $("sessions"),
    stream: $("stream"),
    permissions: $("permissions"),
    promptForm: $("prompt-form"),
    prompt: $("prompt"),
    send: $("send"),
    cancel: $("cancel"),
    cancelTime: $("cancel-time"),
    commands: $("commands"),
    status: $("status"),
    version: $("version"),
  };

  let client = null; // the live connection, or null
  let token = null; // asked for after a 401; memory only

  // -- the status line and the stream ------------------------------------------------------------
  function setStatus(text, isError = false) {
    ui.status.textContent = text;
    ui.status.classList.toggle("error", isError);
  }

  let openBlock = null; // the block streamed chunks of one kind append to

  function atBottom() {
    const s = ui.stream;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 40;
  }

  function addBlock(kind, text) {
    const follow = atBottom();
    const el = document.createElement("div");
    el.className = kind;
    el.textContent = text;
    ui.stream.append(el);
    if (follow) ui.stream.scrollTop = ui.stream.scrollHeight;
    return el;
  }

  function line(kind, text) {
    openBlock = null;
    return addBlock(kind, text);
  }

  function chunk(kind, text) {
    if (openBlock === null || openBlock.kind !== kind) {
      openBlock = { kind, el: addBlock(kind, "") };
    }
    const follow = atBottom();
    openBlock.el.textContent += text;
    if (follow) ui.stream.scrollTop = ui.stream.scrollHeight;
  }

  function short(text, max = 100) {
    const flat = String(text).replace(/\s+/g, " ").trim();
    return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
  }

  function blockText(block) {
    if (!block || typeof block !== "object") return "";
    switch (block.type) {
      case "text":
        return typeof block.text === "string" ? block.text : "";
      case "resource_link":
        return `[${block.name || block.uri}]`;
      case "resource":
        return `[${(block.resource && block.resource.uri) || "resource"}]`;
      default:
        return `[${block.type}]`;
    }
  }

  // -- transports: post(message, sessionId) and incoming text to handlers.message ---------------------
  // Unpadded base64url (RFC 4648 §5) of the token's UTF-8 bytes: what a subprotocol name may hold.
  function base64url(text) {
    let binary = "";
    for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  class HttpError extends Error {
    constructor(status, text) {
      super(`HTTP ${status}${text ? `: ${short(text, 160)}` : ""}`);
      this.status = status;
    }
  }

  class WsTransport {
    constructor(handlers, token) {
      this.handlers = handlers;
      this.label = "WebSocket";
      this.ws = null;
      this.token = token;
    }

    open() {
      const scheme = location.protocol === "https:" ? "wss:" : "ws:";
      const url = `${scheme}//${location.host}${ENDPOINT}`;
      const protocols = this.token ? [SUBPROTOCOL, BEARER_PREFIX + base64url(this.token)] : [SUBPROTOCOL];
      return new Promise((resolve, reject) => {
        const ws = new WebSocket(url, protocols);
        let opened = false;
        ws.onopen = () => {
          opened = true;
          this.ws = ws;
          resolve();
        };
        ws.onmessage = (event) => {
          if (typeof event.data === "string") this.handlers.message(event.data);
        };
        ws.onclose = (event) => {
          if (!opened) {
            reject(new Error("the WebSocket upgrade was refused (is this page's origin allowed? see the server log)"));
          } else {
            this.handlers.closed(`WebSocket closed ${event.code}${event.reason ? ` (${event.reason})` : ""}`);
          }
        };
      });
    }

    async post(message) {
      if (!this.ws || this.ws.readyState !== WebSocket.OPEN) throw new Error("the WebSocket is not open");
      this.ws.send(JSON.stringify(message));
    }

    watchSession() {} // one socket carries every session

    close() {
      if (this.ws) this.ws.close(1000);
    }
  }

  class HttpTransport {
    constructor(handlers, bearer) {
      this.handlers = handlers;
      this.label = "Streamable HTTP";
      this.bearer = bearer;
      this.connectionId = null;
      this.connectionStream = null;
      this.sessionStream = null;
      this.ended = false;
    }

    async open() {} // the initialize POST opens the connection

    headers(sessionId, extra) {
      const headers = { ...extra };
      if (this.bearer) headers.Authorization = `Bearer ${this.bearer}`;
      if (this.connectionId) headers["Acp-Connection-Id"] = this.connectionId;
      if (sessionId) headers["Acp-Session-Id"] = sessionId;
      return headers;
    }

    async post(message, sessionId) {
      const response = await fetch(ENDPOINT, {
        method: "POST",
        headers: this.headers(sessionId, { "Content-Type": "application/json" }),
        body: JSON.stringify(message),
        cache: "no-store",
      });
      if (response.status === 202) return;
      const text = await response.text();
      if (response.status !== 200) throw new HttpError(response.status, text);
      if (message.method === "initialize") {
        const id = response.headers.get("Acp-Connection-Id");
        if (id) {
          this.connectionId = id;
          this.connectionStream = this.openStream(null);
        }
      }
      if (text) this.handlers.message(text);
    }

    // A GET event stream: the connection's (sessionId null) or one session's.
    openStream(sessionId) {
      const controller = new AbortController();
      const stream = { sessionId, controller };
      const ended = (why) => {
        if (controller.signal.aborted || this.ended) return;
        if (sessionId === null) {
          this.ended = true;
          this.handlers.closed(`the connection ended (${why})`);
        } else {
          this.handlers.note(`the event stream of ${sessionId} ended (${why})`);
        }
      };
      (async () => {
        let response;
        try {
          response = await fetch(ENDPOINT, {
            headers: this.headers(sessionId, { Accept: "text/event-stream" }),
            signal: controller.signal,
            cache: "no-store",
          });
        } catch (err) {
          ended(String(err));
          return;
        }
        if (!response.ok || !response.body) {
          ended(`HTTP ${response.status}`);
          return;
        }
        const reader = response.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buffer += decoder.decode(value, { stream: true });
            let cut;
            while ((cut = buffer.indexOf("\n\n")) >= 0) {
              this.event(buffer.slice(0, cut));
              buffer = buffer.slice(cut + 2);
            }
          }
        } catch (err) {
          ended(String(err));
          return;
        }
        ended("closed by the server");
      })();
      return stream;
    }

    event(text) {
      const data = [];
      for (const raw of text.split("\n")) {
        const row = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
        if (row.startsWith("data:")) data.push(row.slice(row.startsWith("data: ") ? 6 : 5));
      }
      if (data.length) this.handlers.message(data.join("\n"));
    }

    // Keep one session stream open (a browser allows few connections per host on HTTP/1.1).
    watchSession(sessionId) {
      if (this.sessionStream && this.sessionStream.sessionId === sessionId) return;
      if (this.sessionStream) this.sessionStream.controller.abort();
      this.sessionStream = this.openStream(sessionId);
    }

    close() {
      const id = this.connectionId;
      this.ended = true;
      for (const stream of [this.connectionStream, this.sessionStream]) {
        if (stream) stream.controller.abort();
      }
      if (id) {
        fetch(ENDPOINT, { method: "DELETE", headers: this.headers(null, {}), keepalive: true }).catch(() => {});
      }
    }
  }

  // -- JSON-RPC over either transport ---------------------------------------------------------------------
  class RpcError extends Error {
    constructor(error) {
      super(`${error.code}: ${error.message}`);
      this.code = error.code;
    }
  }

  class Client {
    constructor(kind) {
      const handlers = {
        message: (text) => this.receive(text),
        closed: (why) => this.closed(why),
        note: (text) => line("info", text),
      };
      this.transport = kind === "http" ? new HttpTransport(handlers, token) : new WsTransport(handlers, token);
      this.nextId = 1;
      this.pending = new Map();
      this.capabilities = {};
      this.agentInfo = {};
      this.sessionId = null;
      this.turn = null; // {started, cancelledAt}
      this.permissions = new Map(); // request id -> {element, sessionId}
      this.tools = new Map(); // toolCallId -> title
      this.done = false;
    }

    // Over Streamable HTTP a message naming a session travels with that session's id in a header.
    request(method, params) {
      const id = this.nextId++;
      return new Promise((resolve, reject) => {
        this.pending.set(id, { resolve, reject });
        this.transport.post({ jsonrpc: "2.0", id, method, params }, params.sessionId).catch((err) => {
          this.pending.delete(id);
          reject(err);
        });
      });
    }

    notify(method, params) {
      return this.transport.post({ jsonrpc: "2.0", method, params }, params.sessionId);
    }

    receive(text) {
      let message;
      try {
        message = JSON.parse(text);
      } catch {
        line("error", `not JSON: ${short(text)}`);
        return;
      }
      if (!message || typeof message !== "object") return;
      if (message.method === undefined) {
        const waiter = this.pending.get(message.id);
        if (!waiter) return;
        this.pending.delete(message.id);
        if (message.error) waiter.reject(new RpcError(message.error));
        else waiter.resolve(message.result);
        return;
      }
      const params = message.params || {};
      if (message.method === "session/update") {
        if (params.sessionId === this.sessionId) renderUpdate(this, params.update || {});
        return;
      }
      if (message.method === "session/request_permission" && message.id !== undefined) {
        showPermission(this, message.id, params);
        return;
      }
      if (message.id !== undefined) {
        const error = { code: -32601, message: `Method not found: ${message.method}` };
        this.transport.post({ jsonrpc: "2.0", id: message.id, error }, params.sessionId).catch(() => {});
      }
    }

    answerPermission(id, outcome, label) {
      const entry = this.permissions.get(id);
      if (!entry) return;
      this.permissions.delete(id);
      entry.element.remove();
      line("tool", `  permission: ${label}`);
      this.transport.post({ jsonrpc: "2.0", id, result: { outcome } }, entry.sessionId).catch((err) => {
        line("error", `could not answer the permission request: ${err.message}`);
      });
    }

    closed(why) {
      if (this.done) return;
      this.done = true;
      for (const waiter of this.pending.values()) waiter.reject(new Error(why));
      this.pending.clear();
      if (client === this) {
        client = null;
        setConnected(false);
        setStatus(`disconnected: ${why}`, true);
      }
    }

    close() {
      this.closed("closed by you");
      this.transport.close();
    }
  }

  // -- what the agent streams --------------------------------------------------------------------------------
  const PLAN_MARKS = { pending: "[ ]", in_progress: "[~]", completed: "[x]" };

  function planLine(entries) {
    const parts = (entries || []).map((e) => `${PLAN_MARKS[e.status] || "[?]"} ${short(e.content, 60)}`);
    return `plan: ${parts.join("  ")}`;
  }

  function toolContent(content) {
    const texts = [];
    for (const item of content || []) {
      if (item.type === "content") texts.push(blockText(item.content));
      else if (item.type === "diff") texts.push(`diff ${item.path}`);
      else if (item.type === "terminal") texts.push(`terminal ${item.terminalId}`);
    }
    return short(texts.join(" | "), 80);
  }

  function renderUpdate(c, update) {
    switch (update.sessionUpdate) {
      case "agent_message_chunk":
        chunk("agent", blockText(update.content));
        break;
      case "agent_thought_chunk":
        chunk("thought", blockText(update.content));
        break;
      case "user_message_chunk":
        chunk("user", blockText(update.content));
        break;
      case "tool_call": {
        c.tools.set(update.toolCallId, update.title);
        const kind = update.kind ? ` (${update.kind})` : "";
        line("tool", `tool: ${short(update.title, 70)}${kind} · ${update.status || "pending"}`);
        break;
      }
      case "tool_call_update": {
        if (update.title) c.tools.set(update.toolCallId, update.title);
        const title = c.tools.get(update.toolCallId) || update.toolCallId;
        const output = update.content ? toolContent(update.content) : "";
        line("tool", `tool: ${short(title, 70)} · ${update.status || "updated"}${output ? `: ${output}` : ""}`);
        break;
      }
      case "plan":
        line("plan", planLine(update.entries));
        break;
      case "plan_update": {
        const plan = update.plan || {};
        line("plan", plan.type === "items" ? planLine(plan.entries) : `plan ${plan.planId}: ${plan.type}`);
        break;
      }
      case "plan_removed":
        line("plan", `plan ${update.planId} removed`);
        break;
      case "available_commands_update": {
        const names = (update.availableCommands || []).map((cmd) => cmd.name);
        ui.commands.textContent = names.length ? `commands: ${names.join(", ")}` : "";
        break;
      }
      case "current_mode_update":
        line("info", `mode: ${update.currentModeId}`);
        break;
      case "session_info_update":
        if (update.title) line("info", `title: ${short(update.title, 80)}`);
        break;
      case "usage_update":
        setStatus(`${statusBase(c)} · context ${update.used}/${update.size}`);
        break;
      case "notice":
        line("info", `${update.severity || "info"}: ${short(update.title, 80)}`);
        break;
      case "config_option_update":
        break;
      default:
        line("info", `update: ${short(update.sessionUpdate, 40)}`);
    }
  }

  function showPermission(c, id, params) {
    const box = document.createElement("div");
    box.className = "permission";
    const title = (params.toolCall && (params.toolCall.title || c.tools.get(params.toolCall.toolCallId))) || "a tool";
    const label = document.createElement("span");
    label.textContent = `Permission: ${short(title, 80)}`;
    box.append(label);
    for (const option of params.options || []) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = option.name;
      button.dataset.optionId = option.optionId;
      button.className = String(option.kind || "").startsWith("allow") ? "allow" : "reject";
      button.addEventListener("click", () => {
        c.answerPermission(id, { outcome: "selected", optionId: option.optionId }, option.name);
      });
      box.append(button);
    }
    ui.permissions.append(box);
    c.permissions.set(id, { element: box, sessionId: params.sessionId });
    line("tool", `  permission asked: ${short(title, 70)}`);
    const first = box.querySelector("button");
    if (first) first.focus();
  }

  // -- sessions ------------------------------------------------------------------------------------------------
  function statusBase(c) {
    const agent = c.agentInfo.title || c.agentInfo.name || "agent";
    const session = c.sessionId ? ` · session ${c.sessionId}` : "";
    return `connected · ${c.transport.label} · ${agent}${session}`;
  }

  function canList(c) {
    return Boolean(c.capabilities.sessionCapabilities && c.capabilities.sessionCapabilities.list);
  }

  function canLoad(c) {
    return c.capabilities.loadSession === true;
  }

  async function refreshSessions(c) {
    if (!canList(c)) {
      ui.sessionsNote.textContent = "the agent does not list sessions";
      return;
    }
    let result;
    try {
      result = await c.request("session/list", {});
    } catch (err) {
      ui.sessionsNote.textContent = `session/list failed: ${err.message}`;
      return;
    }
    if (client !== c) return;
    const sessions = result.sessions || [];
    ui.sessions.replaceChildren();
    ui.sessionsNote.textContent = sessions.length ? `${sessions.length} session(s)` : "no sessions yet";
    for (const info of sessions) {
      const item = document.createElement("li");
      item.dataset.sessionId = info.sessionId;
      if (info.sessionId === c.sessionId) item.className = "current";
      const name = document.createElement("span");
      name.className = "title";
      name.textContent = info.title && info.title !== info.sessionId ? info.title : info.sessionId;
      name.title = `${info.sessionId}\n${info.cwd || ""}`;
      item.append(name);
      if (canLoad(c) && info.sessionId !== c.sessionId) {
        const load = document.createElement("button");
        load.type = "button";
        load.textContent = "Load";
        load.className = "load";
        load.disabled = c.turn !== null;
        load.addEventListener("click", () => loadSession(c, info));
        item.append(load);
      }
      ui.sessions.append(item);
    }
  }

  function enterSession(c, sessionId) {
    c.sessionId = sessionId;
    c.tools.clear();
    ui.stream.replaceChildren();
    openBlock = null;
    ui.commands.textContent = "";
    ui.cancelTime.textContent = "";
    c.transport.watchSession(sessionId);
  }

  async function newSession(c) {
    const result = await c.request("session/new", { cwd: ui.cwd.value || "/", mcpServers: [] });
    if (client !== c) return;
    enterSession(c, result.sessionId);
    line("info", `new session ${result.sessionId}`);
    setStatus(statusBase(c));
    setPromptEnabled(true);
    await refreshSessions(c);
  }

  async function loadSession(c, info) {
    if (c.turn !== null) return;
    setPromptEnabled(false);
    enterSession(c, info.sessionId); // before the request: the replay arrives before its answer
    line("info", `loading ${info.sessionId}`);
    try {
      await c.request("session/load", { sessionId: info.sessionId, cwd: info.cwd || ui.cwd.value || "/", mcpServers: [] });
      line("info", `loaded ${info.sessionId}`);
    } catch (err) {
      line("error", `session/load failed: ${err.message}`);
    }
    if (client !== c) return;
    setStatus(statusBase(c));
    setPromptEnabled(true);
    await refreshSessions(c);
  }

  // -- a turn ------------------------------------------------------------------------------------------------------
  async function sendPrompt(c, text) {
    const sessionId = c.sessionId;
    line("user", `> ${text}`);
    c.turn = { started: performance.now(), cancelledAt: null };
    ui.cancelTime.textContent = "";
    setTurnRunning(true);
    setStatus(`${statusBase(c)} · turn running`);
    try {
      const result = await c.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
      const stop = (result && result.stopReason) || "?";
      const now = performance.now();
      if (c.turn.cancelledAt !== null) {
        const ms = (now - c.turn.cancelledAt).toFixed(1);
        line("stop", `■ ${stop} · answered ${ms} ms after Cancel`);
        ui.cancelTime.textContent = `${stop} in ${ms} ms`;
      } else {
        line("stop", `■ ${stop} · ${((now - c.turn.started) / 1000).toFixed(2)} s`);
      }
    } catch (err) {
      line("error", `session/prompt failed: ${err.message}`);
    }
    c.turn = null;
    for (const id of [...c.permissions.keys()]) c.answerPermission(id, { outcome: "cancelled" }, "cancelled (turn over)");
    if (client !== c) return;
    setTurnRunning(false);
    setStatus(statusBase(c));
    await refreshSessions(c);
  }

  function cancelTurn(c) {
    if (c.turn === null || c.turn.cancelledAt !== null) return;
    c.turn.cancelledAt = performance.now();
    ui.cancel.disabled = true;
    ui.cancelTime.textContent = "cancelling…";
    c.notify("session/cancel", { sessionId: c.sessionId }).catch((err) => {
      line("error", `session/cancel failed: ${err.message}`);
    });
    // The client answers its pending permission requests "cancelled" (ACP, session/cancel).
    for (const id of [...c.permissions.keys()]) c.answerPermission(id, { outcome: "cancelled" }, "cancelled");
  }

  // -- connecting ------------------------------------------------------------------------------------------------------
  function setConnected(on) {
    ui.connect.disabled = on;
    ui.transport.disabled = on;
    ui.disconnect.disabled = !on;
    ui.newSession.disabled = !on;
    ui.refreshSessions.disabled = !on;
    if (!on) {
      setPromptEnabled(false);
      setTurnRunning(false);
      ui.permissions.replaceChildren();
      ui.sessions.replaceChildren();
      ui.sessionsNote.textContent = "not connected";
    }
  }

  function setPromptEnabled(on) {
    ui.prompt.disabled = !on;
    ui.send.disabled = !on;
  }

  function setTurnRunning(on) {
    ui.send.disabled = on || ui.prompt.disabled;
    ui.cancel.disabled = !on;
    ui.newSession.disabled = on || client === null;
    for (const button of ui.sessions.querySelectorAll("button.load")) button.disabled = on;
  }

  class TokenNeeded extends Error {}

  // After a refused upgrade: a GET on /acp answers 401 when an auth hook wants credentials
  // (the Origin rule does not apply: a same-origin GET carries no Origin).
  async function needsToken() {
    const response = await fetch(ENDPOINT, { cache: "no-store" });
    return response.status === 401;
  }

  function askForToken() {
    ui.tokenForm.hidden = false;
    ui.token.focus();
    setStatus(token ? "the server refused this token (401)" : "the server asks for a token (401)", true);
    token = null;
  }

  async function connect() {
    if (client !== null) return;
    const kind = ui.transport.value;
    ui.connect.disabled = true;
    setStatus("connecting…");
    const c = new Client(kind);
    try {
      try {
        await c.transport.open();
      } catch (err) {
        if (kind === "ws" && (await needsToken())) throw new TokenNeeded();
        throw err;
      }
      client = c;
      let result;
      try {
        result = await c.request("initialize", {
          protocolVersion: PROTOCOL_VERSION,
          clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
          clientInfo: { name: "acp-fast-web-console", title: "acp_fast web console", version: ui.version.dataset.version || "" },
        });
      } catch (err) {
        if (err instanceof HttpError && err.status === 401) throw new TokenNeeded();
        throw err;
      }
      if (client !== c) return;
      c.capabilities = result.agentCapabilities || {};
      c.agentInfo = result.agentInfo || {};
      ui.tokenForm.hidden = true;
      setConnected(true);
      setStatus(statusBase(c));
      await newSession(c);
    } catch (err) {
      if (client === c) c.close();
      client = null;
      setConnected(false);
      if (err instanceof TokenNeeded) askForToken();
      else setStatus(`could not connect: ${err.message}`, true);
    }
  }

  // -- wiring ---------------------------------------------------------------------------------------------------------
  ui.version.dataset.version = ui.version.textContent.replace(/^acp_fast\s+/, "");
  ui.connectForm.addEventListener("submit", (event) => {
    event.preventDefault();
    connect();
  });
  ui.tokenForm.addEventListener("submit", (event) => {
    event.preventDefault();
    token = ui.token.value.trim() || null;
    ui.token.value = "";
    if (token !== null) connect();
  });
  ui.disconnect.addEventListener("click", () => {
    if (client !== null) client.close();
  });
  ui.newSession.addEventListener("click", () => {
    if (client !== null && client.turn === null) {
      newSession(client).catch((err) => line("error", `session/new failed: ${err.message}`));
    }
  });
  ui.refreshSessions.addEventListener("click", () => {
    if (client !== null) refreshSessions(client);
  });
  ui.promptForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = ui.prompt.value.trim();
    if (client === null || client.turn !== null || client.sessionId === null || !text) return;
    ui.prompt.value = "";
    sendPrompt(client, text);
  });
  ui.prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      ui.promptForm.requestSubmit();
    }
  });
  ui.cancel.addEventListener("click", () => {
    if (client !== null) cancelTurn(client);
  });
  window.addEventListener("pagehide", () => {
    if (client !== null) client.close();
  });
  setConnected(false);
})();
