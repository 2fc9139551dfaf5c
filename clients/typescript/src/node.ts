// Node.js transports: the Unix socket of a home (any path, spaces included) or the
// TCP listener with a bearer token (one node, or several nodes of a fleet with
// failover between them), both through the `ws` package.
import { connect as netConnect } from "node:net";
import { homedir, platform } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { type ClientOptions, type Dial, TetherClient, type Transport } from "./core.js";

export const SUBPROTOCOL = "tether.v1";
/** the frames the owner accepts are at most 4 MiB by default; replies can be larger */
const MAX_PAYLOAD = 256 * 1024 * 1024;

/** The home a Python `tether` would use: $TETHER_HOME, else the platform's data dir. */
export function defaultHome(): string {
  const env = process.env.TETHER_HOME;
  if (env) return env.startsWith("~") ? join(homedir(), env.slice(1)) : env;
  if (platform() === "darwin") return join(homedir(), "Library", "Application Support", "tether");
  if (platform() === "win32") return join(process.env.LOCALAPPDATA ?? join(homedir(), "AppData", "Local"), "tether");
  return join(process.env.XDG_DATA_HOME || join(homedir(), ".local", "share"), "tether");
}

export interface NodeConnectOptions extends ClientOptions {
  /** the home whose daemon.sock to use (default: `defaultHome()`) */
  home?: string;
  /** the socket path itself (wins over `home`) */
  socketPath?: string;
  /** a TCP listener's URL (`ws://127.0.0.1:PORT/`), with `token`; or the nodes of a
   *  fleet (a list, or one string with commas), tried in order with failover */
  url?: string | string[];
  token?: string;
}

function wrap(ws: WebSocket): Transport {
  return {
    send: (text) => ws.send(text),
    close: () => ws.close(1000),
    onMessage: (handler) => ws.on("message", (data, isBinary) => {
      if (!isBinary) handler(data.toString());
    }),
    onClose: (handler) => ws.on("close", (code, reason) => handler(code, reason.toString())),
  };
}

function opened(ws: WebSocket): Promise<Transport> {
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => reject(err);
    ws.once("error", fail);
    ws.once("unexpected-response", (req, res) => {
      // 401 (token), 403 (origin), 503 (overloaded): say which, not "socket hang up"
      ws.off("error", fail);
      ws.on("error", () => {});
      let body = "";
      res.on("data", (chunk: Buffer) => (body += chunk.toString()));
      res.on("end", () => {
        reject(new Error(`the owner refused the connection: ${res.statusCode} ${body.trim()}`));
        req.destroy();
      });
    });
    ws.once("open", () => {
      ws.off("error", fail);
      ws.on("error", () => {}); // a later error ends in "close", which the client handles
      resolve(wrap(ws));
    });
  });
}

/** The URLs `url` names: one, a comma-separated string, or a list (whose items may
 *  hold commas too); blanks and repeats left out. */
export function parseUrls(url: string | string[] | undefined): string[] {
  const parts = (Array.isArray(url) ? url : [url ?? ""]).flatMap((u) => u.split(","));
  return [...new Set(parts.map((p) => p.trim()).filter((p) => p !== ""))];
}

/**
 * A `Dial` over several nodes of a fleet (any node serves any session; a token
 * minted on one works on all). Each dial tries every node once, in order, from the
 * node that worked last; once a connection was made, a later dial follows its loss,
 * so it starts at the next node and tries the lost one last. The client's redial
 * loop repeats such rounds with backoff for `retrySeconds`.
 */
export function failoverDial(urls: string[], dialOne: (url: string) => Promise<Transport>): Dial {
  const [only] = urls;
  if (urls.length === 1 && only !== undefined) return () => dialOne(only);
  let current = 0;
  let connected = false;
  return async () => {
    const start = connected ? (current + 1) % urls.length : current;
    const failures: string[] = [];
    for (const url of [...urls.slice(start), ...urls.slice(0, start)]) {
      try {
        const transport = await dialOne(url);
        current = urls.indexOf(url);
        connected = true;
        return transport;
      } catch (err) {
        failures.push(`${url}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    throw new Error(`no node answered: ${failures.join("; ")}`);
  };
}

/** A `Dial` for the options: TCP if `url` is given (failing over between several
 *  URLs), else the Unix socket. */
export function nodeDial(options: NodeConnectOptions = {}): Dial {
  const urls = parseUrls(options.url);
  if (urls.length > 0) {
    const headers = options.token ? { Authorization: `Bearer ${options.token}` } : undefined;
    return failoverDial(urls, (url) => opened(new WebSocket(url, [SUBPROTOCOL], { headers, maxPayload: MAX_PAYLOAD, perMessageDeflate: false })));
  }
  const path = options.socketPath ?? join(options.home ?? defaultHome(), "daemon.sock");
  // the URL's host is a placeholder: the socket comes from createConnection, so a
  // path with spaces (or anything ws+unix:// URLs cannot spell) just works
  return () => opened(new WebSocket("ws://localhost/", [SUBPROTOCOL], {
    createConnection: () => netConnect(path),
    maxPayload: MAX_PAYLOAD,
    perMessageDeflate: false,
  }));
}

/** Connect to an owner from Node: `connect({ home })`, `connect({ url, token })`,
 *  `connect({ url: [nodeA, nodeB], token })`. */
export function connect(options: NodeConnectOptions = {}): Promise<TetherClient> {
  return TetherClient.open(nodeDial(options), options);
}
