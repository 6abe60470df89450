// eventhub dashboard: live process.state over the WebSocket gateway (client.js:
// a snapshot of the compacted topic, then its live events; no consumer group),
// topics and group lag from the ops endpoints, and a form to publish a test
// event. Configuration: <meta name="eventhub-ops-base"> and
// <meta name="eventhub-ws-url"> (set by package web), overridden by the query
// parameters ?ops=/prefix and ?ws=/path (same-origin paths only, so that a
// link cannot send the token elsewhere).

import { EventHubClient } from "./client.js";
import { sameOriginPath } from "./sameorigin.js";

const TOKEN_KEY = "eventhub.token";
const TOPICS_EVERY_MS = 2000;
const PROCESS_TOPIC = "process.state";

const $ = (id) => document.getElementById(id);

// ---- configuration -----------------------------------------------------------

function readConfig() {
  const meta = (name) => {
    const el = document.querySelector(`meta[name="${name}"]`);
    return el ? el.content.trim() : "";
  };
  const q = new URLSearchParams(location.search);
  const ops = sameOriginPath(q.get("ops")) ?? meta("eventhub-ops-base");
  const ws = sameOriginPath(q.get("ws")) ?? meta("eventhub-ws-url");
  return {
    opsBase: ops.replace(/\/+$/, ""), // "" = the root of this origin
    wsURL: ws || undefined, // undefined = ws(s)://this host/ws
  };
}

const cfg = readConfig();

function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return ""; // storage disabled
  }
}

function setToken(v) {
  try {
    if (v) sessionStorage.setItem(TOKEN_KEY, v);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled: the token lives for this page only
  }
}

function errText(err) {
  if (err && err.code) return `${err.code}: ${err.msg || err.message}`;
  return err && err.message ? err.message : String(err);
}

function fmtTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  return d.toLocaleTimeString(undefined, { hour12: false });
}

