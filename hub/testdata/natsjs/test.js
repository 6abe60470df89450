// A nats.js (v2) program that uses the hub as a native NATS client with a
// hub token: it publishes to a topic with JetStream acks, reads the topic's
// last event by subject, joins a hub group's durable consumer, and tries
// calls its token must not allow.
//
//   node test.js <nats url> <token> <plan as JSON>
//
// The plan (every field optional):
//   publish:  {subject, count}  js.publish of {"n":0} … {"n":count-1}
//   read:     {subject}         the stream by subject, then its last event by
//                               direct get and by stream message get
//   admin:    {stream, subject} account info, create, publish, delete a stream
//   refuse:   [{op, …}]         calls to try; each outcome is reported
//   consume:  {stream, consumer} bind to the consumer first, and ack what
//                               comes, beside the rest, until stdin ends
//
// It writes one JSON object a line to stdout, as it goes:
//   {"consuming": true}                        bound, its first pull sent
//   {"published": [seq, …]}
//   {"read": {"stream", "direct", "msgGet"}}
//   {"admin": {"streams", "created", "deleted"}}
//   {"refusal": {"op", "code", "error"}}      code "" when the call succeeded
//   {"got": n}                                 after the event's ack was confirmed
//   {"done": true}
// and {"error": "…"} with exit status 1 when an allowed call fails.
"use strict";

const { connect, JSONCodec } = require("nats");

const [url, token, planJSON] = process.argv.slice(2);
const plan = JSON.parse(planJSON || "{}");
const jc = JSONCodec();
const emit = (o) => process.stdout.write(JSON.stringify(o) + "\n");

async function refusal(nc, js, jsm, r) {
  switch (r.op) {
    case "publish":
      return js.publish(r.subject, jc.encode({ refused: true }));
    case "streamInfo":
      return jsm.streams.info(r.stream);
    case "directGet":
      return jsm.direct.getMessage(r.stream, { last_by_subj: r.subject });
    case "msgGet":
      return jsm.streams.getMessage(r.stream, { seq: r.seq || 1 });
    case "addConsumer":
      return jsm.consumers.add(r.stream, { durable_name: r.consumer, ack_policy: "explicit" });
    case "bindConsumer":
      return js.consumers.get(r.stream, r.consumer);
    case "deleteConsumer":
      return jsm.consumers.delete(r.stream, r.consumer);
    case "deleteStream":
      return jsm.streams.delete(r.stream);
    case "purgeStream":
      return jsm.streams.purge(r.stream);
    case "accountInfo":
      return jsm.getAccountInfo();
    case "request":
      return nc.request(r.subject, jc.encode({}), { timeout: 2000 });
    default:
      throw new Error(`unknown op ${r.op}`);
  }
}

async function main() {
  const nc = await connect({ servers: url, token, name: "natsjs-check", maxReconnectAttempts: 0 });
  const js = nc.jetstream();
  // checkAPI would ask for the account's info first, which only operators
  // may read.
  const jsm = await nc.jetstreamManager({ checkAPI: false });

  // A worker first: it joins the group before anything is published, so
  // the group's other members do not get every event before it asks.
  let consuming = Promise.resolve();
  if (plan.consume) {
    const consumer = await js.consumers.get(plan.consume.stream, plan.consume.consumer);
    const messages = await consumer.consume({ max_messages: 10 });
    // Stop when the test closes stdin: it knows when every event is in.
    process.stdin.on("end", () => messages.stop());
    process.stdin.resume();
    consuming = (async () => {
      for await (const m of messages) {
        const { n } = m.json();
        // Report only what the server confirms as acked: the group's
        // cursor moved past it, so no other member gets it again.
        if (await m.ackAck()) {
          emit({ got: n });
        }
      }
    })();
    // Once the server answers a ping, it holds the first pull.
    await nc.flush();
    emit({ consuming: true });
  }

  if (plan.publish) {
    const seqs = [];
    for (let n = 0; n < plan.publish.count; n++) {
      const ack = await js.publish(plan.publish.subject, jc.encode({ n }));
      seqs.push(ack.seq);
    }
    emit({ published: seqs });
  }

  if (plan.read) {
    const stream = await jsm.streams.find(plan.read.subject);
    const direct = await jsm.direct.getMessage(stream, { last_by_subj: plan.read.subject });
    const stored = await jsm.streams.getMessage(stream, { last_by_subj: plan.read.subject });
    emit({ read: { stream, direct: direct.json(), msgGet: stored.json() } });
  }

  if (plan.admin) {
    const info = await jsm.getAccountInfo();
    const { stream, subject } = plan.admin;
    await jsm.streams.add({ name: stream, subjects: [subject], storage: "memory" });
    await js.publish(subject, jc.encode({ admin: true }));
    const deleted = await jsm.streams.delete(stream);
    emit({ admin: { streams: info.streams, created: stream, deleted } });
  }

  for (const r of plan.refuse || []) {
    try {
      await refusal(nc, js, jsm, r);
      emit({ refusal: { op: r.op, code: "", error: "" } });
    } catch (err) {
      emit({ refusal: { op: r.op, code: err.code || "", error: String(err.message || err) } });
    }
  }

  await consuming;
  await nc.drain();
  emit({ done: true });
}

main().catch((err) => {
  emit({ error: `${err.code || ""} ${err.message || err}`.trim() });
  process.exit(1);
});
