// eventhub browser client: the WebSocket protocol of docs/protocol.md as an
// ES2020 module with no dependencies. Typings: client.d.ts beside this file.
//
//   import { EventHubClient } from "/client.js";
//   const hub = new EventHubClient(undefined, { token: "s3cret" }); // same origin /ws
//   await hub.connect();                       // resolves on the OK of AUTH
//   const { id } = await hub.publish("heartbeat.received", { pid: 1 }, { key: "h:stt:1" });
//   await hub.subscribe("process.state", "dash", (event, ctx) => { ... }, { from: "earliest" });
//   const live = await hub.live("process.state", (event, info) => { ... }, { snapshot: true });
//
// Requests (AUTH, SUBSCRIBE, UNSUBSCRIBE, PUBLISH, DELETE, CURSOR, SEEK, and ACK /
// NACK / MODACK of manual acknowledgement) carry a `corr` and their promise
// settles on the OK or ERR echoing it, or rejects after `requestTimeoutMs`
// (code "timeout"), or when the connection drops (code "unavailable").
// Automatic acknowledgements are sent without `corr` (the gateway answers
// them only on failure; such an ERR is reported as an "error" event).
//
// When the connection drops the client reconnects with exponential backoff,
// authenticates again and subscribes again every subscription; events that
// were in flight are handed back by the gateway and redelivered. A live
// subscription (no group, no acks) comes back with since: {seq} of the last
// event it delivered, so the gateway sends what was missed first; its onReady
// says whether that recovery was complete. Close codes 4500-4999 (bad_token,
// token_expired) are not retried.
//
// The client asks for batched frames in AUTH (option batch, default true):
// the gateway may then send several frames in one message, a JSON array of
// them, which the client reads in order.

/** Error carrying the gateway's stable ERR code (see docs/protocol.md). */
export class EventHubError extends Error {
  /**
   * @param {string} code stable code: an ERR code of the gateway, or one of the
   *   client's own: "timeout", "unavailable", "closed", "bad_response".
   * @param {string} msg human-readable message
   * @param {{closeCode?: number, frame?: object}} [extra]
   */
  constructor(code, msg, extra = {}) {
    super(`${code}: ${msg}`);
    this.name = "EventHubError";
    this.code = code;
    this.msg = msg;
    if (extra.closeCode !== undefined) this.closeCode = extra.closeCode;
    if (extra.frame !== undefined) this.frame = extra.frame;
  }
}

/** Version of the protocol (docs/protocol.md) this client speaks, "major.minor". */
export const PROTOCOL_VERSION = "1.1";

/** Connection states of [EventHubClient]. */
export const State = Object.freeze({
  IDLE: "idle",
  CONNECTING: "connecting",
  OPEN: "open",
  RECONNECTING: "reconnecting",
  CLOSED: "closed",
});

const DEFAULT_BACKOFF = Object.freeze({ initialMs: 100, maxMs: 5000, factor: 2, jitter: 0.5 });
const DEFAULT_REQUEST_TIMEOUT_MS = 10000;
const MAX_REASON_CHARS = 1024;

// Codes after which reconnecting cannot help without new credentials.
const TERMINAL_CODES = new Set(["bad_token", "token_expired"]);

const subKey = (topic, group) => `${topic}\u0000${group}`;

function defaultURL() {
  if (typeof location === "undefined") {
    throw new TypeError("EventHubClient: a URL is required outside a browser");
  }
  return `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}/ws`;
}

// resolveURL turns a path ("/ws") or an http(s) URL into a ws(s) URL.
function resolveURL(url) {
  if (url === undefined || url === null || url === "") return defaultURL();
  const base = typeof location === "undefined" ? undefined : location.href;
  const u = new URL(String(url), base);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  if (u.protocol !== "ws:" && u.protocol !== "wss:") {
    throw new TypeError(`EventHubClient: unsupported URL scheme ${u.protocol}`);
  }
  return u.href;
}

function errorText(err) {
  const s = err && typeof err.message === "string" ? err.message : String(err);
  return s.length > MAX_REASON_CHARS ? s.slice(0, MAX_REASON_CHARS) : s;
}

function closeError(ev) {
  const code = ev && typeof ev.code === "number" ? ev.code : 1006;
  const reason = (ev && ev.reason) || "";
  if (code >= 4500 && code <= 4999) {
    return new EventHubError(reason || "closed", `the gateway closed the connection (${code})`, { closeCode: code });
  }
  const why = reason ? `${code} ${reason}` : `${code}`;
  return new EventHubError("unavailable", `connection closed (${why})`, { closeCode: code });
}

/**
 * One subscription of a client: its handler, and the acknowledgement of its
 * events. It survives reconnects. Obtain it from [EventHubClient.subscribe].
 */
