// The tether client, for Node and browsers alike: typed calls, resilient event
// streams, retry-safe prompts. It knows nothing of sockets: a `Dial` opens one
// (node.ts: ws over the Unix socket or TCP; browser.ts: the page's WebSocket).
import { PROTOCOL, } from "./protocol.js";
/** An error reply of the owner: `reason` names it, `data` carries what it says. */
export class TetherError extends Error {
    code;
    reason;
    data;
    constructor(code, reason, data) {
        super(`${reason}: ${data.detail}`);
        this.name = "TetherError";
        this.code = code;
        this.reason = reason;
        this.data = data;
    }
}
/** The connection closed before the reply came: the request may or may not have run. */
export class ConnectionLost extends Error {
    constructor(message = "the connection to the owner closed") {
        super(message);
        this.name = "ConnectionLost";
    }
}
/** The owner stayed unreachable for the client's whole `retrySeconds`. */
export class OwnerUnavailable extends Error {
    constructor(message) {
        super(message);
        this.name = "OwnerUnavailable";
    }
}
/** One WebSocket connection: replies matched by id, events handed to listeners. */
export class Connection {
    transport;
    nextId = 1;
    waiting = new Map();
    listeners = new Map();
    closers = new Set();
    closed = false;
    constructor(transport) {
        this.transport = transport;
        transport.onMessage((text) => this.receive(text));
        transport.onClose(() => this.lost());
    }
    call(method, ...args) {
        if (this.closed)
            return Promise.reject(new ConnectionLost());
        const id = this.nextId++;
        const frame = { jsonrpc: "2.0", id, method, params: args[0] ?? {} };
        return new Promise((resolve, reject) => {
            this.waiting.set(id, { resolve: resolve, reject });
            try {
                this.transport.send(JSON.stringify(frame));
            }
            catch (err) {
                this.waiting.delete(id);
                reject(err instanceof Error ? err : new Error(String(err)));
            }
        });
    }
    /** Hand this session's events to `listener`; returns the function that stops it. */
    listen(sessionId, listener) {
        let set = this.listeners.get(sessionId);
        if (set === undefined)
            this.listeners.set(sessionId, (set = new Set()));
        set.add(listener);
        return () => {
            set.delete(listener);
            if (set.size === 0 && this.listeners.get(sessionId) === set) {
                this.listeners.delete(sessionId);
                // nobody here follows it any more: stop the owner sending it
                if (!this.closed)
                    this.call("session.detach", { session_id: sessionId }).catch(() => { });
            }
        };
    }
    onClose(handler) {
        if (this.closed) {
            queueMicrotask(handler);
            return () => { };
        }
        this.closers.add(handler);
        return () => this.closers.delete(handler);
    }
    close() {
        this.transport.close();
        this.lost();
    }
    receive(text) {
        let msg;
        try {
            msg = JSON.parse(text);
        }
        catch {
            return; // the owner sends JSON only; a garbled frame has no one to go to
        }
        for (const one of Array.isArray(msg) ? msg : [msg])
            this.dispatch(one);
    }
    dispatch(msg) {
        if (msg === null || typeof msg !== "object")
            return;
        if (msg.method === "event" && msg.params) {
            const event = msg.params;
            for (const listener of [...(this.listeners.get(event.session_id) ?? [])])
                listener(event);
            return;
        }
        const waiter = typeof msg.id === "number" ? this.waiting.get(msg.id) : undefined;
        if (waiter === undefined)
            return;
        this.waiting.delete(msg.id);
        if (msg.error) {
            const e = msg.error;
            waiter.reject(new TetherError(e.code, e.data?.reason ?? e.message, e.data ?? { reason: e.message, detail: "" }));
        }
        else {
            waiter.resolve(msg.result);
        }
    }
    lost() {
        if (this.closed)
            return;
        this.closed = true;
        for (const waiter of this.waiting.values())
            waiter.reject(new ConnectionLost());
        this.waiting.clear();
        for (const handler of [...this.closers])
            handler();
        this.closers.clear();
    }
}
/** The warning the client gives when an owner speaks another protocol. */
export function protocolMismatchMessage(served, expected = PROTOCOL) {
    return `tether-client: the owner speaks protocol ${JSON.stringify(served)}, this client was `
        + `built for ${JSON.stringify(expected)}: calls and events may not match its types; `
        + "install a tether-client of the owner's version";
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** The owner crashed while running this admission: whether the turn's effects
 *  happened is unknown, and the session waits until someone settles it
 *  (prompt.resolve_unknown, `tether resolve SESSION`). */
export class UnknownAdmission extends Error {
    receipt;
    constructor(receipt) {
        super(`admission ${receipt.admission_id} is unknown after an owner restart: settle it with `
            + `\`tether resolve ${receipt.session_id}\` (prompt.resolve_unknown), then resubmit if needed`);
        this.name = "UnknownAdmission";
        this.receipt = receipt;
    }
}
/** A fresh id for an input (prompt.submit's `input_id`). */
export function newInputId() {
    const c = globalThis.crypto;
    if (c?.randomUUID)
        return "in_" + c.randomUUID();
    return "in_" + Date.now().toString(36) + Math.random().toString(36).slice(2);
}
/**
 * A client of one owner. Calls go over the current connection; when it is lost,
 * `resilient` calls and event streams dial again (for up to `retrySeconds`) and
 * carry on: prompt.submit is retried with the same input id (the owner admits it
 * once), streams resume after the last seq they delivered.
 */
export class TetherClient {
    dial;
    conn;
    redial = null;
    closedByUser = false;
    retrySeconds;
    onMismatch;
    warned = new Set();
    constructor(dial, conn, options) {
        this.dial = dial;
        this.conn = conn;
        this.retrySeconds = options.retrySeconds ?? 30;
        this.onMismatch = options.onProtocolMismatch === undefined
            ? (served, expected) => console.warn(protocolMismatchMessage(served, expected))
            : options.onProtocolMismatch;
        this.checkProtocol(conn);
    }
    static async open(dial, options = {}) {
        return new TetherClient(dial, new Connection(await dial()), options);
    }
    /** Ask a new connection's owner its protocol (each connection: failover may land on
     *  another node); a mismatch goes to `onProtocolMismatch`, once per protocol. */
    checkProtocol(conn) {
        const report = this.onMismatch;
        if (report === null)
            return;
        conn.call("runtime.describe").then((d) => {
            const served = typeof d?.protocol === "string" ? d.protocol : String(d?.protocol);
            if (served === PROTOCOL || this.warned.has(served))
                return;
            this.warned.add(served);
            try {
                report(served, PROTOCOL);
            }
            catch (err) {
                console.error("tether-client: onProtocolMismatch threw:", err);
            }
        }, () => { }); // a connection lost meanwhile: the next one is checked
    }
    /** The current connection (dialling again if it was lost). */
    async connection() {
        return this.conn.closed ? this.reconnect(this.conn) : this.conn;
    }
    /** A new connection to replace `failed` (shared by everyone who saw it fail). */
    reconnect(failed) {
        if (this.conn !== failed && !this.conn.closed)
            return Promise.resolve(this.conn);
        if (this.closedByUser)
            return Promise.reject(new ConnectionLost("the client was closed"));
        if (this.redial === null) {
            this.redial = this.dialAgain().finally(() => {
                this.redial = null;
            });
        }
        return this.redial;
    }
    async dialAgain() {
        const deadline = Date.now() + this.retrySeconds * 1000;
        let pause = 50;
        let last;
        for (;;) {
            try {
                this.conn = new Connection(await this.dial());
                this.checkProtocol(this.conn);
                return this.conn;
            }
            catch (err) {
                last = err;
            }
            if (Date.now() + pause > deadline) {
                throw new OwnerUnavailable(`the owner stayed unreachable for ${this.retrySeconds}s: ${String(last)}`);
            }
            await sleep(pause);
            pause = Math.min(pause * 2, 1000);
        }
    }
    /** Run `fn` on a connection; if that connection is lost, again on the next one. */
    async resilient(fn) {
        for (;;) {
            const conn = await this.connection();
            try {
                return await fn(conn);
            }
            catch (err) {
                if (!(err instanceof ConnectionLost) || this.closedByUser)
                    throw err;
                await this.reconnect(conn);
            }
        }
    }
    /** One call on the current connection (not retried: the caller decides). */
    async call(method, ...args) {
        return (await this.connection()).call(method, ...args);
    }
    createSession(params = {}) {
        // idempotent by request_id: safe to retry
        const p = { request_id: params.request_id ?? newInputId().replace("in_", "req_"), ...params };
        return this.resilient((c) => c.call("session.create", p));
    }
    resume(sessionId, afterSeq) {
        const p = afterSeq === undefined ? { session_id: sessionId } : { session_id: sessionId, after_seq: afterSeq };
        return this.resilient((c) => c.call("session.resume", p));
    }
    /** Admit a prompt; retried on a lost connection with the same input id (one admission). */
    submit(params) {
        const p = { ...params, input_id: params.input_id ?? newInputId() };
        return this.resilient((c) => c.call("prompt.submit", p));
    }
    receipt(sessionId, key) {
        return this.resilient((c) => c.call("prompt.receipt", { session_id: sessionId, ...key }));
    }
    cancel(sessionId, admissionId) {
        return this.resilient((c) => c.call("prompt.cancel", { session_id: sessionId, admission_id: admissionId }));
    }
    /** The session's events as an async iterator: gap-free, deduped, across reconnects.
     *  Without `afterSeq` it starts at the session's current end (live events only). */
    events(sessionId, options = {}) {
        return new EventStream(this, sessionId, options.afterSeq ?? null);
    }
    /**
     * Submit and wait until the admission is terminal; its final receipt. The event
     * stream is opened first, so events that arrive before the submit's reply
     * (session.info, message.start) are buffered, not lost; `onEvent` sees every
     * event of the session meanwhile.
     */
    async submitAndWait(params, onEvent) {
        const p = { ...params, input_id: params.input_id ?? newInputId() };
        const stream = this.events(p.session_id);
        try {
            await stream.open();
            const receipt = await this.submit(p);
            if (receipt.status === "terminal")
                return receipt;
            let unknown = null;
            // after a reconnect, look at the receipt: an owner that crashed mid-turn
            // leaves the admission unknown, and no event will ever settle it by itself
            stream.onReattach = async () => {
                const now = await this.receipt(p.session_id, { admission_id: receipt.admission_id });
                if (now.status === "unknown") {
                    unknown = new UnknownAdmission(now);
                    stream.close();
                }
            };
            for await (const event of stream) {
                onEvent?.(event);
                if (event.type === "message.complete" && event.payload.admission_id === receipt.admission_id)
                    break;
            }
            if (unknown !== null)
                throw unknown;
            return await this.receipt(p.session_id, { admission_id: receipt.admission_id });
        }
        finally {
            stream.close();
        }
    }
    close() {
        this.closedByUser = true;
        this.conn.close();
    }
}
/**
 * One session's events, in seq order, each once. On a hole in the seqs it pages
 * the missing events with session.events.since; on `session.replay_gap` (the
 * owner dropped this viewer for reading too slowly; its seq is null) and on a
 * lost connection it resumes with `after_seq` = the last seq it delivered.
 */
export class EventStream {
    client;
    sessionId;
    lastSeq;
    snapshot = null;
    /** called after every re-subscription but the first (a reconnect, a replay gap) */
    onReattach = null;
    attached = 0;
    /** how many times this stream has subscribed (1 + reconnects and replay gaps) */
    get attachments() {
        return this.attached;
    }
    ready = [];
    wake = null;
    failure = null;
    done = false;
    work = Promise.resolve();
    unlisten = null;
    unclose = null;
    opened = null;
    constructor(client, sessionId, afterSeq) {
        this.client = client;
        this.sessionId = sessionId;
        this.lastSeq = afterSeq;
    }
    /** Subscribe (resolves once the snapshot is in); `next()` does it if you do not. */
    open() {
        if (this.opened === null)
            this.opened = this.enqueue(() => this.client.resilient((c) => this.attach(c)));
        return this.opened;
    }
    enqueue(job) {
        const run = this.work.then(async () => {
            if (this.done)
                return;
            try {
                await job();
            }
            catch (err) {
                this.failure = err;
                this.wakeUp();
                throw err;
            }
        });
        this.work = run.catch(() => { });
        return run;
    }
    async attach(conn) {
        this.detach();
        this.unlisten = conn.listen(this.sessionId, (event) => {
            void this.enqueue(() => this.handle(event)).catch(() => { });
        });
        this.unclose = conn.onClose(() => {
            void this.enqueue(async () => {
                await this.client.reconnect(conn);
                await this.client.resilient((c) => this.attach(c));
            }).catch(() => { });
        });
        const params = this.lastSeq === null
            ? { session_id: this.sessionId }
            : { session_id: this.sessionId, after_seq: this.lastSeq };
        const snap = await conn.call("session.resume", params);
        this.snapshot = snap;
        if (this.lastSeq === null)
            this.lastSeq = snap.last_seq;
        for (const event of snap.events ?? [])
            this.accept(event);
        if (this.lastSeq < snap.last_seq)
            await this.catchUp();
        if (this.attached++ > 0 && this.onReattach !== null)
            await this.onReattach();
    }
    async handle(event) {
        if (event.type === "session.replay_gap" && event.seq === null) {
            // the owner unsubscribed us: resubscribe from where we are
            await this.client.resilient((c) => this.attach(c));
        }
        else if (!this.accept(event)) {
            await this.catchUp();
            this.accept(event);
        }
    }
    /** Buffer `event` if it is the next seq (true), or report a hole (false). */
    accept(event) {
        const seq = event.seq;
        if (typeof seq !== "number" || this.lastSeq === null || seq <= this.lastSeq)
            return true;
        if (seq !== this.lastSeq + 1)
            return false;
        this.lastSeq = seq;
        this.ready.push(event);
        this.wakeUp();
        return true;
    }
    async catchUp() {
        for (;;) {
            const after = this.lastSeq ?? 0;
            const page = await this.client.resilient((c) => c.call("session.events.since", { session_id: this.sessionId, after_seq: after }));
            for (const event of page.events)
                this.accept(event);
            if (page.events.length === 0 || (this.lastSeq ?? 0) >= page.last_seq)
                return;
        }
    }
    wakeUp() {
        const wake = this.wake;
        this.wake = null;
        wake?.();
    }
    async next() {
        void this.open().catch(() => { });
        for (;;) {
            const event = this.ready.shift();
            if (event !== undefined)
                return { value: event, done: false };
            if (this.failure !== null)
                throw this.failure;
            if (this.done)
                return { value: undefined, done: true };
            await new Promise((resolve) => {
                this.wake = resolve;
            });
        }
    }
    async return() {
        this.close();
        return { value: undefined, done: true };
    }
    [Symbol.asyncIterator]() {
        return this;
    }
    detach() {
        this.unlisten?.();
        this.unclose?.();
        this.unlisten = this.unclose = null;
    }
    /** Stop following the session (the connection detaches once nobody follows it). */
    close() {
        this.done = true;
        this.detach();
        this.wakeUp();
    }
}
