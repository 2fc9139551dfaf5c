// Node entry point: everything, with the ws-based transports.
export * from "./protocol.js";
export * from "./core.js";
export { SUBPROTOCOL, connect, defaultHome, failoverDial, nodeDial, parseUrls, type NodeConnectOptions } from "./node.js";