export class Subscription {
  /** @internal */
  constructor(client, topic, group, handler, manualAck, wireOpts) {
    this.topic = topic;
    this.group = group;
    this.manualAck = manualAck;
    // Internal state (underscore names are not part of the API).
    this._client = client;
    this._handler = handler;
    this._wireOpts = wireOpts;
    this._inflight = new Map(); // id -> {attempt, gen}
    this._established = false; // its SUBSCRIBE was answered OK once
    this._closed = false;
  }

  /** Whether the subscription was stopped (unsubscribe, close, or refused on resubscribe). */
  get closed() {
    return this._closed;
  }

  /** @internal */
  _frame() {
    const f = { op: "SUBSCRIBE", topic: this.topic, group: this.group };
    if (this._wireOpts) f.opts = this._wireOpts;
    return f;
  }

  /** Acknowledges event `id` (manualAck). Resolves on the gateway's OK. */
  ack(id) {
    return this._client._settle(this, "ACK", id, {});
  }

  /** Hands event `id` back for redelivery with attempt+1 (manualAck). */
  nack(id, reason) {
    return this._client._settle(this, "NACK", id, reason === undefined ? {} : { reason: errorText(reason) });
  }

  /** Extends the lease of event `id` to now + extendMs (at least 1 s). */
  modAck(id, extendMs) {
    return this._client._settle(this, "MODACK", id, { extend_ms: Math.max(0, Math.floor(Number(extendMs) || 0)) });
  }

  /** Stops the subscription; see [EventHubClient.unsubscribe]. */
  unsubscribe() {
    return this._client.unsubscribe(this.topic, this.group);
  }
}

/**
 * One live subscription of a client: every event of its topic published
 * after it, no group, no acknowledgements. It survives reconnects: the
 * client subscribes again with since: {seq} of the last event delivered,
 * and the gateway sends what was missed before the live events. Obtain it
 * from [EventHubClient.live].
 */
export class LiveSubscription {
  /** @internal */
  constructor(client, topic, handler, opts) {
    this.topic = topic;
    // Internal state (underscore names are not part of the API).
    this._client = client;
    this._handler = handler;
    this._onReady = typeof opts.onReady === "function" ? opts.onReady : null;
    this._snapshot = Boolean(opts.snapshot);
    this._since = opts.since;
    this._keyPrefix = opts.keyPrefix; // a watch: only the keyed events whose key starts with it
    this._seq = 0; // position of the last event delivered (or of the snapshot)
    this._known = false; // _seq is a position to recover from
    this._replaying = false; // its SUBSCRIBE was sent and not yet answered on this connection
    this._replaySnapshot = false; // ... and asked for a snapshot
    this._gen = 0; // the connection its SUBSCRIBE was last sent on
    this._ready = null;
    this._established = false;
    this._closed = false;
  }

  /** Whether the subscription was stopped (unsubscribe, close, revoked, or refused on resubscribe). */
  get closed() {
    return this._closed;
  }

  /**
   * The stream position of the last event delivered (or of the snapshot),
   * from which a reconnect recovers; 0 before any.
   */
  get seq() {
    return this._seq;
  }

  /** What the last OK of its SUBSCRIBE said ({recovered, seq, first?, reconnected}); null before it. */
  get ready() {
    return this._ready;
  }

  /** @internal The SUBSCRIBE of this subscription for connection gen. */
  _frame(reconnect) {
    const f = { op: "SUBSCRIBE", topic: this.topic };
    let opts;
    if (reconnect && this._known) opts = { since: { seq: this._seq } };
    else if (reconnect) opts = undefined; // no position yet: nothing to recover from
    else if (this._snapshot) opts = { snapshot: true };
    else if (typeof this._since === "number") opts = { since: { seq: this._since } };
    else if (typeof this._since === "string") opts = { since: { id: this._since } };
    if (this._keyPrefix !== undefined) opts = { ...opts, key_prefix: this._keyPrefix };
    if (opts) f.opts = opts;
    return f;
  }

  /** @internal Called on the connection's message task when the OK of its SUBSCRIBE arrives. */
  _answered(ok, reconnect, askedRecovery) {
    this._replaying = false;
    const seq = typeof ok.seq === "number" ? ok.seq : 0;
    let recovered;
    if (askedRecovery) {
      // since or snapshot: the OK says how complete it was, and from where
      // the live events continue (an empty stream: no seq, position 0).
      recovered = ok.recovered !== false;
      // Incomplete: live events continue after the OK's seq, which may be
      // below a position the stream no longer holds (it was recreated).
      this._seq = recovered ? Math.max(this._seq, seq) : seq;
      this._known = true;
    } else {
      // A plain subscription: live from the OK's seq on (the topic's end
      // when it subscribed), a position to recover from after a reconnect.
      recovered = !reconnect;
      this._seq = Math.max(this._seq, seq);
      this._known = true;
    }
    const ready = { recovered, seq: this._seq, reconnected: Boolean(reconnect) };
    if (!recovered && typeof ok.first === "number") ready.first = ok.first;
    this._ready = ready;
    return ready;
  }

