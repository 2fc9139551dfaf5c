// The TypeScript client against real owners (started per test, on homes with spaces).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import { connect as netConnect } from "node:net";
import { join } from "node:path";
import WebSocket from "ws";
import { ConnectionLost, PROTOCOL, TetherClient, TetherError, UnknownAdmission, connect, parseUrls, protocolMismatchMessage } from "../dist/index.js";
import { PROVIDER_URL, RELEASE_DIR, STORE_URL, newHome, release, startOwner, until } from "./owner.mjs";

describe("over the Unix socket of a home whose path has spaces", () => {
  let owner;
  let client;
  before(async () => {
    owner = await startOwner();
    assert.match(owner.home, / /);
    client = await connect({ home: owner.home, retrySeconds: 20 });
  });
  after(async () => {
    client?.close();
    await owner?.stop();
  });

  test("describe lists protocol, providers and toolsets", async () => {
    const d = await client.call("runtime.describe");
    assert.equal(d.protocol, "tether/1");
    assert.ok(d.toolsets.includes("delegation"));
    assert.ok(d.providers.includes("custom"));
  });

  test("create, submit and wait: the streamed answer and the receipt agree", async () => {
    const snap = await client.createSession({ title: "ts" });
    const seen = [];
    const receipt = await client.submitAndWait(
      { session_id: snap.session_id, text: "hello from node", finite: true },
      (ev) => seen.push(ev),
    );
    assert.equal(receipt.status, "terminal");
    assert.equal(receipt.outcome, "completed");
    const streamed = seen.filter((e) => e.type === "message.delta").map((e) => e.payload.text).join("");
    assert.equal(streamed, receipt.result.text);
    const seqs = seen.map((e) => e.seq);
    assert.deepEqual(seqs, seqs.map((_, i) => seqs[0] + i), "gap-free and in order");
    // resume: the same session with its transcript
    const again = await client.resume(snap.session_id);
    assert.equal(again.messages.at(-1).content, receipt.result.text);
  });

  test("retrying with the same input id admits once; other text under it is a conflict", async () => {
    const { session_id } = await client.createSession();
    const first = await client.submit({ session_id, input_id: "same-id", text: "one", finite: true });
    const retry = await client.submit({ session_id, input_id: "same-id", text: "one", finite: true });
    assert.equal(retry.admission_id, first.admission_id);
    await assert.rejects(
      client.submit({ session_id, input_id: "same-id", text: "two", finite: true }),
      (err) => err instanceof TetherError && err.reason === "admission_conflict"
        && err.data.admission_id === first.admission_id,
    );
    // input ids are per session: the same id in another session is another input
    const other = await client.createSession();
    const there = await client.submit({ session_id: other.session_id, input_id: "same-id", text: "one" });
    assert.notEqual(there.admission_id, first.admission_id);
  });

  test("a string cut inside a surrogate pair settles the call with parse_error", async () => {
    const { session_id } = await client.createSession();
    const cut = "emoji: \u{1F600}".slice(0, -1); // a lone high surrogate, as JSON.stringify writes it
    await assert.rejects(
      client.call("prompt.submit", { session_id, input_id: "cut", text: cut }),
      (err) => err instanceof TetherError && err.reason === "parse_error" && err.data.problem === "lone_surrogate",
    );
    assert.deepEqual(await client.call("ping"), { pong: true });
  });

  test("after_seq beyond the session's end is refused with fields", async () => {
    const { session_id } = await client.createSession();
    await assert.rejects(
      client.call("session.events.since", { session_id, after_seq: 99 }),
      (err) => err.reason === "invalid_params" && err.data.fields[0].loc === "after_seq",
    );
  });
});

describe("over TCP with a bearer token", () => {
  let owner;
  let token;
  before(async () => {
    owner = await startOwner();
    const unix = await connect({ home: owner.home });
    token = (await unix.call("token.create", { label: "node test" })).token;
    unix.close();
  });
  after(async () => owner?.stop());

  test("a valid token serves calls; a wrong one is refused with its status", async () => {
    const client = await connect({ url: owner.url, token });
    assert.deepEqual(await client.call("ping"), { pong: true });
    const { session_id } = await client.createSession();
    const receipt = await client.submitAndWait({ session_id, text: "over tcp", finite: true });
    assert.equal(receipt.outcome, "completed");
    client.close();
    await assert.rejects(connect({ url: owner.url, token: "tt_wrong" }), /401/);
  });
});

