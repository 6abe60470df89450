"use strict";
var __importDefault = (this && this.__importDefault) || function (mod) {
    return (mod && mod.__esModule) ? mod : { "default": mod };
};
Object.defineProperty(exports, "__esModule", { value: true });
exports.EventClient = void 0;
// Copied verbatim from the seeds (part 2, 1c): the client the gateway must
// serve unchanged.
// shared/js/prom-lib/ws/client.ts
const ws_1 = __importDefault(require("ws"));
class EventClient {
    constructor(url, token) {
        this.pending = new Map();
        this.handlers = new Map(); // key = `${topic}::${group}`
        this.ws = new ws_1.default(url);
        this.ws.on("open", () => {
            this.send({ op: "AUTH", token }, true);
        });
        this.ws.on("message", (raw) => this.onMessage(raw.toString()));
    }
    send(obj, wait = false) {
        if (!wait)
            return this.ws.send(JSON.stringify(obj));
        const corr = Math.random().toString(16).slice(2);
        obj.corr = corr;
        this.ws.send(JSON.stringify(obj));
        return new Promise((resolve, reject) => {
            this.pending.set(corr, (ok, payload) => ok ? resolve(payload) : reject(payload));
            setTimeout(() => {
                if (this.pending.delete(corr))
                    reject(new Error("timeout"));
            }, 15000);
        });
    }
    async onMessage(s) {
        const msg = JSON.parse(s);
        if (msg.op === "OK" || msg.op === "ERR") {
            const cb = this.pending.get(msg.corr);
            if (cb) {
                this.pending.delete(msg.corr);
                return cb(msg.op === "OK", msg);
            }
        }
        if (msg.op === "EVENT") {
            const key = `${msg.topic}::${msg.group}`;
            const h = this.handlers.get(key);
            if (!h)
                return;
            try {
                await h(msg.event, msg.ctx);
                // default: immediate ack
                this.send({ op: "ACK", topic: msg.topic, group: msg.group, id: msg.event.id });
            }
            catch (e) {
                this.send({ op: "NACK", topic: msg.topic, group: msg.group, id: msg.event.id, reason: e.message ?? String(e) });
            }
        }
    }
    async publish(topic, payload, opts) {
        return this.send({ op: "PUBLISH", topic, payload, opts }, true);
    }
    async subscribe(topic, group, handler, opts) {
        this.handlers.set(`${topic}::${group}`, handler);
        return this.send({ op: "SUBSCRIBE", topic, group, opts }, true);
    }
    async unsubscribe(topic, group) {
        this.handlers.delete(`${topic}::${group}`);
        return this.send({ op: "UNSUBSCRIBE", topic, group }, true);
    }
    modAck(topic, group, id, extend_ms) {
        this.send({ op: "MODACK", topic, group, id, extend_ms });
    }
}
exports.EventClient = EventClient;