  /** Stops the subscription; see [EventHubClient.unlive]. */
  unsubscribe() {
    return this._client.unlive(this.topic);
  }
}

/**
 * Client of eventhub's WebSocket gateway. It is an EventTarget: events
 * "open" (detail {reconnected}), "close" (detail {code, reason, willReconnect,
 * error}), "error" (detail {error, subscription?}) and "statechange" (detail
 * {state}); the properties onopen, onclose, onerror are called with the same
 * detail.
 */
export class EventHubClient extends EventTarget {
  /**
   * @param {string} [url] ws(s):// URL, or a path on this origin; default
   *   ws(s)://location.host/ws
   * @param {object} [opts] see ClientOptions in client.d.ts
   */
  constructor(url, opts = {}) {
    super();
    /** Called with the detail of the "open" event. @type {((detail: object) => void) | null} */
    this.onopen = null;
    /** Called with the detail of the "close" event. @type {((detail: object) => void) | null} */
    this.onclose = null;
    /** Called with the detail of the "error" event. @type {((detail: object) => void) | null} */
    this.onerror = null;
    // Internal state (underscore names are not part of the API).
    this._state = State.IDLE;
    this._ws = null;
    this._gen = 0; // connection generation; bumped for every socket and every loss
    this._corr = 0;
    this._pending = new Map(); // corr -> {resolve, reject, timer, gen}
    this._subs = new Map(); // subKey -> Subscription
    this._lives = new Map(); // topic -> LiveSubscription
    this._waiters = new Set(); // {resolve, reject, timer} waiting for OPEN
    this._connecting = null; // Promise of the connect() in progress
    this._retryTimer = null;
    this._retryWake = null;
    this._closedError = null;
    this._everOpen = false;
    this._url = resolveURL(url);
    const backoff = { ...DEFAULT_BACKOFF, ...(opts.backoff || {}) };
    if (!(backoff.initialMs > 0) || !(backoff.maxMs >= backoff.initialMs) || !(backoff.factor >= 1) || !(backoff.jitter >= 0 && backoff.jitter <= 1)) {
      throw new RangeError("EventHubClient: backoff needs initialMs > 0, maxMs >= initialMs, factor >= 1, 0 <= jitter <= 1");
    }
    const requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    if (!(requestTimeoutMs > 0)) throw new RangeError("EventHubClient: requestTimeoutMs must be > 0");
    this._opts = {
      token: opts.token,
      reconnect: opts.reconnect !== false,
      batch: opts.batch !== false,
      backoff,
      requestTimeoutMs,
    };
    this._WS = opts.WebSocket || globalThis.WebSocket;
    if (typeof this._WS !== "function") throw new TypeError("EventHubClient: no WebSocket implementation");
  }

  /** The gateway URL. */
  get url() {
    return this._url;
  }

  /** One of State: "idle", "connecting", "open", "reconnecting", "closed". */
  get state() {
    return this._state;
  }

  /** The current WebSocket, or null between connections (for diagnostics). */
  get socket() {
    return this._ws;
  }

  /** The subscriptions, as they will be restored after a reconnect. */
  get subscriptions() {
    return [...this._subs.values()];
  }

  /** The live subscriptions, as they will be restored after a reconnect. */
  get liveSubscriptions() {
    return [...this._lives.values()];
  }

  /**
   * Opens the connection and authenticates. Resolves on the OK that answers
   * AUTH (matched by corr); rejects with an EventHubError carrying the ERR
   * code (e.g. "bad_token"), "timeout", or "unavailable" when the socket
   * could not be opened. Resolves at once when already open; calls made
   * while connecting share one attempt. After close() it connects anew.
   */
  connect() {
    if (this._state === State.OPEN) return Promise.resolve();
    if (this._connecting) return this._connecting;
    if (this._state === State.RECONNECTING) return this._waitOpen();
    this._closedError = null;
    this._setState(State.CONNECTING);
    const p = this._attempt().then(
      () => {
        this._connecting = null;
        this._opened();
      },
      (err) => {
        this._connecting = null;
        this._toClosed(err);
        throw err;
      },
    );
    this._connecting = p;
    return p;
  }

