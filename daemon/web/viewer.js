// The viewer page: sessions, a live transcript, prompts, cancel, approvals. It runs the
// TypeScript client's browser build (core.js, browser.js: copied from
// clients/typescript/dist) over the owner's TCP listener, same origin.
import { browserDial } from "./browser.js";
import { TetherClient, newInputId } from "./core.js";
import { approvalNote, draw, showPrompt, showTurnUsage, tickAll, turnFor, usageText } from "./turns.js";

const TOKEN_KEY = "tether.viewer.token";
const PENDING_KEY = "tether.viewer.pending."; // + session id: a prompt being submitted
const $ = (id) => document.getElementById(id);
const wsUrl = `ws://${location.host}/`;

let client = null;
let current = null; // { sessionId, stream, turns: Map<admission_id, turn>, prompts: Map }

function setStatus(state, text) {
  const el = $("status");
  el.dataset.state = state;
  el.textContent = text;
}

// -- the token: the one-time link's, traded once, then kept ---------------------

async function obtainToken() {
  const once = new URLSearchParams(location.hash.slice(1)).get("once");
  if (once) {
    history.replaceState(null, "", location.pathname); // the link works once: drop it
    let reply;
    try {
      reply = await fetch("/web/exchange", { headers: { Authorization: `Bearer ${once}` } });
    } catch {
      throw new Error("the owner is not running (start it and run `tether web` again)");
    }
    const body = await reply.json();
    if (!reply.ok) {
      if (localStorage.getItem(TOKEN_KEY)) return localStorage.getItem(TOKEN_KEY);
      throw new Error(body.detail);
    }
    localStorage.setItem(TOKEN_KEY, body.token);
  }
  const token = localStorage.getItem(TOKEN_KEY);
  if (!token) throw new Error("no token: open the link `tether web` prints");
  return token;
}

/** "ok", "refused" (with the owner's reason) or "stopped": what a close 1006 meant. */
async function preflight(token) {
  try {
    const reply = await fetch("/web/status", { headers: { Authorization: `Bearer ${token}` } });
    if (reply.ok) return { state: "ok" };
    const body = await reply.json().catch(() => ({}));
    return { state: "refused", detail: body.detail || `HTTP ${reply.status}` };
  } catch {
    return { state: "stopped" };
  }
}

async function explain(token) {
  const pf = await preflight(token);
  if (pf.state === "stopped") setStatus("stopped", "owner not running — retrying");
  else if (pf.state === "refused") {
    setStatus("refused", `refused: ${pf.detail}`);
    localStorage.removeItem(TOKEN_KEY);
  } else setStatus("reconnecting", "reconnecting…");
  return pf;
}

function watchedDial(token) {
  const dial = browserDial(wsUrl, token);
  return async () => {
    try {
      const transport = await dial();
      setStatus("connected", "connected");
      transport.onClose(async () => {
        const pf = await explain(token);
        // dial again at once, even with nothing to send: the page shows live state
        if (pf.state !== "refused") client?.connection().catch(() => {});
      });
      return transport;
    } catch (err) {
      const pf = await explain(token);
      if (pf.state === "refused") {
        client?.close(); // a revoked or expired token will not start working: stop trying
        throw new Error(`refused: ${pf.detail}`);
      }
      throw err;
    }
  };
}

// -- sessions -------------------------------------------------------------------

const LIST_SECONDS = 4; // the list is read again this often while the page is shown
// sessions nobody typed into: scheduled runs, the HTTP endpoint (shown on request)
const AUTOMATED = new Set(["cron", "api", "delegation"]);

function ago(t) {
  const s = Math.max(0, Date.now() / 1000 - t);
  if (s < 60) return "just now";
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(t * 1000).toLocaleDateString();
}

async function listSessions() {
  const { sessions } = await client.resilient((c) => c.call("session.list", { limit: 100 }));
  const showAll = $("show-automated").checked;
  const ul = $("sessions");
  const items = [];
  let hidden = 0;
  for (const s of sessions) {
    if (s.parent_session_id) continue; // delegated children show inside their parent
    if (!showAll && AUTOMATED.has(s.source)) { hidden += 1; continue; }
    if (!s.message_count && !s.running && s.session_id !== current?.sessionId) continue; // empty
    const li = document.createElement("li");
    li.dataset.sessionId = s.session_id;
    li.dataset.running = String(Boolean(s.running));
    const title = document.createElement("span");
    title.className = "title";
    title.textContent = s.title || "(untitled)";
    const meta = document.createElement("span");
    meta.className = "meta";
    const where = s.cwd ? s.cwd.split("/").filter(Boolean).pop() ?? "/" : "";
    meta.textContent = [s.running ? "● running" : ago(s.updated_at), s.source !== "web" && s.source !== "cli" ? s.source : "", where]
      .filter(Boolean).join(" · ");
    li.append(title, meta);
    li.title = `${s.session_id}${s.cwd ? `\n${s.cwd}` : ""}`;
    li.setAttribute("aria-current", String(current?.sessionId === s.session_id));
    if (current?.sessionId === s.session_id && s.title) $("session-title").textContent = s.title;
    li.onclick = () => { document.body.classList.remove("nav-open"); void openSession(s.session_id); };
    items.push(li);
  }
  ul.replaceChildren(...items);
  $("automated-count").textContent = hidden ? ` (${hidden})` : "";
}

