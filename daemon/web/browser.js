// The browser transport: the page's own WebSocket. A page cannot set headers, so
// the token rides in the subprotocol list as `tether.token.<token>`.
import { TetherClient } from "./core.js";
export const SUBPROTOCOL = "tether.v1";
export const TOKEN_PREFIX = "tether.token.";
/** A `Dial` for the owner's TCP listener at `url` (e.g. `ws://127.0.0.1:8765/`). */
export function browserDial(url, token) {
    return () => new Promise((resolve, reject) => {
        const ws = new WebSocket(url, [SUBPROTOCOL, TOKEN_PREFIX + token]);
        let open = false;
        const closers = [];
        ws.onopen = () => {
            open = true;
            resolve({
                send: (text) => ws.send(text),
                close: () => ws.close(1000),
                onMessage: (handler) => {
                    ws.onmessage = (ev) => {
                        if (typeof ev.data === "string")
                            handler(ev.data);
                    };
                },
                onClose: (handler) => closers.push(handler),
            });
        };
        ws.onclose = (ev) => {
            // a refused handshake and a stopped owner both close with 1006 here: ask
            // GET /web/status to tell them apart (docs/protocol.md, "Browsers")
            if (!open)
                reject(new Error(`could not connect (close ${ev.code})`));
            for (const handler of closers)
                handler(ev.code, ev.reason);
        };
    });
}
/** Connect to an owner from a page. */
export function connectBrowser(url, token, options = {}) {
    return TetherClient.open(browserDial(url, token), options);
}