  /**
   * Publishes one event and resolves with its {id, seq, ts} once the gateway
   * answered OK (the store acknowledged it). Rejects with the ERR code.
   * @param {string} topic
   * @param {*} payload any JSON value (null allowed, undefined not)
   * @param {object} [opts] key, id (idempotency key), ts, headers, tags, caused_by, sid, partition
   */
  async publish(topic, payload, opts) {
    if (payload === undefined) throw new TypeError("publish: payload is required (use null for none)");
    const frame = { op: "PUBLISH", topic, payload };
    if (opts && Object.keys(opts).length > 0) frame.opts = opts;
    const ok = await this._call(frame);
    if (typeof ok.id !== "string" || ok.id === "") {
      throw new EventHubError("bad_response", "OK of PUBLISH without an id", { frame: ok });
    }
    const out = { id: ok.id, seq: ok.seq ?? 0, ts: ok.ts ?? 0 };
    return out;
  }

  /**
   * Subscribes handler to topic as a member of group. The handler is
   * registered before SUBSCRIBE is sent (EVENTs may precede its OK). Without
   * manualAck the event is acknowledged when the handler returns or its
   * promise resolves, and nacked with the error's message when it throws or
   * rejects. Resolves with the Subscription on the gateway's OK.
   */
  async subscribe(topic, group, handler, opts = {}) {
    if (typeof handler !== "function") throw new TypeError("subscribe: handler must be a function");
    const key = subKey(topic, group);
    if (this._subs.has(key)) {
      throw new EventHubError("already_subscribed", `already subscribed to ${topic} as ${group}`);
    }
    const { manualAck = false, ...wire } = opts || {};
    const sub = new Subscription(this, topic, group, handler, Boolean(manualAck), Object.keys(wire).length > 0 ? wire : undefined);
    this._subs.set(key, sub);
    try {
      await this._call(sub._frame());
    } catch (err) {
      if (this._subs.get(key) === sub) this._subs.delete(key);
      sub._closed = true;
      throw err;
    }
    sub._established = true;
    return sub;
  }

  /**
   * Stops the subscription of topic and group. Events in flight are handed
   * back by the gateway; later acknowledgements of them are not sent.
   * Rejects with "not_subscribed" when there is no such subscription.
   */
  async unsubscribe(topic, group) {
    const key = subKey(topic, group);
    const sub = this._subs.get(key);
    if (!sub) throw new EventHubError("not_subscribed", `no subscription to ${topic} as ${group}`);
    this._subs.delete(key);
    sub._closed = true;
    sub._inflight.clear();
    if (this._state !== State.OPEN) return; // the server side ended with the connection
    try {
      await this._request({ op: "UNSUBSCRIBE", topic, group }, this._gen);
    } catch (err) {
      // Gone with the connection, or never established there: done either way.
      if (err.code === "not_subscribed" || err.code === "unavailable") return;
      throw err;
    }
  }

  /**
   * Follows topic live: handler gets every event published after the
   * subscription, in order, without acknowledgements (a SUBSCRIBE without
   * group). With opts.snapshot the newest event of every key of a keyed
   * (compacted) topic comes first; with opts.since (a seq, or an event id)
   * the events stored after that position. Events sent before the OK of the
   * SUBSCRIBE reach the handler with info.replay true (and info.snapshot
   * true for a snapshot). Resolves with the LiveSubscription on the OK.
   *
   * After a reconnect the client subscribes again with since: {seq} of the
   * last event delivered (or of the snapshot), so missed events come first
   * and nothing is delivered twice. opts.onReady is called on every OK with
   * {recovered, seq, first?, reconnected}: recovered false means events
   * were missed (the stream no longer holds them, there were more than the
   * gateway recovers at once, or no position was known yet) and first is
   * the oldest position the stream still holds; reload the state then, e.g.
   * with a new snapshot.
   */
  async live(topic, handler, opts = {}) {
    if (typeof handler !== "function") throw new TypeError("live: handler must be a function");
    const o = opts || {};
    if (o.snapshot && o.since !== undefined) throw new TypeError("live: since and snapshot exclude each other");
    if (o.since !== undefined && !(typeof o.since === "string" && o.since !== "") && !(Number.isSafeInteger(o.since) && o.since >= 0)) {
      throw new TypeError("live: since must be a seq (integer >= 0) or an event id");
    }
    if (o.keyPrefix !== undefined && (typeof o.keyPrefix !== "string" || o.keyPrefix === "")) {
      throw new TypeError("live: keyPrefix must be a non-empty string");
    }
    if (this._lives.has(topic)) throw new EventHubError("already_subscribed", `already following ${topic}`);
    const sub = new LiveSubscription(this, topic, handler, o);
    this._lives.set(topic, sub);
    try {
      await this._waitOpen();
      await this._subscribeLive(sub, this._gen, false);
    } catch (err) {
      if (this._lives.get(topic) === sub) this._lives.delete(topic);
      sub._closed = true;
      throw err;
    }
    sub._established = true;
    return sub;
  }