describe("a fleet: two nodes on one database", { skip: !STORE_URL && "no PostgreSQL (TETHER_TEST_STORE)" }, () => {
  test("a client given both URLs carries on on the second when the first goes", async () => {
    // both start before anything is submitted: a starting node recovers others' turns
    const a = await startOwner(newHome(), { store: STORE_URL });
    const b = await startOwner(newHome(), { store: STORE_URL });
    try {
      const unix = await connect({ home: a.home });
      const token = (await unix.call("token.create", { label: "fleet" })).token;
      unix.close();
      assert.deepEqual(parseUrls(` ${a.url}, ,${b.url},${a.url}`), [a.url, b.url]);
      const client = await connect({ url: [a.url, b.url], token, retrySeconds: 30 });
      assert.equal((await client.call("runtime.describe")).pid, a.proc.pid);
      const { session_id } = await client.createSession();
      await a.kill();
      const params = { session_id, input_id: "fleet-1", text: "after the first node went", finite: true };
      const receipt = await client.submitAndWait(params);
      assert.equal(receipt.outcome, "completed");
      assert.equal((await client.call("runtime.describe")).pid, b.proc.pid);
      // the same input id on the node now serving: the same admission
      assert.equal((await client.submit(params)).admission_id, receipt.admission_id);
      client.close();
      // a token minted on a is good on b, and a list with a dead node first still connects
      const late = await connect({ url: `${a.url},${b.url}`, token });
      assert.equal((await late.call("runtime.describe")).pid, b.proc.pid);
      late.close();
    } finally {
      await a.stop();
      await b.stop();
    }
  });
});

describe("a stream that outlives its owner", () => {
  test("resumes by after_seq after a crash, without duplicates or holes", async () => {
    const home = newHome();
    let owner = await startOwner(home, { tcp: false });
    const client = await connect({ home: home.home, retrySeconds: 30 });
    const { session_id } = await client.createSession();
    const first = await client.submitAndWait({ session_id, text: "before the crash", finite: true });
    assert.equal(first.outcome, "completed");
    const stream = client.events(session_id, { afterSeq: 0 });
    const got = [];
    // everything so far, replayed from seq 1
    for await (const ev of stream) {
      got.push(ev);
      if (ev.type === "message.complete") break;
    }
    await owner.kill();
    owner = await startOwner(home, { tcp: false });
    // a fresh connection submits; the old stream must reconnect and deliver it
    const other = await connect({ home: home.home });
    const second = await other.submit({ session_id, text: "after the restart", finite: true });
    for await (const ev of stream) {
      got.push(ev);
      if (ev.type === "message.complete" && ev.payload.admission_id === second.admission_id) break;
    }
    const seqs = got.map((e) => e.seq);
    assert.deepEqual(seqs, seqs.map((_, i) => i + 1));
    other.close();
    client.close();
    await owner.stop();
  });

  test("submitAndWait across an owner restart: one admission, the final receipt", { skip: !RELEASE_DIR }, async () => {
    const home = newHome();
    home.config += "daemon:\n  unknown_policy: interrupt\n";
    let owner = await startOwner(home, { tcp: false });
    const client = await connect({ home: home.home, retrySeconds: 30 });
    const { session_id } = await client.createSession();
    const waiting = client.submitAndWait({ session_id, input_id: "held-1", text: "HOLD:restart1 now", finite: true });
    await until(async () => (await client.receipt(session_id, { input_id: "held-1" }).catch(() => null))?.status === "started",
      "the held turn to start");
    await owner.kill(); // a crash mid-turn: the new owner settles it as interrupted
    release("restart1");
    owner = await startOwner(home, { tcp: false });
    const receipt = await waiting;
    assert.equal(receipt.input_id, "held-1");
    assert.equal(receipt.status, "terminal");
    assert.equal(receipt.outcome, "interrupted");
    const all = await client.call("prompt.receipt", { session_id, input_id: "held-1" });
    assert.equal(all.admission_id, receipt.admission_id);
    client.close();
    await owner.stop();
  });
});

test("submitAndWait names tether resolve when a crash leaves the turn unknown", { skip: !RELEASE_DIR }, async () => {
  const home = newHome(); // the default policy: unknown admissions wait for the user
  let owner = await startOwner(home, { tcp: false });
  const client = await connect({ home: home.home, retrySeconds: 30 });
  const { session_id } = await client.createSession();
  // the rejection may come while the new owner is still starting: catch it now
  const waiting = client.submitAndWait({ session_id, input_id: "held-2", text: "HOLD:restart2 now", finite: true })
    .then(() => null, (err) => err);
  await until(async () => (await client.receipt(session_id, { input_id: "held-2" }).catch(() => null))?.status === "started",
    "the held turn to start");
  await owner.kill();
  release("restart2");
  owner = await startOwner(home, { tcp: false });
  const err = await waiting;
  assert.ok(err instanceof UnknownAdmission, String(err));
  assert.equal(err.receipt.status, "unknown");
  assert.match(err.message, /tether resolve/);
  client.close();
  await owner.stop();
});

