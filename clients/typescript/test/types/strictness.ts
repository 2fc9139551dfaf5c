// Compiled by `npm test` (tsconfig.test.json): each @ts-expect-error must meet an
// error, so a schema or generator change that loosens these types fails the build.
import type { AnyEvent, Methods, PromptReceiptParams, PromptSubmitParams, TetherClient } from "../../src/index.js";

declare const client: TetherClient;

const ok: PromptSubmitParams = { session_id: "s", input_id: "i", text: "t", finite: true };
// @ts-expect-error finite is a boolean, not the string "true"
const wrongFinite: PromptSubmitParams = { session_id: "s", input_id: "i", text: "t", finite: "true" };
// @ts-expect-error unknown keys are refused by the owner and by the type
const extraKey: PromptSubmitParams = { session_id: "s", input_id: "i", text: "t", param: 1 };
// @ts-expect-error a provider the owner does not have
const badProvider: PromptSubmitParams = { session_id: "s", input_id: "i", text: "t", provider: "nope" };
// @ts-expect-error prompt.receipt takes exactly one of admission_id and input_id
const neither: PromptReceiptParams = { session_id: "s" };
const byInput: PromptReceiptParams = { session_id: "s", input_id: "i" };

async function typed(): Promise<void> {
  const r = await client.call("prompt.submit", ok);
  const status: "queued" | "started" | "unknown" | "terminal" = r.status;
  // @ts-expect-error a method's params are checked at the call
  await client.call("prompt.submit", { session_id: "s", input_id: "i", text: 1 });
  // @ts-expect-error no such method
  await client.call("prompt.sumbit", ok);
  void status;
}

function payloadNarrows(ev: AnyEvent): string {
  if (ev.type === "message.delta") return ev.payload.text;
  if (ev.type === "session.replay_gap") {
    const seq: null = ev.seq; // a notice: no seq of its own
    return String(seq) + ev.payload.last_seq;
  }
  if (ev.type === "tool.start") return ev.payload.arguments;
  return ev.type;
}

type _Check = Methods["ping"]["result"]["pong"] extends boolean ? true : never;
export { byInput, extraKey, badProvider, neither, payloadNarrows, typed, wrongFinite };
export type { _Check };