  /**
   * Stops following topic. Rejects with "not_subscribed" when there is no
   * such live subscription.
   */
  async unlive(topic) {
    const sub = this._lives.get(topic);
    if (!sub) throw new EventHubError("not_subscribed", `not following ${topic}`);
    this._lives.delete(topic);
    sub._closed = true;
    // Nothing to end on the gateway when the connection it was subscribed
    // on is gone. It may be subscribed on the socket that is reconnecting
    // (e.g. unlive from onReady), so the state is not the test.
    const ws = this._ws;
    if (!ws || ws.readyState !== 1 || sub._gen !== this._gen) return;
    try {
      await this._request({ op: "UNSUBSCRIBE", topic }, sub._gen);
    } catch (err) {
      if (err.code === "not_subscribed" || err.code === "unavailable") return;
      throw err;
    }
  }

  /** Acknowledges event id of a manualAck subscription. */
  ack(topic, group, id) {
    return this._sub(topic, group).ack(id);
  }

  /** Nacks event id of a manualAck subscription. */
  nack(topic, group, id, reason) {
    return this._sub(topic, group).nack(id, reason);
  }

  /** Extends the lease of event id to now + extend_ms (MODACK). */
  modAck(topic, group, id, extend_ms) {
    return this._sub(topic, group).modAck(id, extend_ms);
  }

  /** The group's cursor (CURSOR extension): {topic, lastId, lastTs, lastSeq, pending}. */
  async cursor(topic, group) {
    const ok = await this._call({ op: "CURSOR", topic, group });
    return ok.cursor;
  }

  /** Moves the group's cursor (SEEK extension); {} rewinds to the beginning. */
  async seek(topic, group, cursor = {}) {
    await this._call({ op: "SEEK", topic, group, cursor });
  }

  /**
   * Deletes key of topic (DELETE extension): the gateway stores a tombstone
   * (an event with deleted: true and a null payload), after which the key has
   * no value. opts: {purge, expected_last_seq}. Resolves with the tombstone's
   * {id, seq, ts}; rejects with the ERR's code (e.g. "wrong_last_seq").
   */
  async deleteKey(topic, key, opts) {
    const frame = { op: "DELETE", topic, key };
    if (opts && Object.keys(opts).length > 0) frame.opts = opts;
    const ok = await this._call(frame);
    return { id: ok.id, seq: ok.seq ?? 0, ts: ok.ts ?? 0 };
  }

  /**
   * Closes the connection and stops reconnecting. Pending requests and
   * callers waiting for a connection reject with "closed"; every
   * subscription is dropped. Idempotent.
   */
  close() {
    const err = new EventHubError("closed", "client closed");
    for (const sub of this._subs.values()) sub._closed = true;
    this._subs.clear();
    for (const sub of this._lives.values()) sub._closed = true;
    this._lives.clear();
    const wasClosed = this._state === State.CLOSED;
    this._stopRetry();
    const ws = this._ws;
    this._ws = null;
    this._gen++;
    this._rejectPending(err);
    this._setState(State.CLOSED);
    this._closedError = err;
    this._rejectWaiters(err);
    if (ws) {
      try {
        ws.close(1000, "client closed");
      } catch {
        // already closing
      }
    }
    if (!wasClosed) this._emit("close", { code: 1000, reason: "client closed", willReconnect: false, error: null });
  }

  // ---- internals ---------------------------------------------------------

  _sub(topic, group) {
    const sub = this._subs.get(subKey(topic, group));
    if (!sub) throw new EventHubError("not_subscribed", `no subscription to ${topic} as ${group}`);
    return sub;
  }

  _setState(s) {
    if (this._state === s) return;
    this._state = s;
    this._emit("statechange", { state: s });
  }

  _emit(type, detail) {
    const hook = type === "open" ? this.onopen : type === "close" ? this.onclose : type === "error" ? this.onerror : null;
    if (typeof hook === "function") {
      try {
        hook.call(this, detail);
      } catch (e) {
        queueMicrotask(() => {
          throw e;
        });
      }
    }
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }

  async _token() {
    const t = this._opts.token;
    const v = typeof t === "function" ? await t() : t;
    return v === undefined || v === null ? "" : String(v);
  }

