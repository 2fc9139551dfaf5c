// The viewer page: sessions, a live transcript, prompts, cancel, approvals. It runs the
// TypeScript client's browser build (core.js, browser.js: copied from
// clients/typescript/dist) over the owner's TCP listener, same origin.
import { browserDial } from "./browser.js";
import { TetherClient, newInputId } from "./core.js";

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

async function listSessions() {
  const { sessions } = await client.resilient((c) => c.call("session.list", { limit: 100 }));
  const ul = $("sessions");
  ul.replaceChildren();
  for (const s of sessions) {
    if (s.parent_session_id) continue; // delegated children show inside their parent
    const li = document.createElement("li");
    li.dataset.sessionId = s.session_id;
    li.textContent = s.title || s.session_id;
    if (s.running) {
      const dot = document.createElement("span");
      dot.className = "running";
      dot.textContent = " ●";
      li.append(dot);
    }
    li.setAttribute("aria-current", String(current?.sessionId === s.session_id));
    li.onclick = () => openSession(s.session_id);
    ul.append(li);
  }
}

async function openSession(sessionId) {
  current?.stream.close();
  location.hash = `session=${sessionId}`;
  const stream = client.events(sessionId, { afterSeq: 0 }); // the whole story, then live
  current = { sessionId, stream, turns: new Map(), prompts: new Map(), running: null };
  $("transcript").replaceChildren();
  $("empty").hidden = true;
  $("session").hidden = false;
  await stream.open();
  const snap = stream.snapshot;
  $("session-title").textContent = snap.info.title || sessionId;
  for (const m of snap.messages) if (m.role === "user" && m.admission_id) current.prompts.set(m.admission_id, m.content);
  for (const p of snap.pending) current.prompts.set(p.receipt.admission_id, p.text);
  for (const a of snap.approvals ?? []) if (a.admission_id) askApproval(current, turnFor(current, a.admission_id), a);
  for (const t of current.turns.values()) if (!t.user.textContent) showPrompt(t, current.prompts.get(t.id));
  void listSessions();
  void follow(current);
  await resubmitPending(sessionId);
}

// -- the transcript, drawn from events ------------------------------------------

const DELIVERY = "[delegation results]";

/** Show a turn's prompt; a background delegation's delivered results get a label. */
function showPrompt(turn, text) {
  if (!text) return;
  const delivery = text.startsWith(DELIVERY);
  turn.user.classList.toggle("delivery", delivery);
  turn.user.textContent = delivery ? "↳ the helpers' results, delivered in the background" : text;
}

function turnFor(view, admissionId) {
  let turn = view.turns.get(admissionId);
  if (turn) return turn;
  const box = document.createElement("div");
  box.className = "turn";
  box.dataset.admissionId = admissionId;
  const user = document.createElement("div");
  user.className = "user";
  const answer = document.createElement("div");
  answer.className = "assistant";
  const outcome = document.createElement("div");
  outcome.className = "outcome";
  box.append(user, answer, outcome);
  $("transcript").append(box);
  turn = { id: admissionId, box, user, answer, outcome };
  view.turns.set(admissionId, turn);
  showPrompt(turn, view.prompts.get(admissionId));
  return turn;
}

function progress(turn, text, kind) {
  const line = document.createElement("div");
  line.className = `progress ${kind}`;
  line.textContent = text;
  turn.box.insertBefore(line, turn.outcome);
}

