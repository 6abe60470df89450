"use strict";
Object.defineProperty(exports, "__esModule", { value: true });
// Drives the seeds' EventClient and PromClient, unchanged, against a gateway:
// node dist/smoke.js <ws-url> <token>. Prints one JSON line with what each
// client published and received; exits 1 on a timeout or error.
const event_client_1 = require("./event_client");
const prom_client_1 = require("./prom_client");
function waitFor(cond, what, ms = 15000) {
    const deadline = Date.now() + ms;
    return new Promise((resolve, reject) => {
        const tick = () => {
            if (cond())
                return resolve();
            if (Date.now() > deadline)
                return reject(new Error("timeout waiting for " + what));
            setTimeout(tick, 10);
        };
        tick();
    });
}
async function main() {
    const [url, token, suffix] = process.argv.slice(2);
    const out = { event: { ids: [], received: [] }, prom: { received: [] } };
    // EventClient sends AUTH (with a corr) when the socket opens; frames of one
    // connection are handled in order, so it can subscribe right after.
    const ec = new event_client_1.EventClient(url, token);
    await new Promise((r) => ec.ws.once("open", r));
    await ec.subscribe("seed.event." + suffix, "g1", (e) => { out.event.received.push(e.payload.n); }, { from: "earliest" });
    for (let n = 0; n < 10; n++) {
        const ok = await ec.publish("seed.event." + suffix, { n });
        out.event.ids.push(ok.id);
    }
    await waitFor(() => out.event.received.length >= 10, "EventClient deliveries");
    // PromClient resolves connect() on the first OK (its AUTH's here) and
    // publishes without waiting for an answer.
    const pc = new prom_client_1.PromClient(url, token);
    await pc.connect();
    await pc.subscribe("seed.prom." + suffix, "g2", (e) => { out.prom.received.push(e.payload.n); }, { from: "earliest" });
    for (let n = 0; n < 3; n++)
        await pc.publish("seed.prom." + suffix, { n });
    await waitFor(() => out.prom.received.length >= 3, "PromClient deliveries");
    // Let the automatic ACKs leave before closing.
    await new Promise((r) => setTimeout(r, 100));
    console.log(JSON.stringify(out));
    ec.ws.close();
    pc.close();
}
main().then(() => process.exit(0), (err) => { console.error(String(err?.stack ?? err)); process.exit(1); });