  // _attempt opens one socket, authenticates and restores the established
  // subscriptions. It resolves when all of that is done; it rejects (and
  // closes the socket) on the first failure.
  _attempt() {
    return new Promise((resolve, reject) => {
      const gen = ++this._gen;
      let ws;
      try {
        ws = new this._WS(this._url);
      } catch (e) {
        reject(new EventHubError("unavailable", errorText(e)));
        return;
      }
      this._ws = ws;
      let settled = false;
      const timer = setTimeout(() => {
        fail(new EventHubError("timeout", `no connection within ${this._opts.requestTimeoutMs} ms`));
      }, this._opts.requestTimeoutMs);
      const fail = (err) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (this._state === State.CLOSED && this._closedError) err = this._closedError; // close() meanwhile
        if (this._gen === gen) {
          this._gen++; // frames of this socket are ignored from now on
          this._ws = null;
          this._rejectPendingOf(gen, err);
        }
        try {
          ws.close(1000);
        } catch {
          // already closing
        }
        reject(err);
      };
      ws.onmessage = (ev) => this._onMessage(gen, ev.data);
      ws.onerror = () => {
        // A close event always follows; it carries the reason.
      };
      ws.onclose = (ev) => {
        if (!settled) {
          fail(closeError(ev));
          return;
        }
        this._onClose(gen, ev);
      };
      ws.onopen = async () => {
        try {
          const token = await this._token();
          await this._request(this._opts.batch ? { op: "AUTH", token, batch: true } : { op: "AUTH", token }, gen);
          const established = [...this._subs.values(), ...this._lives.values()].filter((s) => s._established && !s._closed);
          const results = await Promise.allSettled(
            established.map((s) => (s instanceof LiveSubscription ? this._subscribeLive(s, gen, true) : this._request(s._frame(), gen))),
          );
          for (let i = 0; i < results.length; i++) {
            const r = results[i];
            if (r.status === "fulfilled") continue;
            if (r.reason.code === "unavailable" || r.reason.code === "timeout") throw r.reason;
            this._dropSub(established[i], r.reason);
          }
          if (settled || this._gen !== gen) throw new EventHubError("unavailable", "connection lost");
          settled = true;
          clearTimeout(timer);
          resolve();
        } catch (err) {
          fail(err instanceof EventHubError ? err : new EventHubError("unavailable", errorText(err)));
        }
      };
    });
  }

  _dropSub(sub, err) {
    if (sub instanceof LiveSubscription) {
      if (this._lives.get(sub.topic) === sub) this._lives.delete(sub.topic);
    } else {
      const key = subKey(sub.topic, sub.group);
      if (this._subs.get(key) === sub) this._subs.delete(key);
      sub._inflight.clear();
    }
    sub._closed = true;
    this._emit("error", { error: err, subscription: sub });
  }

  // _subscribeLive sends the SUBSCRIBE of a live subscription on connection
  // gen: the first one, or again after a reconnect. Events that arrive
  // before its OK are replayed ones (recovered, or the snapshot); the OK is
  // handled on the message's own task, before any later EVENT.
  async _subscribeLive(sub, gen, reconnect) {
    const frame = sub._frame(reconnect);
    const askedRecovery = frame.opts !== undefined;
    sub._replaying = true;
    sub._replaySnapshot = !reconnect && sub._snapshot;
    sub._gen = gen;
    await this._request(frame, gen, (ok) => {
      if (sub._gen !== gen || sub._closed) return;
      const ready = sub._answered(ok, reconnect, askedRecovery);
      if (!sub._onReady) return;
      try {
        sub._onReady.call(sub, ready);
      } catch (err) {
        this._emit("error", { error: err, subscription: sub });
      }
    });
  }

  _opened() {
    const reconnected = this._everOpen;
    this._everOpen = true;
    this._setState(State.OPEN);
    for (const w of this._waiters) {
      clearTimeout(w.timer);
      w.resolve();
    }
    this._waiters.clear();
    this._emit("open", { reconnected });
  }

  _toClosed(err) {
    this._stopRetry();
    this._closedError = err;
    this._setState(State.CLOSED);
    this._rejectWaiters(err);
  }

  // _onClose handles the loss of an open connection.
  _onClose(gen, ev) {
    if (gen !== this._gen) return; // an old socket, or closed by close()
    this._gen++;
    this._ws = null;
    const err = closeError(ev);
    this._rejectPendingOf(gen, err);
    const terminal = TERMINAL_CODES.has(err.code);
    const willReconnect = this._opts.reconnect && !terminal;
    this._emit("close", { code: ev.code, reason: ev.reason, willReconnect, error: err });
    if (willReconnect) {
      this._setState(State.RECONNECTING);
      this._reconnectLoop();
    } else {
      this._toClosed(err);
    }
  }

  async _reconnectLoop() {
    const b = this._opts.backoff;
    let delay = b.initialMs;
    while (this._state === State.RECONNECTING) {
      const wait = delay * (1 - b.jitter / 2 + Math.random() * b.jitter);
      await new Promise((resolve) => {
        this._retryWake = resolve;
        this._retryTimer = setTimeout(resolve, wait);
      });
      this._retryTimer = null;
      this._retryWake = null;
      if (this._state !== State.RECONNECTING) return;
      delay = Math.min(delay * b.factor, b.maxMs);
      try {
        await this._attempt();
      } catch (err) {
        if (this._state !== State.RECONNECTING) return;
        if (TERMINAL_CODES.has(err.code)) {
          this._toClosed(err);
          this._emit("close", { code: err.closeCode ?? 4500, reason: err.code, willReconnect: false, error: err });
          return;
        }
        this._emit("error", { error: err });
        continue;
      }
      if (this._state !== State.RECONNECTING) return;
      this._opened();
      return;
    }
  }

  _stopRetry() {
    if (this._retryTimer !== null) clearTimeout(this._retryTimer);
    this._retryTimer = null;
    if (this._retryWake) this._retryWake();
    this._retryWake = null;
  }

  // _waitOpen resolves when the client is open, connecting it first when idle.
  _waitOpen() {
    switch (this._state) {
      case State.OPEN:
        return Promise.resolve();
      case State.IDLE:
        return this.connect();
      case State.CLOSED:
        return Promise.reject(this._closedError || new EventHubError("closed", "client closed"));
    }
    return new Promise((resolve, reject) => {
      const w = { resolve, reject, timer: 0 };
      w.timer = setTimeout(() => {
        this._waiters.delete(w);
        reject(new EventHubError("timeout", `not connected within ${this._opts.requestTimeoutMs} ms`));
      }, this._opts.requestTimeoutMs);
      this._waiters.add(w);
    });
  }

  _rejectWaiters(err) {
    for (const w of this._waiters) {
      clearTimeout(w.timer);
      w.reject(err);
    }
    this._waiters.clear();
  }

  async _call(frame) {
    await this._waitOpen();
    return this._request(frame, this._gen);
  }

  // _request sends frame with a fresh corr on connection gen and settles on
  // the OK / ERR echoing it.
  _request(frame, gen, onOK) {
    return new Promise((resolve, reject) => {
      const ws = this._ws;
      if (!ws || gen !== this._gen || ws.readyState !== 1) {
        reject(new EventHubError("unavailable", "not connected"));
        return;
      }
      const corr = String(++this._corr);
      const data = JSON.stringify({ ...frame, corr }); // may throw: rejects
      const ms = this._opts.requestTimeoutMs;
      const timer = setTimeout(() => {
        this._pending.delete(corr);
        reject(new EventHubError("timeout", `${frame.op} not answered within ${ms} ms`));
      }, ms);
      this._pending.set(corr, { resolve, reject, timer, gen, onOK });
      try {
        ws.send(data);
      } catch (e) {
        clearTimeout(timer);
        this._pending.delete(corr);
        reject(new EventHubError("unavailable", errorText(e)));
      }
    });
  }

  _rejectPendingOf(gen, err) {
    for (const [corr, p] of this._pending) {
      if (p.gen !== gen) continue;
      clearTimeout(p.timer);
      this._pending.delete(corr);
      p.reject(err);
    }
  }

  _rejectPending(err) {
    for (const p of this._pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this._pending.clear();
  }

  _onMessage(gen, data) {
    if (gen !== this._gen) return;
    let f;
    try {
      f = JSON.parse(data);
    } catch {
      this._emit("error", { error: new EventHubError("bad_response", "a frame that is not JSON") });
      return;
    }
    if (!Array.isArray(f)) {
      this._onFrame(gen, f);
      return;
    }
    // A batch (asked for in AUTH): its frames, in order.
    for (const one of f) {
      if (gen !== this._gen) return;
      this._onFrame(gen, one);
    }
  }

  _onFrame(gen, f) {
    if (f === null || typeof f !== "object" || Array.isArray(f)) return;
    switch (f.op) {
      case "OK":
      case "ERR": {
        const p = typeof f.corr === "string" ? this._pending.get(f.corr) : undefined;
        if (p) {
          clearTimeout(p.timer);
          this._pending.delete(f.corr);
          if (f.op === "OK") {
            if (p.onOK) p.onOK(f);
            p.resolve(f);
          } else p.reject(new EventHubError(f.code || "internal", f.msg || "", { frame: f }));
        } else if (f.op === "ERR" && typeof f.topic === "string" && !f.group && this._lives.has(f.topic)) {
          // The gateway ended a live subscription (its right was revoked on a new AUTH).
          this._dropSub(this._lives.get(f.topic), new EventHubError(f.code || "internal", f.msg || "", { frame: f }));
        } else if (f.op === "ERR") {
          // An automatic ACK / NACK that failed, or an error the gateway
          // reports before closing (auth_timeout, token_expired, ...).
          this._emit("error", { error: new EventHubError(f.code || "internal", f.msg || "", { frame: f }) });
        }
        return;
      }
      case "EVENT":
        if (f.group === undefined || f.group === "") this._deliverLive(f);
        else this._deliver(gen, f);
        return;
    }
  }

  _deliver(gen, f) {
    const sub = this._subs.get(subKey(f.topic, f.group));
    const event = f.event;
    if (!sub || sub._closed || !event || typeof event.id !== "string") return;
    const ctx = f.ctx || {};
    const attempt = ctx.attempt ?? 1;
    sub._inflight.set(event.id, { attempt, gen });
    const dctx = {
      attempt,
      ack_deadline_ms: ctx.ack_deadline_ms ?? 0,
      topic: f.topic,
      group: f.group,
      modAck: (extendMs) => sub.modAck(event.id, extendMs),
    };
    if (ctx.trace) dctx.trace = ctx.trace;
    if (sub.manualAck) {
      this._run(sub, event, dctx).catch((err) => this._emit("error", { error: err, subscription: sub, event }));
      return;
    }
    this._run(sub, event, dctx).then(
      () => this._autoSettle(sub, gen, event.id, attempt, "ACK", undefined),
      (err) => this._autoSettle(sub, gen, event.id, attempt, "NACK", errorText(err)),
    );
  }

  // _deliverLive hands an event of a live subscription to its handler, once:
  // an event at or before the position already delivered is dropped (the
  // snapshot's events come in key order, so they are not compared).
  _deliverLive(f) {
    const sub = this._lives.get(f.topic);
    const event = f.event;
    if (!sub || sub._closed || !event || typeof event.id !== "string") return;
    const seq = typeof event.seq === "number" ? event.seq : 0;
    const snapshot = sub._replaying && sub._replaySnapshot;
    if (!snapshot && seq > 0 && sub._known && seq <= sub._seq) return;
    if (seq > 0) {
      sub._seq = Math.max(sub._seq, seq);
      if (!snapshot) sub._known = true;
    }
    const info = { topic: f.topic, replay: sub._replaying, snapshot };
    if (f.ctx && f.ctx.trace) info.trace = f.ctx.trace;
    let r;
    try {
      r = sub._handler(event, info);
    } catch (err) {
      this._emit("error", { error: err, subscription: sub, event });
      return;
    }
    if (r && typeof r.then === "function") {
      r.then(undefined, (err) => this._emit("error", { error: err, subscription: sub, event }));
    }
  }

  async _run(sub, event, dctx) {
    return sub._handler(event, dctx);
  }

  // _autoSettle sends the ACK / NACK of an automatically acknowledged event,
  // without corr, fenced by attempt. Nothing is sent when the event was
  // delivered on an earlier connection (the gateway handed it back) or
  // redelivered meanwhile.
  _autoSettle(sub, gen, id, attempt, op, reason) {
    const d = sub._inflight.get(id);
    if (!d || d.gen !== gen || d.attempt !== attempt) return;
    sub._inflight.delete(id);
    if (sub._closed || gen !== this._gen || !this._ws || this._ws.readyState !== 1) return;
    const frame = { op, topic: sub.topic, group: sub.group, id, attempt };
    if (reason !== undefined) frame.reason = reason;
    this._ws.send(JSON.stringify(frame));
  }

  /** @internal ACK / NACK / MODACK of a manualAck subscription, with corr. */
  async _settle(sub, op, id, extra) {
    if (typeof id !== "string" || id === "") throw new TypeError(`${op}: id must be a non-empty string`);
    if (sub._closed) throw new EventHubError("not_subscribed", `no subscription to ${sub.topic} as ${sub.group}`);
    const d = sub._inflight.get(id);
    if (!d) throw new EventHubError("unknown_id", `${id} is not in flight on ${sub.topic}/${sub.group}`);
    if (d.gen !== this._gen) {
      sub._inflight.delete(id);
      throw new EventHubError("unknown_id", `${id} was delivered on an earlier connection and handed back`);
    }
    if (op !== "MODACK") sub._inflight.delete(id);
    await this._request({ op, topic: sub.topic, group: sub.group, id, attempt: d.attempt, ...extra }, d.gen);
  }
}

/** The reference TypeScript clients' name of the client. */
export { EventHubClient as PromClient };

export default EventHubClient;
