"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
exports.PromClient = void 0;
class PromClient {
    constructor(url, token) {
        this.handlers = new Map();
        this.url = url;
        this.token = token;
    }
    async connect() {
        if (this.openOnce)
            return this.openOnce;
        this.openOnce = new Promise((resolve, reject) => {
            const WSImpl = (typeof WebSocket !== "undefined") ? WebSocket : require("ws");
            const ws = this.ws = new WSImpl(this.url);
            ws.onopen = () => {
                ws.send(JSON.stringify({ op: "AUTH", token: this.token }));
            };
            ws.onmessage = (ev) => {
                const msg = JSON.parse(ev.data?.toString?.() ?? ev.data);
                if (msg.op === "OK")
                    return resolve();
                if (msg.op === "ERR")
                    return reject(new Error(`${msg.code}: ${msg.msg}`));
                if (msg.op === "EVENT") {
                    const key = `${msg.topic}::${msg.group}`;
                    const h = this.handlers.get(key);
                    if (!h)
                        return;
                    Promise.resolve(h(msg.event, msg.ctx))
                        .then(() => this.ws?.send(JSON.stringify({ op: "ACK", topic: msg.topic, group: msg.group, id: msg.event.id })))
                        .catch((e) => this.ws?.send(JSON.stringify({ op: "NACK", topic: msg.topic, group: msg.group, id: msg.event.id, reason: String(e?.message ?? e) })));
                }
            };
            ws.onerror = (e) => reject(new Error("ws_error"));
        });
        return this.openOnce;
    }
    async publish(topic, payload, opts) {
        await this.connect();
        this.ws.send(JSON.stringify({ op: "PUBLISH", topic, payload, opts }));
    }
    async subscribe(topic, group, handler, opts) {
        await this.connect();
        this.handlers.set(`${topic}::${group}`, handler);
        this.ws.send(JSON.stringify({ op: "SUBSCRIBE", topic, group, opts }));
    }
    async unsubscribe(topic, group) {
        await this.connect();
        this.handlers.delete(`${topic}::${group}`);
        this.ws.send(JSON.stringify({ op: "UNSUBSCRIBE", topic, group }));
    }
    close() { this.ws?.close(); }
}
exports.PromClient = PromClient;
