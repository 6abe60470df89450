// Typings of client.js, the eventhub browser client. The frame and field names
// are those of docs/protocol.md (the protocol's names: caused_by, ack_deadline_ms,
// extend_ms, ...).

/** An event as stored and delivered (the `event` of an EVENT frame). */
export interface EventRecord<T = unknown> {
  /** Event id (uuidv7 unless the publisher chose one). */
  id: string;
  /** Session id of the publisher, if set. */
  sid?: string;
  /** Event time, epoch milliseconds (the publisher's clock). */
  ts: number;
  /** The event's own topic (may differ from the subscription's with opts.topics). */
  topic: string;
  /** Key (compacted topics keep the newest event per key). */
  key?: string;
  partition?: number;
  headers?: Record<string, string>;
  /** Any JSON value, exactly as stored. */
  payload: T;
  caused_by?: string[];
  tags?: string[];
  /** Stream position (extension). */
  seq?: number;
  /** A key's tombstone (EventHubClient.deleteKey): the key has no value from here on; payload is null. */
  deleted?: boolean;
}

/** An event's W3C trace context (docs/tracing.md): start the handler's spans under it. */
export interface TraceContext {
  traceparent: string;
  tracestate?: string;
}

/** `ctx` of an EVENT frame, plus helpers of the client. */
export interface DeliveryContext {
  /** The trace context of the hub's deliver span (or the one the event was published with), when it has one. */
  trace?: TraceContext;
  /** Deliveries of this event to the group, from 1. */
  attempt: number;
  /** Milliseconds left of the lease when the event was sent. */
  ack_deadline_ms: number;
  /** The subscription's topic and group. */
  topic: string;
  group: string;
  /** Extends the lease to now + extendMs (MODACK); resolves on the gateway's OK. */
  modAck(extendMs: number): Promise<void>;
}

/** The handler of a subscription. Without manualAck: returns / resolves → ACK, throws / rejects → NACK with the error's message. */
export type Handler<T = unknown> = (event: EventRecord<T>, ctx: DeliveryContext) => void | Promise<void>;

/** Second argument of a live subscription's handler. */
export interface LiveEventInfo {
  /** The subscription's topic. */
  topic: string;
  /** Sent before the OK of its SUBSCRIBE: recovered (since) or part of the snapshot. */
  replay: boolean;
  /** Part of the snapshot (the newest event of its key), in key order rather than stream order. */
  snapshot: boolean;
  /** The trace context the event was published with, when it has one. */
  trace?: TraceContext;
}

/** The handler of a live subscription; nothing is acknowledged. A throw or rejection is reported as an "error" event. */
export type LiveHandler<T = unknown> = (event: EventRecord<T>, info: LiveEventInfo) => void | Promise<void>;

/** What the OK of a live SUBSCRIBE said, for LiveOptions.onReady. */
export interface LiveReady {
  /**
   * No event was missed: the recovery (since, or since the last event after a
   * reconnect) or the snapshot was complete. false: reload the state (e.g. with
   * a new snapshot); the subscription goes on live either way.
   */
  recovered: boolean;
  /** Stream position the live events continue after (0: unknown, or an empty stream). */
  seq: number;
  /** When recovered is false: the oldest position the stream still holds. */
  first?: number;
  /** This OK answers the SUBSCRIBE sent again after a reconnect. */
  reconnected: boolean;
}

/** Options of EventHubClient.live. */
export interface LiveOptions {
  /** First the newest event of every key of the (keyed, compacted) topic, then the live ones. */
  snapshot?: boolean;
  /** First the events stored after this position: a seq (as events carry it) or an event id. Excludes snapshot. */
  since?: number | string;
  /**
   * A watch: only the keyed events whose key starts with this prefix (with
   * snapshot, the newest event of each such key first). Kept after reconnects.
   */
  keyPrefix?: string;
  /** Called on every OK of its SUBSCRIBE (the first, and after each reconnect), before any live event after it. */
  onReady?: (this: LiveSubscription<any>, ready: LiveReady) => void;
}

/** `opts` of PUBLISH. */
export interface PublishOptions {
  /** Idempotency key: a second publish with the same id within the store's window stores nothing new. */
  id?: string;
  ts?: number;
  key?: string;
  partition?: number;
  headers?: Record<string, string>;
  tags?: string[];
  caused_by?: string[];
  sid?: string;
  /**
   * Compare-and-set of the key: stored only if the key's newest event is still at
   * this seq (0: the key has none yet); else rejects with "wrong_last_seq". Needs key.
   */
  expected_last_seq?: number;
  /** Time to live in whole seconds (at least 1): the event is removed from the store when it is up. */
  ttl_seconds?: number;
}

/** `opts` of DELETE. */
export interface DeleteOptions {
  /** Also remove the key's earlier events, leaving only the tombstone. */
  purge?: boolean;
  /** Compare-and-delete: only if the key's newest event is still at this seq; else "wrong_last_seq". */
  expected_last_seq?: number;
}

