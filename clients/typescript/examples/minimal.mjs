// A tether client in plain Node with only the `ws` package: create a session,
// submit a prompt with an input id, print the streamed answer and the outcome.
import { connect } from "node:net";
import { homedir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";

const home = process.env.TETHER_HOME ?? join(homedir(), ".local", "share", "tether");
// ws+unix:// URLs cannot hold every path (a space breaks them): hand ws the socket
const ws = new WebSocket("ws://localhost/", ["tether.v1"], {
  createConnection: () => connect(join(home, "daemon.sock")),
});
let nextId = 1;
const waiting = new Map();
const call = (method, params) => new Promise((resolve, reject) => {
  const id = nextId++;
  waiting.set(id, { resolve, reject });
  ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
});
const events = []; // events may arrive before the reply that caused them: buffer
let onEvent = () => {};
ws.on("message", (data) => {
  const msg = JSON.parse(data.toString());
  if (msg.method === "event") return onEvent(msg.params);
  const w = waiting.get(msg.id);
  waiting.delete(msg.id);
  if (msg.error) w.reject(new Error(`${msg.error.message}: ${msg.error.data.detail}`));
  else w.resolve(msg.result);
});
await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));

const session = await call("session.create", { title: "minimal example" });
onEvent = (ev) => events.push(ev);
const receipt = await call("prompt.submit", {
  session_id: session.session_id,
  input_id: `example-${Date.now()}`, // retrying with the same id never admits twice
  text: "Say hello.",
  finite: true,
});
const done = new Promise((resolve) => {
  const check = (ev) => {
    if (ev.type === "message.delta" && ev.admission_id === receipt.admission_id) process.stdout.write(ev.payload.text);
    if (ev.type === "message.complete" && ev.payload.admission_id === receipt.admission_id) resolve(ev);
  };
  events.splice(0).forEach(check); // what came before the reply, then the rest
  onEvent = check;
});
const complete = await done;
console.log(`\noutcome: ${complete.payload.outcome}`);
ws.close();
