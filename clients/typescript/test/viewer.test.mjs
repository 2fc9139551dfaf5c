// The viewer page in Debian's headless Chromium (playwright-core drives the
// installed /usr/bin/chromium; nothing is downloaded), served by a real owner.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { after, before, test } from "node:test";
import { connect } from "../dist/index.js";
import { RELEASE_DIR, TETHER, release, startOwner, until } from "./owner.mjs";

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const SCREENSHOTS = process.env.TETHER_SCREENSHOTS; // a folder to save them in (docs/)
const skip = !existsSync(CHROMIUM) ? `no browser at ${CHROMIUM}` : !RELEASE_DIR ? "needs the scripted model" : false;

let owner;
let browser;
before(async () => {
  if (skip) return;
  const { chromium } = await import("playwright-core");
  owner = await startOwner();
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});
after(async () => {
  await browser?.close();
  await owner?.stop();
});

function webLink() {
  const out = execFileSync(TETHER, ["web", "--no-open"], {
    env: { ...process.env, TETHER_HOME: owner.home }, encoding: "utf8", timeout: 60000,
  });
  const url = out.trim().split("\n").pop();
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/web\/#once=tt_/);
  return url;
}

async function admissions(sessionId) {
  const client = await connect({ home: owner.home });
  try {
    const snap = await client.resume(sessionId, 0);
    return (snap.events ?? []).filter((e) => e.type === "message.start").length;
  } finally {
    client.close();
  }
}

test("load, submit, watch a delegation stream, reload mid-turn: one admission", { skip }, async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
  const errors = [];
  page.on("pageerror", (err) => errors.push(err.message));
  await page.goto(webLink());
  await page.waitForSelector('#status[data-state="connected"]');
  assert.equal(new URL(page.url()).hash, "", "the one-time token left the address bar");

  await page.click("#new-session");
  await page.waitForSelector("#session:not([hidden])");
  const sessionId = new URLSearchParams(new URL(page.url()).hash.slice(1)).get("session");
  assert.ok(sessionId);

  // a turn that delegates (in the background: the page's prompts are not finite):
  // the helper's progress shows, then the results arrive as a turn of their own
  await page.fill("#prompt", "Please delegate the research part.");
  await page.click("#send");
  await page.waitForSelector(".progress.subagent >> text=started");
  await page.waitForSelector(".progress.subagent >> text=completed");
  await page.waitForFunction(() => document.querySelectorAll(".outcome[data-outcome=completed]").length === 2);
  const texts = await page.$$eval(".turn .assistant", (els) => els.map((e) => e.textContent));
  assert.deepEqual(texts, ["Joined the helpers' results.", "Background results received."]);
  assert.match(await page.textContent(".turn .user"), /delegate the research part/);
  const before = await admissions(sessionId);
  assert.equal(before, 2);

  // a turn held mid-answer; reload while it streams
  await page.fill("#prompt", "HOLD:viewer1 take your time");
  await page.click("#send");
  const held = () => {
    const turn = [...document.querySelectorAll(".turn")].find((t) => t.querySelector(".user").textContent.includes("HOLD:viewer1"));
    return turn !== undefined && (turn.querySelector(".assistant")?.textContent.length ?? 0) > 0
      && !turn.querySelector(".outcome").dataset.outcome;
  };
  await page.waitForFunction(held);
  await page.reload();
  await page.waitForSelector('#status[data-state="connected"]');
  await page.waitForFunction(held); // the partial answer is back, the turn still running
  assert.equal(await admissions(sessionId), before + 1, "the reload admitted nothing new");
  release("viewer1");
  await page.waitForFunction(() => document.querySelectorAll(".outcome[data-outcome=completed]").length === 3);
  const answers = await page.$$eval(".turn .assistant", (els) => els.map((e) => e.textContent));
  assert.equal(answers[2], "Held answer for viewer1, now done.");
  assert.equal(await admissions(sessionId), before + 1);

  // cancel a running turn from the page
  await page.fill("#prompt", "HOLD:viewer2 this one gets cancelled");
  await page.click("#send");
  await page.waitForSelector("#cancel:not([disabled])");
  await page.click("#cancel");
  await page.waitForFunction(() => {
    const outcomes = [...document.querySelectorAll(".outcome")].map((o) => o.dataset.outcome);
    return outcomes.length === 4 && ["cancelled", "interrupted"].includes(outcomes[3]);
  });
  release("viewer2");
  assert.deepEqual(errors, []);

  // the link worked once: opening it again in a fresh context is refused, clearly
  const used = webLink();
  const fresh = await browser.newContext();
  const other = await fresh.newPage();
  await other.goto(used);
  await other.waitForSelector('#status[data-state="connected"]');
  const again = await fresh.newPage();
  await again.goto(used);
  await again.waitForSelector('#status[data-state="connected"]'); // kept its token
  await fresh.close();
  const stranger = await (await browser.newContext()).newPage();
  await stranger.goto(used);
  await stranger.waitForSelector('#status[data-state="refused"]');
  assert.match(await stranger.textContent("#status"), /used already or has expired/);
});