/** What the OK of PUBLISH carries. */
export interface PublishResult {
  id: string;
  /** Stream position (0 if the gateway did not send it). */
  seq: number;
  /** Event time, epoch milliseconds (0 if the gateway did not send it). */
  ts: number;
}

/** `opts` of SUBSCRIBE, plus the client-side manualAck. */
export interface SubscribeOptions {
  /** Where a group that does not exist yet starts (default "latest"). */
  from?: "latest" | "earliest" | "ts" | "afterId";
  ts?: number;
  afterId?: string;
  batchSize?: number;
  maxInFlight?: number;
  /** Lease of each delivered event (default: the gateway's AckTimeout, 30 s). */
  ackTimeoutMs?: number;
  maxAttempts?: number;
  /**
   * The group's retry policy: how long a nacked event waits before its next
   * delivery. Set by the member that creates the group; a different one is
   * refused with `conflicting_option`, none follows the group's.
   */
  retry?: RetryPolicy;
  /**
   * `"key"`: the group delivers the events of one key to one connection at a
   * time, in stream order, and different keys in parallel. Set by the member
   * that creates the group; asking a group created without it is refused with
   * `conflicting_option`, none follows the group's.
   */
  orderBy?: "key";
  /** The group's window across all its members (default: the gateway's, 10 000). */
  groupMaxInFlight?: number;
  /** Delete a new group after it has had no member this long (ms, at least 1000). */
  inactiveTimeoutMs?: number;
  /** Fan-in: the same group on more topics. */
  topics?: string[];
  /** Acknowledge with Subscription.ack / nack instead of when the handler settles. Not sent to the gateway. */
  manualAck?: boolean;
}

/**
 * A retry policy: either exponential (`minBackoffMs` after the first attempt,
 * doubling, at most `maxBackoffMs`) or an explicit list (`backoffMs`, the
 * waits after attempts 1, 2, …, the last repeating). Each wait 1..86400000 ms.
 */
export type RetryPolicy =
  | { minBackoffMs?: number; maxBackoffMs?: number }
  | { backoffMs: number[] };

/** A group's cursor (CURSOR extension). */
export interface CursorPosition {
  topic: string;
  lastId?: string;
  lastTs?: number;
  lastSeq?: number;
  pending?: number;
}

export interface BackoffOptions {
  /** First reconnect delay (default 100). */
  initialMs?: number;
  /** Largest reconnect delay (default 5000). */
  maxMs?: number;
  /** Growth per failed attempt (default 2). */
  factor?: number;
  /** Random spread, 0..1, of each delay around its value (default 0.5). */
  jitter?: number;
}

export interface ClientOptions {
  /** Token of AUTH; a function is called at every (re)connection. */
  token?: string | (() => string | Promise<string>);
  /** Reconnect when an open connection drops (default true). Close codes 4500–4999 are never retried. */
  reconnect?: boolean;
  /** Ask the gateway for batched frames: several frames in one WebSocket message, a JSON array (default true). */
  batch?: boolean;
  backoff?: BackoffOptions;
  /** Bounds each request, and connecting (default 10000). */
  requestTimeoutMs?: number;
  /** WebSocket implementation (default globalThis.WebSocket). */
  WebSocket?: typeof WebSocket;
}

/** Version of the protocol (docs/protocol.md) this client speaks, "major.minor"; the package's major.minor version. */
export declare const PROTOCOL_VERSION: string;

export type ClientState = "idle" | "connecting" | "open" | "reconnecting" | "closed";

export declare const State: Readonly<{
  IDLE: "idle";
  CONNECTING: "connecting";
  OPEN: "open";
  RECONNECTING: "reconnecting";
  CLOSED: "closed";
}>;

/** Error codes of the gateway (docs/protocol.md, Errors) and of the client. */
export type ErrorCode =
  | "bad_json" | "bad_frame" | "unknown_op" | "frame_too_large" | "unauthorized" | "bad_token"
  | "token_expired" | "auth_timeout" | "forbidden" | "bad_request" | "bad_topic" | "bad_group"
  | "bad_payload" | "bad_key" | "bad_id" | "key_required" | "wrong_last_seq" | "too_large" | "already_subscribed"
  | "not_subscribed" | "unknown_id" | "not_found" | "unsupported" | "publish_failed"
  | "unavailable" | "closed" | "internal" | "server_error" | "slow_client" | "idle_timeout"
  | "going_away"
  // the client's own:
  | "timeout" | "bad_response";

/** An ERR of the gateway, or a failure of the client, with its stable code. */
export declare class EventHubError extends Error {
  constructor(code: string, msg: string, extra?: { closeCode?: number; frame?: object });
  readonly name: "EventHubError";
  readonly code: ErrorCode | string;
  readonly msg: string;
  /** The WebSocket close code, when the error is the loss of the connection. */
  readonly closeCode?: number;
  /** The ERR frame, when the gateway sent one. */
  readonly frame?: object;
}

export interface OpenDetail { reconnected: boolean }
export interface CloseDetail { code: number; reason: string; willReconnect: boolean; error: EventHubError | null }
export interface ErrorDetail { error: EventHubError | Error; subscription?: Subscription<any> | LiveSubscription<any>; event?: EventRecord<any> }
export interface StateDetail { state: ClientState }