function keepListing() {
  setInterval(() => {
    if (document.visibilityState === "visible" && client) listSessions().catch(() => {});
  }, LIST_SECONDS * 1000);
}

async function openSession(sessionId) {
  current?.stream.close();
  location.hash = `session=${sessionId}`;
  const stream = client.events(sessionId, { afterSeq: 0 }); // the whole story, then live
  const view = { sessionId, stream, turns: new Map(), prompts: new Map(), running: null,
    replayedTo: Infinity };
  current = view;
  $("transcript").replaceChildren();
  $("empty").hidden = true;
  $("session").hidden = false;
  await stream.open();
  const snap = stream.snapshot;
  view.replayedTo = snap.last_seq ?? 0;
  $("session-title").textContent = snap.info.title || "New session";
  $("session-meta").textContent = [snap.info.cwd, sessionId].filter(Boolean).join(" · ");
  $("session-usage").textContent = "";
  showSessionUsage(snap.info.usage);
  for (const m of snap.messages) if (m.role === "user" && m.admission_id) view.prompts.set(m.admission_id, m.content);
  for (const p of snap.pending) view.prompts.set(p.receipt.admission_id, p.text);
  for (const a of snap.approvals ?? []) if (a.admission_id) askApproval(turnFor(view, a.admission_id), a);
  for (const t of view.turns.values()) if (!t.user.textContent) showPrompt(t, view.prompts.get(t.id));
  void listSessions();
  void follow(view);
  await resubmitPending(sessionId);
}

// -- approvals: a tool call waiting for a person's answer --------------------------

const CHOICES = [["once", "Allow once"], ["session", "Allow for this session"],
  ["always", "Always allow"], ["deny", "Deny"]];

/** A prompt's box in its turn, with one button per decision; the first answer wins. */
function askApproval(turn, prompt) {
  if (document.querySelector(`.approval[data-approval-id="${prompt.approval_id}"]`)) return;
  const view = current;
  const box = document.createElement("div");
  box.className = "approval";
  box.dataset.approvalId = prompt.approval_id;
  box.dataset.status = "pending";
  const what = document.createElement("div");
  what.className = "what";
  const verb = prompt.kind === "file" ? "write" : "run";
  what.textContent = `${prompt.tool} wants to ${verb}: ${prompt.subject}`;
  const why = document.createElement("div");
  why.className = "why";
  why.textContent = [prompt.why, prompt.cwd ? `in ${prompt.cwd}` : ""].filter(Boolean).join(" · ");
  const reason = document.createElement("input");
  reason.className = "reason";
  reason.placeholder = "reason (optional, told to the agent when denied)";
  box.append(what, why);
  const buttons = document.createElement("div");
  buttons.className = "buttons";
  for (const [decision, label] of CHOICES) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.decision = decision;
    button.textContent = label;
    button.onclick = async () => {
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      const params = { session_id: view.sessionId, approval_id: prompt.approval_id, decision };
      if (reason.value.trim()) params.reason = reason.value.trim();
      try {
        const r = await client.call("approval.respond", params);
        // the approval.resolved event settles the box too; an answer that came
        // too late is said at once
        if (r.status === "already_resolved") {
          settleApproval(box, r.approval.status, `already ${approvalNote(r.approval)}`);
        }
      } catch (err) {
        settleApproval(box, "failed", err.message);
      }
    };
    buttons.append(button);
  }
  box.append(buttons, reason);
  turn.steps.append(box);
}

function settleApproval(box, status, note) {
  if (box.dataset.status !== "pending" && box.dataset.status !== "failed") return;
  box.dataset.status = status;
  for (const b of box.querySelectorAll("button, input")) b.remove();
  const line = document.createElement("div");
  line.className = "resolved";
  line.textContent = note;
  box.append(line);
}