test("a stopped owner and a refused token look different to the page", { skip }, async () => {
  const page = await browser.newPage();
  await page.goto(webLink());
  await page.waitForSelector('#status[data-state="connected"]');
  // revoke the page's token: refused, with the owner's reason
  const client = await connect({ home: owner.home });
  const { tokens } = await client.call("token.list");
  for (const t of tokens.filter((t) => t.label === "web viewer")) await client.call("token.revoke", { token_id: t.token_id });
  client.close();
  await page.waitForSelector('#status[data-state="refused"]');
  assert.match(await page.textContent("#status"), /not valid/);
  // a new link, then the owner stops: "not running"
  await page.goto(webLink());
  await page.reload();
  await page.waitForSelector('#status[data-state="connected"]');
  const port = Number(new URL(owner.url).port);
  await owner.stop();
  await page.waitForSelector('#status[data-state="stopped"]');
  assert.match(await page.textContent("#status"), /not running/);
  owner = await startOwner({ home: owner.home, config: owner.config }, { port });
  await until(async () => (await page.getAttribute("#status", "data-state")) === "connected", "the page to reconnect");
});

test("an approval prompt shows in the turn and is answered from the page", { skip }, async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 720 } });
  const errors = [];
  page.on("pageerror", (err) => errors.push(err.message));
  await page.goto(webLink());
  await page.waitForSelector('#status[data-state="connected"]');
  await page.click("#new-session");
  await page.waitForSelector("#session:not([hidden])");
  await page.fill("#prompt", "Please run the sleep command.");
  await page.click("#send");
  await page.waitForSelector('.approval[data-status="pending"] button[data-decision="once"]');
  assert.match(await page.textContent(".approval .what"), /sleep 0/);
  await page.click('.approval button[data-decision="once"]');
  await page.waitForSelector('.approval[data-status="approved"]');
  await page.waitForSelector(".outcome[data-outcome=completed]");
  assert.equal(await page.textContent(".turn .assistant"), "The command ran.");
  assert.deepEqual(errors, []);
  await page.close();
});

/** Whether the page scrolls sideways (it must not, at any width). */
const sideways = () => document.documentElement.scrollWidth > window.innerWidth + 1;

