// Generates src/protocol.ts from the owner's JSON Schema (`tether schema`).
//
//   node scripts/gen-types.mjs            write src/protocol.ts
//   node scripts/gen-types.mjs --check    fail if src/protocol.ts is stale
//
// The schema comes from $TETHER_SCHEMA (a file) or from running `tether schema`
// ($TETHER_BIN, default `tether` on PATH). Every `$defs` entry becomes one type
// (json-schema-to-typescript); the maps a typed client needs (method -> params
// and result, event type -> payload, error reason -> data) are written from the
// schema's own tables.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { compile } from "json-schema-to-typescript";

const here = dirname(fileURLToPath(import.meta.url));
const target = join(here, "..", "src", "protocol.ts");
const check = process.argv.includes("--check");

function loadSchema() {
  if (process.env.TETHER_SCHEMA) return JSON.parse(readFileSync(process.env.TETHER_SCHEMA, "utf8"));
  const bin = process.env.TETHER_BIN || "tether";
  try {
    return JSON.parse(execFileSync(bin, ["schema"], { encoding: "utf8", maxBuffer: 64 << 20 }));
  } catch (err) {
    console.error(`cannot run \`${bin} schema\` (${err.message}); set TETHER_BIN or TETHER_SCHEMA`);
    process.exit(2);
  }
}

const name = (ref) => ref.$ref.split("/").pop();
const q = (s) => JSON.stringify(s);

async function generate(schema) {
  // json-schema-to-typescript reads draft-07 `definitions`: same content, other key
  const text = JSON.stringify(schema.$defs).replaceAll('"#/$defs/', '"#/definitions/');
  const definitions = JSON.parse(text);
  for (const [key, def] of Object.entries(definitions)) {
    // an object with its own properties and a oneOf of rules (prompt.receipt's
    // "exactly one of"): the generator would keep only the oneOf; as an allOf it
    // becomes the intersection of the object and the union
    if (def.properties && def.oneOf) {
      const { oneOf, ...base } = def;
      definitions[key] = { title: def.title, description: def.description,
        allOf: [{ ...base, title: undefined, description: undefined }, { oneOf }] };
    }
  }
  const root = {
    title: "TetherProtocolTypes",
    type: "object",
    additionalProperties: false,
    properties: Object.fromEntries(Object.keys(definitions).map((k) => [k, { $ref: `#/definitions/${k}` }])),
    definitions,
  };
  let out = await compile(root, "TetherProtocolTypes", {
    bannerComment: "",
    additionalProperties: false,
    strictIndexSignatures: true,
    format: false,
    unknownAny: true,
    maxItems: -1,
  });
  const lines = [
    "/* eslint-disable */",
    `// Generated from \`tether schema\` (protocol ${schema.protocol}) by scripts/gen-types.mjs.`,
    "// Do not edit: run `npm run gen` after changing the protocol.",
    "",
    out.trim(),
    "",
    `export const PROTOCOL = ${q(schema.protocol)} as const;`,
    "",
    "/** Every method: its params (what the owner accepts) and result (what it sends). */",
    "export interface Methods {",
    ...Object.entries(schema.methods).map(([m, e]) =>
      `  /** ${e.doc} */\n  ${q(m)}: { params: ${name(e.params)}; result: ${name(e.result)} };`),
    "}",
    "export type MethodName = keyof Methods;",
    "",
    "/** Event type -> its payload. */",
    "export interface EventPayloads {",
    ...Object.entries(schema.events.payloads).map(([t, r]) => `  ${q(t)}: ${name(r)};`),
    "}",
    "export type EventType = keyof EventPayloads;",
    `export const EVENT_TYPES: readonly EventType[] = ${JSON.stringify(schema.events.types)};`,
    "",
    "/** Error reason -> its data; the code of each is in ERROR_CODES. */",
    "export interface ErrorDataByReason {",
    ...schema.errors.map((e) => `  ${q(e.reason)}: ${name(e.data)};`),
    "}",
    "export type ErrorReason = keyof ErrorDataByReason;",
    `export const ERROR_CODES: Readonly<Record<ErrorReason, number>> = ${JSON.stringify(
      Object.fromEntries(schema.errors.map((e) => [e.reason, e.code])))};`,
    "",
  ];
  return lines.join("\n");
}

const generated = await generate(loadSchema());
if (check) {
  let current = "";
  try { current = readFileSync(target, "utf8"); } catch { /* missing counts as stale */ }
  if (current !== generated) {
    console.error("src/protocol.ts is stale: the protocol changed; run `npm run gen` in clients/typescript");
    process.exit(1);
  }
  console.log("src/protocol.ts matches `tether schema`");
} else {
  writeFileSync(target, generated);
  console.log(`wrote ${target}`);
}