const HOOKS = {
  ask: askApproval,
  settle: settleApproval,
  running: (yes) => { $("cancel").disabled = !yes; },
  usage: showSessionUsage,
};

/** The session's totals (SessionUsage): tokens, and cost or "cost unknown". */
function showSessionUsage(usage) {
  if (!usage) return;
  $("session-usage").textContent = usageText(usage.total_tokens, usage.cost_usd);
}

async function follow(view) {
  try {
    for await (const ev of view.stream) {
      if (current !== view) return;
      const t = $("transcript");
      const atEnd = t.scrollHeight - t.scrollTop - t.clientHeight < 80;
      draw(view, ev, HOOKS);
      if (atEnd) t.scrollTop = t.scrollHeight; // follow, unless the reader scrolled up
      if (ev.type === "message.complete" || ev.type === "message.start") void listSessions();
      if (ev.type === "message.complete" && !ev.payload.usage) void showUsage(view, ev.payload.admission_id);
    }
  } catch (err) {
    setStatus("stopped", `stopped following: ${err.message}`);
  }
}

/** A finished turn's token use from its receipt, for a turn whose event does not
 *  carry it (one stored before events did). */
async function showUsage(view, admissionId) {
  try {
    const r = await client.call("prompt.receipt", { session_id: view.sessionId, admission_id: admissionId });
    const turn = view.turns.get(admissionId);
    if (turn && r.result) showTurnUsage(turn, r.result.usage, r.result.cost_usd);
  } catch {
    // usage is a nicety: a receipt that cannot be read leaves the line as it is
  }
}

// -- prompts --------------------------------------------------------------------

/** Submit with an input id kept in sessionStorage until the owner has it: a reload
 *  mid-submit sends the same id again, and the owner admits it once. */
async function submit(sessionId, text) {
  const pending = { input_id: newInputId(), text };
  sessionStorage.setItem(PENDING_KEY + sessionId, JSON.stringify(pending));
  await sendPending(sessionId, pending);
}

async function sendPending(sessionId, pending) {
  const receipt = await client.submit({ session_id: sessionId, input_id: pending.input_id, text: pending.text });
  sessionStorage.removeItem(PENDING_KEY + sessionId);
  if (current?.sessionId === sessionId) {
    current.prompts.set(receipt.admission_id, pending.text);
    const turn = current.turns.get(receipt.admission_id);
    if (turn && !turn.user.textContent) showPrompt(turn, pending.text);
  }
}

async function resubmitPending(sessionId) {
  const raw = sessionStorage.getItem(PENDING_KEY + sessionId);
  if (raw) await sendPending(sessionId, JSON.parse(raw));
}

// -- wiring ---------------------------------------------------------------------

async function main() {
  let token;
  try {
    token = await obtainToken();
  } catch (err) {
    setStatus("refused", err.message);
    $("hint").textContent = err.message;
    return;
  }
  const pf = await preflight(token);
  if (pf.state !== "ok") {
    await explain(token);
    $("hint").textContent = pf.state === "stopped"
      ? "The owner is not running. Start it (tether web), then reload."
      : `${pf.detail}`;
    if (pf.state === "refused") return;
  }
  client = await TetherClient.open(watchedDial(token), { retrySeconds: 24 * 3600 });
  $("new-session").disabled = $("refresh").disabled = false;
  $("new-session").onclick = async () => {
    // untitled: the owner titles it by its first prompt
    const snap = await client.createSession({ source: "web" });
    document.body.classList.remove("nav-open");
    await openSession(snap.session_id);
    $("prompt").focus();
  };
  $("refresh").onclick = () => void listSessions();
  $("show-automated").onchange = () => void listSessions();
  $("toggle-nav").onclick = () => document.body.classList.toggle("nav-open");
  setInterval(() => tickAll(current), 1000);
  keepListing();
  $("prompt-form").onsubmit = async (e) => {
    e.preventDefault();
    const text = $("prompt").value;
    if (!current || !text.trim()) return;
    $("send").disabled = true;
    try {
      await submit(current.sessionId, text);
      $("prompt").value = "";
    } catch (err) {
      setStatus("refused", err.message);
    } finally {
      $("send").disabled = false;
    }
  };
  $("prompt").onkeydown = (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("prompt-form").requestSubmit();
  };
  $("cancel").onclick = async () => {
    if (current?.running) await client.cancel(current.sessionId, current.running);
  };
  await listSessions();
  const wanted = new URLSearchParams(location.hash.slice(1)).get("session");
  if (wanted) await openSession(wanted);
  else document.body.classList.add("nav-open"); // on a phone: the list first
}

void main();
