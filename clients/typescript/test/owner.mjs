// Test helpers: real owners on fresh homes (paths with spaces), a scripted model.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const PYTHON = process.env.TETHER_PYTHON || "python3";
export const TETHER = process.env.TETHER_BIN || "tether";
export const PROVIDER_URL = process.env.TETHER_TEST_PROVIDER_URL || null;
export const RELEASE_DIR = process.env.TETHER_TEST_RELEASE_DIR || null;
/** a postgresql:// store (a fresh schema) for the fleet tests; null where there is none */
export const STORE_URL = process.env.TETHER_TEST_STORE || null;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const made = [];
const owners = new Set();
process.on("exit", () => {
  for (const proc of owners) if (proc.exitCode === null) proc.kill("SIGKILL"); // a failed test's
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A fresh home whose path holds spaces (as macOS's default home does); removed
 *  when the test file's process exits. */
export function newHome() {
  // short: a Unix socket path has at most 107 bytes
  const base = mkdtempSync(join(tmpdir(), "tether ts "));
  made.push(base);
  const home = join(base, "App Support");
  const config = PROVIDER_URL
    ? `model:\n  provider: custom\n  base_url: ${PROVIDER_URL}\n  default: test-model\n  api_key: local-test-only\n`
    : "model:\n  provider: demo\n";
  return { home, config };
}

/** Start a real owner; `tcp` adds a loopback TCP listener on a free port; `store`
 *  keeps its state in that database (a node of a fleet) instead of state.db. */
export async function startOwner({ home, config } = newHome(), { tcp = true, port = 0, store = null } = {}) {
  const { mkdirSync } = await import("node:fs");
  mkdirSync(home, { recursive: true, mode: 0o700 });
  writeFileSync(join(home, "config.yaml"), config);
  const args = ["-m", "tether.daemon", "--home", home, ...(tcp ? ["--tcp", `127.0.0.1:${port}`] : [])];
  const env = { ...process.env, TETHER_HOME: home, ...(store ? { TETHER_STORE: store } : {}) };
  const proc = spawn(PYTHON, args, { env, stdio: ["ignore", "ignore", "pipe"] });
  owners.add(proc);
  proc.once("exit", () => owners.delete(proc));
  let stderr = "";
  proc.stderr.on("data", (d) => (stderr += d));
  const desc = join(home, "daemon.json");
  for (let i = 0; i < 400; i++) {
    if (exited(proc)) throw new Error(`owner exited: ${stderr}`);
    if (existsSync(desc)) {
      try {
        const d = JSON.parse(readFileSync(desc, "utf8"));
        if (d.pid === proc.pid) {
          return {
            home, config, proc, descriptor: d, url: d.tcp_url, socketPath: join(home, "daemon.sock"),
            async stop() {
              if (exited(proc)) return;
              proc.kill("SIGTERM");
              await waitExit(proc);
            },
            async kill() {
              if (exited(proc)) return;
              proc.kill("SIGKILL");
              await waitExit(proc);
            },
          };
        }
      } catch { /* being written */ }
    }
    await sleep(50);
  }
  proc.kill("SIGKILL");
  throw new Error(`owner did not start: ${stderr}`);
}

// a process killed by a signal keeps exitCode null (signalCode says which)
const exited = (proc) => proc.exitCode !== null || proc.signalCode !== null;

function waitExit(proc) {
  return new Promise((resolve) => {
    if (exited(proc)) return resolve();
    const t = setTimeout(() => proc.kill("SIGKILL"), 20000);
    proc.once("exit", () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** Let a `HOLD:<name>` answer of the scripted model finish. */
export function release(name) {
  writeFileSync(join(RELEASE_DIR, name), "");
}

/** Poll `check` (at most `ms`) until it returns something truthy. */
export async function until(check, what, ms = 30000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await sleep(50);
  }
}