export interface EventHubClientEventMap {
  open: CustomEvent<OpenDetail>;
  close: CustomEvent<CloseDetail>;
  error: CustomEvent<ErrorDetail>;
  statechange: CustomEvent<StateDetail>;
}

/** One subscription; it survives reconnects. */
export declare class Subscription<T = unknown> {
  private constructor();
  readonly topic: string;
  readonly group: string;
  readonly manualAck: boolean;
  /** True once unsubscribed, closed, or refused when subscribing again after a reconnect. */
  readonly closed: boolean;
  /** ACK (manualAck): resolves on the gateway's OK; unknown_id if not in flight. */
  ack(id: string): Promise<void>;
  /** NACK (manualAck): the event is redelivered with attempt+1 after the bus's backoff. */
  nack(id: string, reason?: string | Error): Promise<void>;
  /** MODACK: the lease becomes now + extendMs (at least 1 s). */
  modAck(id: string, extendMs: number): Promise<void>;
  unsubscribe(): Promise<void>;
}

/** One live subscription (no group, no acks); it survives reconnects, recovering what it missed. */
export declare class LiveSubscription<T = unknown> {
  private constructor();
  readonly topic: string;
  /** True once unsubscribed, closed, revoked, or refused when subscribing again after a reconnect. */
  readonly closed: boolean;
  /** Position of the last event delivered (or of the snapshot): where a reconnect recovers from; 0 before any. */
  readonly seq: number;
  /** What the last OK of its SUBSCRIBE said; null before the first. */
  readonly ready: LiveReady | null;
  unsubscribe(): Promise<void>;
}

/** Client of eventhub's WebSocket gateway. */
export declare class EventHubClient extends EventTarget {
  /**
   * @param url ws(s):// URL, http(s):// URL or path on this origin; default ws(s)://location.host/ws.
   */
  constructor(url?: string, opts?: ClientOptions);
  readonly url: string;
  readonly state: ClientState;
  /** The current WebSocket, or null between connections (diagnostics). */
  readonly socket: WebSocket | null;
  readonly subscriptions: Subscription<any>[];
  readonly liveSubscriptions: LiveSubscription<any>[];
  onopen: ((detail: OpenDetail) => void) | null;
  onclose: ((detail: CloseDetail) => void) | null;
  onerror: ((detail: ErrorDetail) => void) | null;

  /** Resolves on the OK answering AUTH; rejects with the ERR's code (e.g. "bad_token"), "timeout" or "unavailable". */
  connect(): Promise<void>;
  /** Resolves with the OK's {id, seq, ts}; rejects with the ERR's code. */
  publish<T = unknown>(topic: string, payload: T, opts?: PublishOptions): Promise<PublishResult>;
  subscribe<T = unknown>(topic: string, group: string, handler: Handler<T>, opts?: SubscribeOptions): Promise<Subscription<T>>;
  unsubscribe(topic: string, group: string): Promise<void>;
  /**
   * Follows topic live (SUBSCRIBE without group): every event published after it, no acks.
   * Resolves on the OK; events before it (snapshot, since) reach the handler with info.replay.
   * After a reconnect it subscribes again with since: {seq} of the last event delivered.
   */
  live<T = unknown>(topic: string, handler: LiveHandler<T>, opts?: LiveOptions): Promise<LiveSubscription<T>>;
  /** Stops following topic; rejects with not_subscribed when not following it. */
  unlive(topic: string): Promise<void>;
  ack(topic: string, group: string, id: string): Promise<void>;
  nack(topic: string, group: string, id: string, reason?: string | Error): Promise<void>;
  modAck(topic: string, group: string, id: string, extend_ms: number): Promise<void>;
  /** DELETE extension: stores a tombstone for key; resolves with its {id, seq, ts}; needs the right to publish to topic. */
  deleteKey(topic: string, key: string, opts?: DeleteOptions): Promise<PublishResult>;
  /** CURSOR extension. */
  cursor(topic: string, group: string): Promise<CursorPosition>;
  /** SEEK extension; {} rewinds to the beginning. */
  seek(topic: string, group: string, cursor?: { lastSeq?: number; lastId?: string; lastTs?: number }): Promise<void>;
  /** Closes and stops reconnecting; idempotent. */
  close(): void;

  addEventListener<K extends keyof EventHubClientEventMap>(type: K, listener: (ev: EventHubClientEventMap[K]) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
  removeEventListener<K extends keyof EventHubClientEventMap>(type: K, listener: (ev: EventHubClientEventMap[K]) => void, options?: boolean | EventListenerOptions): void;
  removeEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | EventListenerOptions): void;
}

/** The reference TypeScript clients' name of the client. */
export { EventHubClient as PromClient };
export default EventHubClient;

/** The payload of process.state. */
export interface ProcessState {
  /** `${host}:${name}:${pid}` */
  processId: string;
  name: string;
  host: string;
  pid: number;
  sid?: string;
  cpu_pct: number;
  mem_mb: number;
  last_seen_ts: number;
  status: "alive" | "stale";
}