function fmtAgo(ms, now) {
  if (!ms) return "";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

function fmtNum(v, digits) {
  return typeof v === "number" && Number.isFinite(v) ? v.toFixed(digits) : "—";
}

function cell(tag, text, cls) {
  const el = document.createElement(tag);
  if (text !== undefined) el.textContent = text;
  if (cls) el.className = cls;
  return el;
}

// ---- connection ----------------------------------------------------------------

const conn = $("conn");

function showConn(state, text) {
  conn.dataset.state = state;
  conn.textContent = text;
}

let client = null;

function startClient() {
  if (client) client.close();
  clearProcesses();
  const c = new EventHubClient(cfg.wsURL, { token, reconnect: true });
  client = c;
  c.addEventListener("statechange", (e) => {
    if (c !== client) return;
    const s = e.detail.state;
    if (s === "connecting") showConn("connecting", "Connecting…");
    else if (s === "open") showConn("open", "Connected");
    else if (s === "reconnecting") showConn("reconnecting", "Connection lost; reconnecting…");
  });
  c.addEventListener("close", (e) => {
    if (c !== client || e.detail.willReconnect || !e.detail.error) return;
    showConn("closed", closedText(e.detail.error));
  });
  c.addEventListener("error", (e) => {
    if (c !== client) return;
    if (e.detail.subscription) showConn("closed", `Subscription to ${PROCESS_TOPIC} refused: ${errText(e.detail.error)}`);
  });
  showConn("connecting", "Connecting…");
  c.connect()
    .then(() => subscribeWhenTopicExists(c))
    .catch((err) => {
      if (c !== client) return;
      showConn("closed", closedText(err));
    });
}

// The page reads process.state; it never creates it. A subscription creates
// a missing topic's stream, and one made here would keep every event where
// the projector needs a compacted topic. So the page asks the ops endpoints
// whether the topic exists, and waits for it (it appears when eventhub -demo
// or a projector runs).
const WAIT_FOR_TOPIC_MS = 3000;

async function subscribeWhenTopicExists(c) {
  while (c === client) {
    try {
      await opsGet(`/cursors?topic=${encodeURIComponent(PROCESS_TOPIC)}`);
      break;
    } catch (err) {
      if (c !== client) return;
      if (err.status === 404) {
        showConn("waiting", `${PROCESS_TOPIC} does not exist yet: run eventhub -demo, or a projector`);
      } else {
        showConn("waiting", `Cannot tell whether ${PROCESS_TOPIC} exists (${err.message}); retrying`);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, WAIT_FOR_TOPIC_MS));
  }
  if (c !== client) return;
  showConn("open", "Connected");
  await followProcesses(c);
}

// followProcesses shows the current state of every process (a snapshot of
// the compacted topic: the newest event of each key), then follows it live.
// No consumer group is created: after a reconnect the client recovers the
// events missed meanwhile from the stream, and when it cannot (retention, or
// too many), the page starts over from a new snapshot.
async function followProcesses(c) {
  clearProcesses();
  await c.live(PROCESS_TOPIC, onProcessState, {
    snapshot: true,
    onReady(ready) {
      if (c !== client || ready.recovered || !ready.reconnected) return;
      this.unsubscribe()
        .then(() => followProcesses(c))
        .catch((err) => {
          if (c === client) showConn("closed", `Cannot reload ${PROCESS_TOPIC}: ${errText(err)}`);
        });
    },
  });
}

function closedText(err) {
  if (err.code === "bad_token" || err.code === "token_expired" || err.code === "unauthorized") {
    return `Not authenticated (${err.code}): enter a token`;
  }
  if (err.code === "forbidden") return `Forbidden: ${err.msg}`;
  return `Disconnected: ${errText(err)}`;
}

// ---- processes (live process.state) ------------------------------------------

const procBody = $("processes").tBodies[0];
const procEmpty = $("processes-empty");
const rows = new Map(); // processId -> {tr, seq, lastSeen, cells}

function clearProcesses() {
  rows.clear();
  procBody.replaceChildren();
  procEmpty.hidden = false;
}

function sortKey(p) {
  return [String(p.host ?? ""), String(p.name ?? ""), Number(p.pid ?? 0)];
}

function before(a, b) {
  for (let i = 0; i < a.length; i++) {
    if (a[i] < b[i]) return true;
    if (a[i] > b[i]) return false;
  }
  return false;
}

function newRow(id) {
  const tr = document.createElement("tr");
  tr.dataset.processId = id;
  const c = {
    id: cell("th", id),
    host: cell("td"),
    name: cell("td"),
    pid: cell("td", "", "num"),
    cpu: cell("td", "", "num"),
    mem: cell("td", "", "num"),
    seen: cell("td", "", "seen"),
    status: cell("td", "", "status-cell"),
  };
  c.id.scope = "row";
  c.time = document.createElement("time");
  c.ago = cell("span", "", "muted");
  c.seen.append(c.time, " ", c.ago);
  c.badge = cell("span", "", "status");
  c.status.append(c.badge);
  tr.append(c.id, c.host, c.name, c.pid, c.cpu, c.mem, c.seen, c.status);
  return { tr, seq: 0, lastSeen: 0, key: [], cells: c };
}

function placeRow(row) {
  // Keep rows ordered by host, name, pid.
  for (const other of procBody.rows) {
    const o = rows.get(other.dataset.processId);
    if (o && o !== row && before(row.key, o.key)) {
      procBody.insertBefore(row.tr, other);
      return;
    }
  }
  procBody.append(row.tr);
}

function onProcessState(event) {
  const p = event.payload;
  const id = (p && typeof p === "object" && typeof p.processId === "string" && p.processId) || event.key;
  if (!id) return;
  let row = rows.get(id);
  if (row && event.seq && row.seq && event.seq < row.seq) return; // older than what is shown
  if (!p || typeof p !== "object") {
    // null payload: the process is gone.
    if (row) {
      row.tr.remove();
      rows.delete(id);
      procEmpty.hidden = rows.size > 0;
    }
    return;
  }
  const isNew = !row;
  if (isNew) {
    row = newRow(id);
    rows.set(id, row);
  }
  row.seq = event.seq || row.seq;
  const c = row.cells;
  c.host.textContent = p.host ?? "—";
  c.name.textContent = p.name ?? "—";
  c.pid.textContent = p.pid ?? "—";
  c.cpu.textContent = fmtNum(p.cpu_pct, 1);
  c.mem.textContent = fmtNum(p.mem_mb, 0);
  row.lastSeen = typeof p.last_seen_ts === "number" ? p.last_seen_ts : 0;
  c.time.dateTime = row.lastSeen ? new Date(row.lastSeen).toISOString() : "";
  c.time.textContent = fmtTime(row.lastSeen);
  c.ago.textContent = fmtAgo(row.lastSeen, Date.now());
  const status = typeof p.status === "string" ? p.status : "unknown";
  c.badge.textContent = status;
  c.badge.className = `status ${status === "alive" ? "status-alive" : status === "stale" ? "status-stale" : "status-other"}`;
  row.tr.dataset.status = status;
  row.tr.classList.toggle("row-stale", status !== "alive");
  const key = sortKey(p);
  if (isNew || before(key, row.key) || before(row.key, key)) {
    row.key = key;
    placeRow(row);
  }
  procEmpty.hidden = true;
}

setInterval(() => {
  const now = Date.now();
  for (const row of rows.values()) row.cells.ago.textContent = fmtAgo(row.lastSeen, now);
}, 1000);

// ---- topics and lag (ops endpoints) ------------------------------------------

const topicsTable = $("topics");
const topicsStatus = $("topics-status");

async function opsGet(path) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const res = await fetch(cfg.opsBase + path, { headers, cache: "no-store" });
  let body = null;
  try {
    body = await res.json();
  } catch {
    body = null;
  }
  if (!res.ok) {
    const e = body && body.error ? body.error : {};
    const err = new Error(`${res.status} ${e.code || res.statusText}${e.msg ? `: ${e.msg}` : ""}`);
    err.status = res.status;
    throw err;
  }
  return body;
}

