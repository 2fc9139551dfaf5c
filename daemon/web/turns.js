// A session's turns, drawn from its events in the order things happened: the
// prompt, then each step as it comes (reasoning, tool calls with what they act on
// and a preview of their result, approvals, helpers, answer text), a live
// "working · 12 s" line while the turn runs, and how it ended. Answers are
// markdown, rendered by marked, made safe by DOMPurify, code coloured by
// highlight.js (all bundled at build time: clients/typescript/scripts/web-copy.mjs).
import hljs from "./highlight.js";
import { marked } from "./marked.js";
import DOMPurify from "./purify.js";

hljs.configure({ ignoreUnescapedHTML: true });

const DELIVERY = "[delegation results]";
const $ = (id) => document.getElementById(id);

/** Markdown → sanitised HTML in `el` (no script, no handler, no style survives). */
export function renderMarkdown(el, text) {
  const html = marked.parse(text, { async: false, gfm: true });
  // no images (a model's <img> would fetch from the owner or break), no forms
  el.innerHTML = DOMPurify.sanitize(String(html).trim(), {
    FORBID_ATTR: ["style"], FORBID_TAGS: ["img", "form", "input", "button", "textarea", "select"] });
  // code blocks coloured by highlight.js: it reads their text and writes spans of
  // its own, so nothing of the model's is parsed as HTML again
  for (const code of el.querySelectorAll("pre code")) hljs.highlightElement(code);
  for (const a of el.querySelectorAll("a[href]")) {
    a.target = "_blank";
    a.rel = "noopener noreferrer";
  }
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Show a turn's prompt; a background delegation's delivered results get a label. */
export function showPrompt(turn, text) {
  if (!text) return;
  const delivery = text.startsWith(DELIVERY);
  turn.user.classList.toggle("delivery", delivery);
  turn.user.textContent = delivery ? "↳ the helpers' results, delivered in the background" : text;
}

export function turnFor(view, admissionId) {
  let turn = view.turns.get(admissionId);
  if (turn) return turn;
  const box = el("div", "turn");
  box.dataset.admissionId = admissionId;
  const user = el("div", "user");
  const steps = el("div", "steps");
  const status = el("div", "working");
  status.hidden = true;
  const outcome = el("div", "outcome");
  box.append(user, steps, status, outcome);
  $("transcript").append(box);
  turn = { id: admissionId, box, user, steps, status, outcome, calls: new Map(), started: null };
  view.turns.set(admissionId, turn);
  showPrompt(turn, view.prompts.get(admissionId));
  return turn;
}

function step(turn, node) {
  turn.steps.append(node);
  return node;
}

function progress(turn, text, kind) {
  return step(turn, el("div", `progress ${kind}`, text));
}

/** The answer block text goes into: the last step if it is one, else a new one. */
function answerBlock(turn) {
  const last = turn.steps.lastElementChild;
  if (last?.classList.contains("assistant")) return last;
  const block = step(turn, el("div", "assistant"));
  block.dataset.raw = "";
  return block;
}

const pending = new Set(); // answer blocks to render at the next frame
function renderSoon(block) {
  if (pending.size === 0) requestAnimationFrame(() => {
    for (const b of pending) renderMarkdown(b, b.dataset.raw);
    pending.clear();
  });
  pending.add(block);
}

function preview(text) {
  const diff = text.startsWith("--- ");
  const pre = el("pre", `preview ${diff ? "diff" : "output"}`);
  for (const line of text.split("\n")) {
    if (diff && (line.startsWith("---") || line.startsWith("+++"))) continue;
    const kind = !diff ? "" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del"
      : line.startsWith("@@") ? "hunk" : "";
    pre.append(el("span", kind, line + "\n"));
  }
  return pre;
}

/** A turn runs: its status line shows. `live`: seen starting now (not replayed), so
 *  its elapsed time is known (events carry no times). */
function startTurn(turn, live) {
  if (live) turn.started ??= Date.now();
  turn.status.hidden = false;
  tick(turn);
}

function seconds(turn) {
  return Math.max(0, Math.round((Date.now() - turn.started) / 1000));
}

function tick(turn) {
  if (turn.status.hidden) return;
  const waiting = turn.box.querySelector('.approval[data-status="pending"]');
  const what = waiting ? "waiting for an answer" : "working";
  turn.status.textContent = turn.started === null ? `${what}…` : `${what} · ${seconds(turn)} s`;
}

/** Redraw the elapsed time of every running turn (once a second). */
export function tickAll(view) {
  for (const turn of view?.turns.values() ?? []) tick(turn);
}

/** "1.2k tokens · $0.0012": a count of tokens, short, and a cost ("cost unknown": a
 *  model without a known price; `cost` undefined: not said). */
export function usageText(tokens, cost) {
  const n = tokens < 1000 ? `${tokens}` : tokens < 1e6 ? `${(tokens / 1000).toFixed(1)}k`
    : `${(tokens / 1e6).toFixed(1)}M`;
  if (cost === undefined) return `${n} tokens`;
  return `${n} tokens · ${cost === null ? "cost unknown" : `$${cost.toFixed(4)}`}`;
}

/** A finished turn's tokens in and out, and its cost where the model has a price. */
export function showTurnUsage(turn, usage, cost) {
  if (typeof usage?.prompt_tokens !== "number" || typeof usage?.completion_tokens !== "number") return;
  if (turn.outcome.querySelector(".usage")) return;
  const n = (x) => x.toLocaleString("en");
  const spent = typeof cost === "number" ? ` · $${cost.toFixed(4)}` : "";
  turn.outcome.append(el("span", "usage",
    ` · ${n(usage.prompt_tokens)} tokens in, ${n(usage.completion_tokens)} out${spent}`));
}

const DECIDED = { once: "approved once", session: "approved for this session",
  always: "approved always", deny: "denied" };

/** How an approval ended, with its scope and reason. */
export function approvalNote(p) {
  if (p.status === "expired") return "expired: nobody answered in time (denied)";
  if (p.status === "cancelled") return p.cause === "shutdown" ? "cancelled: the owner stopped"
    : "cancelled: the turn was interrupted";
  const what = DECIDED[p.decision] ?? p.status;
  return what + (p.reason ? `: ${p.reason}` : "") + (p.cause && p.cause !== "answered" ? ` (${p.cause})` : "");
}

export function draw(view, ev, hooks) {
  const aid = ev.admission_id;
  const live = ev.seq > view.replayedTo;
  switch (ev.type) {
    case "session.info":
      view.running = ev.payload.running;
      if (ev.payload.running) startTurn(turnFor(view, ev.payload.running), live);
      hooks.running(Boolean(ev.payload.running));
      if (ev.payload.usage) hooks.usage(ev.payload.usage);
      return;
    case "message.start": {
      const turn = turnFor(view, ev.payload.admission_id);
      if (ev.payload.text) showPrompt(turn, ev.payload.text);
      startTurn(turn, live);
      return;
    }
    case "reasoning.delta": {
      if (!aid) return;
      const turn = turnFor(view, aid);
      let box = turn.steps.lastElementChild;
      if (!box?.classList.contains("reasoning")) {
        box = step(turn, el("details", "reasoning"));
        box.append(el("summary", "", "reasoning"), el("div", "text"));
      }
      box.querySelector(".text").textContent += ev.payload.text;
      return;
    }
    case "message.delta": {
      if (!aid) return;
      const block = answerBlock(turnFor(view, aid));
      block.dataset.raw += ev.payload.text;
      renderSoon(block);
      return;
    }
    case "tool.start": {
      if (!aid || ev.payload.name === "delegate_task") return;
      const turn = turnFor(view, aid);
      const line = progress(turn, `⚙ ${ev.payload.name}`, "tool");
      if (ev.payload.subject) line.append(el("code", "subject", ev.payload.subject));
      turn.calls.set(ev.payload.call_id, line);
      return;
    }
    case "tool.complete": {
      if (!aid || ev.payload.name === "delegate_task") return;
      const turn = turnFor(view, aid);
      const line = turn.calls.get(ev.payload.call_id) ?? progress(turn, `⚙ ${ev.payload.name}`, "tool");
      const said = ev.payload.error ? `failed: ${ev.payload.error}` : ev.payload.summary;
      if (said) line.append(el("span", ev.payload.error ? "result failed" : "result", `→ ${said}`));
      if (ev.payload.preview && !ev.payload.error) line.append(preview(ev.payload.preview));
      return;
    }
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
      if (aid) hooks.ask(turnFor(view, aid), ev.payload);
      return;
    case "approval.resolved": {
      const box = document.querySelector(`.approval[data-approval-id="${ev.payload.approval_id}"]`);
      if (box) hooks.settle(box, ev.payload.status, approvalNote(ev.payload));
      return;
    }
    case "message.complete": {
      const turn = turnFor(view, ev.payload.admission_id);
      const answered = [...turn.steps.querySelectorAll(".assistant")].some((b) => b.dataset.raw);
      if (!answered && ev.payload.text) {
        const block = answerBlock(turn);
        block.dataset.raw = ev.payload.text;
      }
      for (const b of turn.steps.querySelectorAll(".assistant")) renderMarkdown(b, b.dataset.raw);
      const took = turn.started !== null ? ` · ${seconds(turn)} s` : "";
      turn.status.hidden = true;
      turn.outcome.dataset.outcome = ev.payload.outcome;
      turn.outcome.textContent = ev.payload.outcome + (ev.payload.error ? `: ${ev.payload.error}` : "") + took;
      showTurnUsage(turn, ev.payload.usage, ev.payload.cost_usd);
      return;
    }
    case "session.compacted": {
      // older turns now reach the model as a summary; the transcript here stays whole
      const p = ev.payload;
      const text = `· older turns compacted into a summary (${p.kind}; about ${p.tokens_before} → ${p.tokens_after} tokens per request)`;
      if (aid) progress(turnFor(view, aid), text, "compacted");
      else $("transcript").append(el("div", "progress compacted", text));
      return;
    }
    default:
      return; // types this page does not know are skipped
  }
}
