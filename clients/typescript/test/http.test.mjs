// The owner's OpenAI-compatible HTTP endpoint with the official `openai` Node
// SDK (its default retries on), and a CORS preflight from Debian's headless
// Chromium for an origin in daemon.tcp_allowed_origins (docs/http.md).
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { connect } from "../dist/index.js";
import { PROVIDER_URL, RELEASE_DIR, newHome, startOwner } from "./owner.mjs";

const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const skip = !PROVIDER_URL || !RELEASE_DIR ? "needs the scripted model" : false;

/** A page server on loopback (a frontend's origin): http://127.0.0.1:PORT */
async function pageServer() {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<!doctype html><title>app</title>");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, origin: `http://127.0.0.1:${server.address().port}` };
}

let owner;
let token;
let base;
let page;
let other;
before(async () => {
  if (skip) return;
  page = await pageServer();
  other = await pageServer();
  const home = newHome();
  home.config += `daemon:\n  tcp_allowed_origins: ["${page.origin}"]\n`;
  owner = await startOwner(home);
  const unix = await connect({ home: owner.home });
  try {
    token = (await unix.call("token.create", { label: "openai node" })).token;
  } finally {
    unix.close();
  }
  base = owner.url.replace("ws://", "http://").replace(/\/$/, "") + "/v1";
});
after(async () => {
  await owner?.stop();
  page?.server.close();
  other?.server.close();
});

test("the openai SDK: models, chat whole and streamed, a response", { skip }, async () => {
  const client = new OpenAI({ baseURL: base, apiKey: token });
  const models = [];
  for await (const m of client.models.list()) models.push(m.id);
  assert.ok(models.includes("tether"));
  assert.equal((await client.models.retrieve("tether")).id, "tether");

  const done = await client.chat.completions.create({
    model: "tether", messages: [{ role: "user", content: "hello from node" }],
  });
  assert.equal(done.choices[0].message.content, "You said: hello from node");

  const stream = await client.chat.completions.create({
    model: "tether", messages: [{ role: "user", content: "streamed" }], stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let usage = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    usage = chunk.usage ?? usage;
  }
  assert.equal(text, "You said: streamed");
  assert.ok(usage.total_tokens > 0);

  const response = await client.responses.create({ model: "tether", input: "a response" });
  assert.equal(response.status, "completed");
  assert.equal(response.output_text, "You said: a response");
  assert.equal((await client.responses.retrieve(response.id)).output_text, response.output_text);
});

test("a call the SDK times out and retries runs its turn once", { skip }, async () => {
  // the SDK's defaults (2 retries), with a timeout shorter than the turn
  const client = new OpenAI({ baseURL: base, apiKey: token, timeout: 1500 });
  const release = setTimeout(() => writeFileSync(join(RELEASE_DIR, "node-slow"), ""), 2500);
  try {
    const done = await client.chat.completions.create({
      model: "tether", messages: [{ role: "user", content: "HOLD:node-slow please" }],
    });
    assert.equal(done.choices[0].message.content, "Held answer for node-slow, now done.");
  } finally {
    clearTimeout(release);
  }
  const unix = await connect({ home: owner.home });
  try {
    const { sessions } = await unix.call("session.list", {});
    const runs = sessions.filter((s) => (s.title ?? "").startsWith("HOLD:node-slow"));
    assert.equal(runs.length, 1, "one session: the retries attached to the first attempt");
  } finally {
    unix.close();
  }
});

test("a page of an allowed origin calls the API from Chromium (CORS preflight)",
  { skip: skip || (!existsSync(CHROMIUM) && `no browser at ${CHROMIUM}`) }, async () => {
    const { chromium } = await import("playwright-core");
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    try {
      const tab = await browser.newPage();
      const call = (origin) => tab.goto(`${origin}/`).then(() => tab.evaluate(
        async ({ url, key }) => {
          try {
            const res = await fetch(`${url}/chat/completions`, {
              method: "POST",
              headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json",
                "Idempotency-Key": `page-${Math.random()}` },
              body: JSON.stringify({ model: "tether",
                messages: [{ role: "user", content: "from the page" }] }),
            });
            return { status: res.status, session: res.headers.get("x-tether-session-id"),
              text: (await res.json()).choices[0].message.content };
          } catch (err) {
            return { error: String(err) };
          }
        }, { url: base, key: token }));
      const allowed = await call(page.origin);
      assert.equal(allowed.status, 200, JSON.stringify(allowed));
      assert.equal(allowed.text, "You said: from the page");
      assert.match(allowed.session, /^ses_/); // an exposed header
      const refused = await call(other.origin);
      assert.match(refused.error, /TypeError/); // the browser blocks it
    } finally {
      await browser.close();
    }
  });