function draw(view, ev) {
  const aid = ev.admission_id;
  switch (ev.type) {
    case "session.info":
      view.running = ev.payload.running;
      $("cancel").disabled = !ev.payload.running;
      return;
    case "message.start": {
      const turn = turnFor(view, ev.payload.admission_id);
      if (ev.payload.text) showPrompt(turn, ev.payload.text);
      return;
    }
    case "message.delta":
      if (aid) turnFor(view, aid).answer.textContent += ev.payload.text;
      return;
    case "tool.start":
      if (aid && ev.payload.name !== "delegate_task") progress(turnFor(view, aid), `⚙ ${ev.payload.name}…`, "tool");
      return;
    case "tool.complete":
      if (aid && ev.payload.error) progress(turnFor(view, aid), `⚙ ${ev.payload.name} failed: ${ev.payload.error}`, "tool");
      return;
    case "subagent.start":
      if (aid) progress(turnFor(view, aid), `↳ helper ${ev.payload.task_index + 1} started: ${ev.payload.goal}`, "subagent");
      return;
    case "subagent.complete":
      if (aid) progress(turnFor(view, aid), `↳ helper ${(ev.payload.task_index ?? 0) + 1} ${ev.payload.status}: ${ev.payload.summary}`, "subagent");
      return;
    case "delegation.dispatched":
      if (aid) progress(turnFor(view, aid), `↳ ${ev.payload.tasks.length} helper(s) working in the background`, "delegation");
      return;
    case "approval.requested":
      if (aid) askApproval(view, turnFor(view, aid), ev.payload);
      return;
    case "approval.resolved": {
      const box = document.querySelector(`.approval[data-approval-id="${ev.payload.approval_id}"]`);
      if (box) settleApproval(box, ev.payload.status, ev.payload.cause);
      return;
    }
    case "message.complete": {
      const turn = turnFor(view, ev.payload.admission_id);
      if (!turn.answer.textContent) turn.answer.textContent = ev.payload.text;
      turn.outcome.dataset.outcome = ev.payload.outcome;
      turn.outcome.textContent = ev.payload.outcome + (ev.payload.error ? `: ${ev.payload.error}` : "");
      return;
    }
    default:
      return; // types this page does not know are skipped
  }
}

// -- approvals: a tool call waiting for a person's answer --------------------------

const CHOICES = [["once", "Allow once"], ["session", "Allow for this session"],
  ["always", "Always allow"], ["deny", "Deny"]];

/** A prompt's box in its turn, with one button per decision; the first answer wins. */
function askApproval(view, turn, prompt) {
  if (document.querySelector(`.approval[data-approval-id="${prompt.approval_id}"]`)) return;
  const box = document.createElement("div");
  box.className = "approval";
  box.dataset.approvalId = prompt.approval_id;
  box.dataset.status = "pending";
  const what = document.createElement("div");
  what.className = "what";
  what.textContent = `${prompt.tool} wants to run: ${prompt.subject}` + (prompt.why ? ` (${prompt.why})` : "");
  box.append(what);
  for (const [decision, label] of CHOICES) {
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.decision = decision;
    button.textContent = label;
    button.onclick = async () => {
      for (const b of box.querySelectorAll("button")) b.disabled = true;
      try {
        const r = await client.call("approval.respond", {
          session_id: view.sessionId, approval_id: prompt.approval_id, decision });
        // the approval.resolved event settles the box too; an answer that came
        // too late is said at once
        if (r.status === "already_resolved") settleApproval(box, r.approval.status, "answered elsewhere");
      } catch (err) {
        settleApproval(box, "failed", err.message);
      }
    };
    box.append(button);
  }
  turn.box.insertBefore(box, turn.outcome);
}

function settleApproval(box, status, cause) {
  box.dataset.status = status;
  for (const b of box.querySelectorAll("button")) b.remove();
  const note = document.createElement("div");
  note.className = "resolved";
  note.textContent = `${status} (${cause})`;
  box.append(note);
}

async function follow(view) {
  try {
    for await (const ev of view.stream) {
      if (current !== view) return;
      draw(view, ev);
      const t = $("transcript");
      t.scrollTop = t.scrollHeight;
    }
  } catch (err) {
    setStatus("stopped", `stopped following: ${err.message}`);
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
    await openSession(snap.session_id);
  };
  $("refresh").onclick = () => void listSessions();
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
}

void main();