test("desktop and phone: steps in order, markdown made safe, a live list, no sideways scroll", { skip }, async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const errors = [];
  page.on("pageerror", (err) => errors.push(err.message));
  await page.goto(webLink());
  await page.waitForSelector('#status[data-state="connected"]');
  assert.equal(await page.evaluate(async () => (await fetch("/web/favicon.svg")).status), 200);
  assert.equal(await page.getAttribute('link[rel="icon"]', "href"), "favicon.svg");

  // a turn's steps in the order they happened: the tool call, its approval, the answer
  await page.click("#new-session");
  await page.waitForSelector("#session:not([hidden])");
  await page.fill("#prompt", "Please show the steps.");
  await page.click("#send");
  await page.waitForSelector('.approval[data-status="pending"]');
  assert.match(await page.textContent(".working"), /waiting for an answer/);
  await page.fill(".approval .reason", "fine here");
  await page.click('.approval button[data-decision="session"]');
  await page.waitForSelector(".outcome[data-outcome=completed]");
  const steps = await page.$$eval(".turn .steps > *", (els) => els.map((e) => e.className));
  assert.deepEqual(steps, ["progress tool", "approval", "assistant"]);
  assert.match(await page.textContent(".approval .resolved"), /^approved for this session: fine here/);
  assert.match(await page.textContent(".progress.tool"), /terminal.*sh -c 'echo alpha; echo beta; sleep 0'.*→ exit 0 · 2 lines of output/s);
  assert.equal(await page.textContent(".progress.tool .preview"), "alpha\nbeta\n");
  assert.equal(await page.innerHTML(".turn .assistant"), "<p>Printed <strong>both</strong> lines.</p>");
  await page.waitForSelector(".outcome .usage");
  assert.match(await page.textContent(".outcome"), /^completed · \d+ s · [\d,]+ tokens in, [\d,]+ out$/);
  // the session's totals in its header (the scripted model has no price)
  await page.waitForFunction(() => document.getElementById("session-usage").textContent !== "");
  assert.match(await page.textContent("#session-usage"), /^[\d.]+k? tokens · cost unknown$/);
  assert.equal(await page.isHidden(".working"), true);
  // the session took its title from the first prompt, in the header and in the list
  await page.waitForSelector('#sessions li[aria-current="true"] >> text=Please show the steps.');
  await page.waitForSelector("#session-title >> text=Please show the steps.");

  // markdown, rendered and sanitised: nothing in it runs or loads
  await page.fill("#prompt", "MARKDOWN please");
  await page.click("#send");
  await page.waitForFunction(() => document.querySelectorAll(".outcome[data-outcome=completed]").length === 2);
  const md = ".turn:last-child .assistant";
  assert.equal(await page.textContent(`${md} h2`), "Findings");
  assert.equal(await page.textContent(`${md} pre code`), 'print("hello")\n');
  // highlighted: the code's words in spans of highlight.js's classes
  assert.equal(await page.textContent(`${md} pre code .hljs-built_in`), "print");
  assert.equal(await page.textContent(`${md} pre code .hljs-string`), '"hello"');
  assert.equal(await page.$$eval(`${md} li`, (els) => els.length), 2);
  // a quotation is set apart from the answer's own words (a rule at its side)
  assert.equal(await page.textContent(`${md} blockquote`), "\nquoted from the log, not said here\n");
  assert.notEqual(await page.$eval(`${md} blockquote`, (el) => getComputedStyle(el).borderLeftStyle), "none");
  assert.equal(await page.getAttribute(`${md} a`, "rel"), "noopener noreferrer");
  assert.equal(await page.$$eval(`${md} script, ${md} [onerror], ${md} img`, (els) => els.length), 0);
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(await page.evaluate(sideways), false);

  // the list is live: a session another client starts appears without Refresh
  const other = await connect({ home: owner.home });
  const made = await other.createSession({ source: "cli" });
  await other.submit({ session_id: made.session_id, input_id: "live-1", text: "asked from a terminal" });
  other.close();
  await page.waitForSelector("#sessions li >> text=asked from a terminal", { timeout: 20000 });
  if (SCREENSHOTS) await page.screenshot({ path: `${SCREENSHOTS}/viewer.png` });

  // a phone: the list slides over, the transcript has the width, nothing scrolls sideways
  const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  phone.on("pageerror", (err) => errors.push(err.message));
  await phone.goto(webLink());
  await phone.waitForSelector('#status[data-state="connected"]');
  await phone.waitForSelector("#sessions li >> text=Please show the steps.");
  assert.equal(await phone.evaluate(() => document.body.classList.contains("nav-open")), true);
  await phone.waitForFunction(() => document.querySelector("nav").getBoundingClientRect().left >= 0);
  if (SCREENSHOTS) await phone.screenshot({ path: `${SCREENSHOTS}/viewer-phone-list.png` });
  await phone.click("#sessions li >> text=Please show the steps.");
  await phone.waitForSelector(".outcome[data-outcome=completed]");
  assert.equal(await phone.evaluate(() => document.body.classList.contains("nav-open")), false);
  // the list slides out of the way (a short transition)
  await phone.waitForFunction(() => document.querySelector("nav").getBoundingClientRect().right <= 0);
  const width = await phone.$eval("#transcript", (t) => t.getBoundingClientRect().width);
  assert.ok(width > 340, `the transcript has the width (${width} px)`);
  assert.equal(await phone.evaluate(sideways), false);
  await phone.click("#toggle-nav");
  await phone.waitForFunction(() => document.querySelector("nav").getBoundingClientRect().left >= 0);
  await phone.click("#toggle-nav");
  await phone.waitForFunction(() => document.querySelector("nav").getBoundingClientRect().right <= 0);
  if (SCREENSHOTS) await phone.screenshot({ path: `${SCREENSHOTS}/viewer-phone.png` });
  assert.deepEqual(errors, []);
  await phone.close();
  await page.close();
});