test("a stream that stops reading gets a replay gap and recovers every event once", { skip: !PROVIDER_URL }, async () => {
  const home = newHome();
  home.config += "daemon:\n  viewer_queue_events: 4\n";
  const owner = await startOwner(home, { tcp: false });
  let socket = null; // the slow client's socket, to stop reading it
  const dial = () => new Promise((resolve, reject) => {
    const ws = new WebSocket("ws://localhost/", ["tether.v1"], {
      createConnection: () => (socket = netConnect(join(home.home, "daemon.sock"))),
    });
    ws.once("error", reject);
    ws.once("open", () => resolve({
      send: (t) => ws.send(t),
      close: () => ws.close(),
      onMessage: (h) => ws.on("message", (d) => h(d.toString())),
      onClose: (h) => ws.on("close", (c, r) => h(c, r.toString())),
    }));
  });
  const slow = await TetherClient.open(dial, { retrySeconds: 30 });
  const fast = await connect({ home: home.home });
  try {
  const { session_id } = await fast.createSession();
  const stream = slow.events(session_id, { afterSeq: 0 });
  await stream.open();
  socket.pause();
  const admitted = [];
  for (let n = 0; n < 12; n++) {
    admitted.push((await fast.submitAndWait({ session_id, text: `BIG ${n}`, finite: true })).admission_id);
  }
  const { last_seq } = await fast.resume(session_id);
  socket.resume();
  const got = [];
  for await (const ev of stream) {
    got.push(ev);
    if (ev.seq === last_seq) break;
  }
  assert.deepEqual(got.map((e) => e.seq), got.map((_, i) => i + 1), "every event once, in order");
  assert.equal(got.length, last_seq);
  assert.equal(got.filter((e) => e.type === "message.complete").length, admitted.length);
  assert.ok(got.every((e) => e.type !== "session.replay_gap"), "the notice is handled, not yielded");
  assert.ok(stream.attachments > 1, "the owner dropped the slow viewer and the stream resubscribed");
  } finally {
    slow.close();
    fast.close();
    await owner.stop();
  }
});

describe("the protocol.md Node example", () => {
  test("runs as documented against a real owner", async () => {
    const { readFileSync } = await import("node:fs");
    const doc = readFileSync(new URL("../../../docs/protocol.md", import.meta.url), "utf8");
    const example = readFileSync(new URL("../examples/minimal.mjs", import.meta.url), "utf8");
    assert.ok(doc.includes(example.trim()), "docs/protocol.md shows examples/minimal.mjs verbatim");
    const owner = await startOwner();
    try {
      const out = execFileSync(process.execPath, [new URL("../examples/minimal.mjs", import.meta.url).pathname], {
        env: { ...process.env, TETHER_HOME: owner.home }, encoding: "utf8", timeout: 60000,
      });
      assert.match(out, /outcome: completed/);
    } finally {
      await owner.stop();
    }
  });
});

test("ConnectionLost is what a pending call gets when the owner goes", async () => {
  const owner = await startOwner(newHome(), { tcp: false });
  const client = await connect({ home: owner.home, retrySeconds: 0 });
  const { session_id } = await client.createSession();
  const pending = PROVIDER_URL
    ? client.call("prompt.submit", { session_id, input_id: "x", text: "HOLD:never-released", finite: true })
    : null;
  if (pending) await pending; // admitted; now the owner dies with the connection open
  const stream = client.events(session_id);
  await stream.open();
  await owner.kill();
  await assert.rejects(client.call("ping"), (err) => err instanceof ConnectionLost || err.name === "OwnerUnavailable");
  client.close();
});

test("an owner that names another protocol is reported once per protocol, by console.warn by default", async () => {
  // a transport that answers like an owner of another protocol version
  const dial = async () => {
    let deliver = () => {};
    return {
      send: (text) => {
        const { id, method } = JSON.parse(text);
        const result = method === "runtime.describe" ? { protocol: "tether/0", version: "0.0.1" } : { pong: true };
        queueMicrotask(() => deliver(JSON.stringify({ jsonrpc: "2.0", id, result })));
      },
      close: () => {},
      onMessage: (handler) => { deliver = handler; },
      onClose: () => {},
    };
  };
  const seen = [];
  const client = await TetherClient.open(dial, { onProtocolMismatch: (served, expected) => seen.push([served, expected]) });
  assert.deepEqual(await client.call("ping"), { pong: true }, "the client carries on");
  await until(() => seen.length === 1);
  assert.deepEqual(seen, [["tether/0", PROTOCOL]]);
  client.close();

  const warnings = [];
  const warn = console.warn;
  console.warn = (...args) => warnings.push(args.join(" "));
  try {
    const quiet = await TetherClient.open(dial, { onProtocolMismatch: null });
    await quiet.call("ping");
    quiet.close();
    const loud = await TetherClient.open(dial);
    await until(() => warnings.length === 1);
    loud.close();
  } finally {
    console.warn = warn;
  }
  assert.equal(warnings[0], protocolMismatchMessage("tether/0"));
  assert.match(warnings[0], /owner speaks protocol "tether\/0", this client was built for "tether\/1"/);
});