function lagRows(stream, lags) {
  const tbody = document.createElement("tbody");
  const groups = stream.groups || [];
  const n = Math.max(1, groups.length);
  const tr0 = document.createElement("tr");
  const topic = cell("th", (stream.topics || []).join(", ") || stream.name);
  topic.scope = "rowgroup";
  topic.rowSpan = n;
  topic.title = `stream ${stream.name}${stream.compaction ? " (compacted)" : ""}`;
  tr0.append(topic, cell("td", String(stream.messages ?? 0), "num"), cell("td", fmtTime(stream.lastTs)));
  tr0.cells[1].rowSpan = n;
  tr0.cells[2].rowSpan = n;
  if (groups.length === 0) {
    tr0.append(cell("td", "no groups", "muted"), cell("td", "", "num"), cell("td", "", "num"), cell("td", "", "num"), cell("td", "", "num"));
    tbody.append(tr0);
    return tbody;
  }
  groups.forEach((g, i) => {
    const tr = i === 0 ? tr0 : document.createElement("tr");
    tr.dataset.topic = g.topic;
    tr.dataset.group = g.group;
    const name = cell("td", g.group);
    const lag = lags.get(`${g.topic}\u0000${g.group}`);
    if (!lag || lag.error) {
      const why = lag && lag.error ? lag.error.message : "";
      tr.append(name, cell("td", "?", "num lag"), cell("td", "", "num"), cell("td", "", "num"), cell("td", "", "num"));
      tr.title = why;
    } else {
      const lagEvents = cell("td", String(lag.lag ?? 0), "num lag");
      if ((lag.lag ?? 0) > 1000) lagEvents.classList.add("lag-high");
      tr.append(
        name,
        lagEvents,
        cell("td", lag.lagMs === null || lag.lagMs === undefined ? "—" : String(lag.lagMs), "num lag-ms"),
        cell("td", String(lag.pending ?? 0), "num"),
        cell("td", String(lag.ackPending ?? 0), "num"),
      );
    }
    tbody.append(tr);
  });
  return tbody;
}

async function refreshTopics() {
  const data = await opsGet("/topics");
  const streams = Array.isArray(data && data.streams) ? data.streams : [];
  const lags = new Map();
  await Promise.all(
    streams.flatMap((s) =>
      (s.groups || []).map(async (g) => {
        const k = `${g.topic}\u0000${g.group}`;
        try {
          lags.set(k, await opsGet(`/lag?topic=${encodeURIComponent(g.topic)}&group=${encodeURIComponent(g.group)}`));
        } catch (error) {
          lags.set(k, { error });
        }
      }),
    ),
  );
  streams.sort((a, b) => String((a.topics || [])[0] || a.name).localeCompare(String((b.topics || [])[0] || b.name)));
  for (const tb of [...topicsTable.tBodies]) tb.remove();
  for (const s of streams) topicsTable.append(lagRows(s, lags));
  topicsStatus.dataset.state = "ok";
  topicsStatus.textContent = streams.length ? `Updated ${fmtTime(Date.now())}` : "No topics yet.";
}

async function topicsLoop() {
  if (!document.hidden) {
    try {
      await refreshTopics();
    } catch (err) {
      topicsStatus.dataset.state = "error";
      topicsStatus.textContent =
        err.status === 401 || err.status === 403
          ? `Ops endpoints refused the request (${err.message}); enter a token`
          : `Ops endpoints at ${cfg.opsBase || "/"}: ${err.message}`;
    }
  }
  setTimeout(topicsLoop, TOPICS_EVERY_MS);
}

// ---- publish form ----------------------------------------------------------------

const pubForm = $("publish-form");
const pubResult = $("publish-result");

function showResult(state, text, id) {
  pubResult.dataset.state = state;
  if (id) pubResult.dataset.id = id;
  else delete pubResult.dataset.id;
  pubResult.textContent = text;
}

pubForm.addEventListener("submit", async (e) => {
  e.preventDefault();
  const topic = $("pub-topic").value.trim();
  const key = $("pub-key").value;
  let payload;
  try {
    payload = JSON.parse($("pub-payload").value);
  } catch (err) {
    showResult("error", `The payload is not JSON: ${err.message}`);
    return;
  }
  const button = $("pub-submit");
  button.disabled = true;
  showResult("pending", "Publishing…");
  try {
    const r = await client.publish(topic, payload, key ? { key } : undefined);
    showResult("ok", `Published ${topic}: id ${r.id}, seq ${r.seq}`, r.id);
  } catch (err) {
    showResult("error", `Not published: ${errText(err)}`);
  } finally {
    button.disabled = false;
  }
});

// ---- token -------------------------------------------------------------------------

const tokenInput = $("token");
tokenInput.value = token();
$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  setToken(tokenInput.value.trim());
  startClient();
  topicsLoopNow();
});

let topicsTimer = null;
function topicsLoopNow() {
  // Refresh at once (e.g. with a new token) without starting a second loop.
  if (topicsTimer) return;
  topicsTimer = setTimeout(async () => {
    topicsTimer = null;
    try {
      await refreshTopics();
    } catch {
      // the loop reports errors
    }
  }, 0);
}

startClient();
topicsLoop();
