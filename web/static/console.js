// eventhub console: the admin API (/admin/... under the ops endpoints) in a
// page. Topics and groups with lag and rates over the last minutes, an event
// browser, dead letters with redrive, group actions (confirmation for the
// destructive ones) and WebSocket sessions. The admin token is kept in
// sessionStorage: for this tab only. Configuration: <meta
// name="eventhub-ops-base"> (set by package web), overridden by ?ops=/prefix
// (same-origin paths only, so that a link cannot send the token elsewhere).

import { sameOriginPath } from "./sameorigin.js";

const TOKEN_KEY = "eventhub.adminToken";
const EVERY_MS = 2000;
const WINDOW_MS = 5 * 60 * 1000;

const $ = (id) => document.getElementById(id);

const opsBase = (() => {
  const el = document.querySelector('meta[name="eventhub-ops-base"]');
  const q = new URLSearchParams(location.search);
  return (sameOriginPath(q.get("ops")) ?? (el ? el.content.trim() : "")).replace(/\/+$/, "");
})();

function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  } catch {
    return "";
  }
}

function setToken(v) {
  try {
    if (v) sessionStorage.setItem(TOKEN_KEY, v);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled
  }
}

// api calls the ops endpoints; a refusal throws an Error with the status,
// the code and the message the hub gave.
async function api(method, path, params) {
  const headers = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const qs = params ? `?${new URLSearchParams(params)}` : "";
  const res = await fetch(opsBase + path + qs, { method, headers, cache: "no-store" });
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

function setStatus(state, text) {
  const el = $("status");
  el.dataset.state = state;
  el.textContent = text;
}

function refusal(err) {
  if (err.status === 401) return `Refused (${err.message}). Enter an admin token.`;
  if (err.status === 403) return `Refused (${err.message}). This token lacks the admin scope.`;
  return err.message;
}

function result(state, text) {
  const el = $("action-result");
  el.dataset.state = state;
  el.textContent = text;
  if (state === "error") setStatus("closed", refusal({ message: text, status: Number(text.slice(0, 3)) }));
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "class") e.className = v;
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// confirm asks in a modal dialog; resolves true on Confirm.
function confirmAction(text) {
  const d = $("confirm");
  $("confirm-text").textContent = text;
  d.returnValue = "";
  d.showModal();
  return new Promise((resolve) => {
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
  });
}

async function act(what, method, path, params, confirmText) {
  if (confirmText && !(await confirmAction(confirmText))) {
    result("idle", `${what}: cancelled`);
    return null;
  }
  try {
    const out = await api(method, path, params);
    result("ok", `${what}: done`);
    refresh();
    return out;
  } catch (err) {
    result("error", `${err.message}`);
    return null;
  }
}

// ---- charts: samples of the last minutes, drawn as SVG polylines -------------

const series = new Map(); // name -> [{t, v}]

function sample(name, v, now) {
  let s = series.get(name);
  if (!s) series.set(name, (s = []));
  s.push({ t: now, v });
  while (s.length && s[0].t < now - WINDOW_MS) s.shift();
  return s;
}

const SVG = "http://www.w3.org/2000/svg";

function chart(points, label) {
  const w = 160;
  const h = 28;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", w);
  svg.setAttribute("height", h);
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  svg.classList.add("spark");
  if (points.length > 1) {
    const max = Math.max(1, ...points.map((p) => p.v));
    const t0 = points[points.length - 1].t - WINDOW_MS;
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", "currentColor");
    line.setAttribute("stroke-width", "1.5");
    line.setAttribute(
      "points",
      points.map((p) => `${(((p.t - t0) / WINDOW_MS) * w).toFixed(1)},${(h - 2 - (p.v / max) * (h - 4)).toFixed(1)}`).join(" "),
    );
    svg.append(line);
  }
  return svg;
}

// ---- topics and groups --------------------------------------------------------

const lastCount = new Map(); // topic -> {t, n}

async function refreshTopics(now) {
  const body = await api("GET", "/topics");
  const tbody = $("topics").tBodies[0];
  const rows = [];
  for (const s of body.streams) {
    for (const topic of s.topics) {
      if (s.topics.length > 1) continue; // family streams: per-topic rates need their own counts
      const prev = lastCount.get(topic);
      const rate = prev && now > prev.t ? Math.max(0, ((s.lastSeq - prev.n) * 1000) / (now - prev.t)) : 0;
      lastCount.set(topic, { t: now, n: s.lastSeq });
      const pts = sample(`rate:${topic}`, rate, now);
      rows.push(
        el("tr", { "data-topic": topic },
          el("td", {}, topic), el("td", { class: "num" }, s.messages),
          el("td", { class: "num rate" }, rate.toFixed(1)), el("td", {}, chart(pts, `events per second of ${topic}`))),
      );
    }
  }
  tbody.replaceChildren(...rows);
}

function groupActions(g) {
  const p = { topic: g.topic, group: g.group };
  const to = el("input", { class: "seek-to", value: "latest", spellcheck: false, "aria-label": `seek ${g.group} to` });
  const seek = el("button", { type: "button", class: "seek" }, "Seek");
  seek.addEventListener("click", () =>
    act(`seek ${g.group}`, "POST", "/admin/groups/seek", { ...p, to: to.value },
      `Move group ${g.group} of ${g.topic} to ${to.value}? Events before it are skipped, or those after it delivered again.`));
  const pause = el("button", { type: "button", class: g.paused ? "resume" : "pause" }, g.paused ? "Resume" : "Pause");
  pause.addEventListener("click", () =>
    g.paused ? act(`resume ${g.group}`, "POST", "/admin/groups/resume", p) : act(`pause ${g.group}`, "POST", "/admin/groups/pause", p));
  const del = el("button", { type: "button", class: "delete" }, "Delete");
  del.addEventListener("click", () =>
    act(`delete ${g.group}`, "DELETE", "/admin/groups", p, `Delete group ${g.group} of ${g.topic} with its cursor?`));
  return el("td", { class: "actions" }, to, seek, pause, del);
}

async function refreshGroups(now) {
  const body = await api("GET", "/admin/groups");
  const tbody = $("groups").tBodies[0];
  const rows = body.groups.map((g) => {
    const pts = sample(`lag:${g.topic}/${g.group}`, g.lag, now);
    return el("tr", { "data-topic": g.topic, "data-group": g.group, "data-paused": String(!!g.paused) },
      el("td", {}, g.topic), el("td", {}, g.group), el("td", { class: "num lag" }, g.lag),
      el("td", {}, chart(pts, `lag of ${g.group}`)), el("td", { class: "num" }, g.inFlight),
      el("td", { class: "num dead" }, g.deadLettered + (g.deadLetteredAtLeast ? "+" : "")),
      el("td", { class: "paused" }, g.paused ? "paused" : "running"), groupActions(g));
  });
  // While a seek field has focus the rows stay, so typing is not lost.
  const a = document.activeElement;
  if (!(a && a.tagName === "INPUT" && tbody.contains(a))) tbody.replaceChildren(...rows);
}

async function refreshSessions() {
  const body = await api("GET", "/admin/sessions");
  const rows = body.sessions.map((s) => {
    const b = el("button", { type: "button", class: "disconnect" }, "Disconnect");
    b.addEventListener("click", () =>
      act(`disconnect ${s.id}`, "POST", "/admin/sessions/disconnect", { id: s.id }, `Disconnect session ${s.id} (${s.principal || "anonymous"})?`));
    return el("tr", { "data-id": s.id },
      el("td", { class: "num" }, s.id), el("td", {}, s.principal || "–"), el("td", {}, s.remote),
      el("td", {}, s.subscriptions.map((x) => `${x.topic}${x.group ? `/${x.group}` : ""}`).join(", ")),
      el("td", { class: "num" }, s.inFlight), el("td", { class: "num" }, s.queue), el("td", {}, b));
  });
  $("sessions").tBodies[0].replaceChildren(...rows);
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  const now = Date.now();
  try {
    await refreshGroups(now);
    await refreshTopics(now);
    await refreshSessions();
    setStatus("open", `Admin API at ${opsBase || "/"}: ok, ${new Date(now).toLocaleTimeString()}`);
  } catch (err) {
    setStatus("closed", refusal(err));
  } finally {
    refreshing = false;
  }
}

// ---- event browser -------------------------------------------------------------

let browseNext = null;

async function browse(from) {
  const params = { topic: $("browse-topic").value.trim(), from, limit: "50" };
  if ($("browse-key").value) params.key = $("browse-key").value;
  if ($("browse-tag").value) params.tag = $("browse-tag").value.trim();
  try {
    const page = await api("GET", "/admin/events/browse", params);
    const rows = page.events.map((s) => {
      const e = JSON.parse(JSON.stringify(s.event));
      const tr = el("tr", { "data-seq": e.seq, "data-id": e.id, tabIndex: 0 },
        el("td", { class: "num" }, e.seq), el("td", {}, e.id), el("td", {}, e.key || ""),
        el("td", {}, new Date(e.ts).toISOString()), el("td", {}, (e.tags || []).join(", ")));
      const show = () => {
        $("event-json").textContent = JSON.stringify({ event: s.event, subject: s.subject, storedTs: s.storedTs, headers: s.headers }, null, 2);
      };
      tr.addEventListener("click", show);
      tr.addEventListener("keydown", (ev) => ev.key === "Enter" && show());
      return tr;
    });
    $("events").tBodies[0].replaceChildren(...rows);
    browseNext = page.end ? null : `seq:${page.next}`;
    $("browse-next").disabled = !browseNext;
    result("ok", `${rows.length} events${page.end ? "" : "; more on the next page"}`);
  } catch (err) {
    result("error", err.message);
  }
}

// ---- dead letters -------------------------------------------------------------

async function deadLetters() {
  const topic = $("dlq-topic").value.trim();
  try {
    const body = await api("GET", "/admin/deadletters", { topic, limit: "100" });
    const rows = body.deadLetters.map((d) => {
      const redrive = el("button", { type: "button", class: "redrive" }, "Redrive");
      redrive.addEventListener("click", async () => {
        if (await act(`redrive ${d.seq}`, "POST", "/admin/deadletters/redrive", { topic, seq: d.seq })) deadLetters();
      });
      const discard = el("button", { type: "button", class: "discard" }, "Discard");
      discard.addEventListener("click", async () => {
        if (await act(`discard ${d.seq}`, "POST", "/admin/deadletters/discard", { topic, seq: d.seq }, `Discard dead letter ${d.seq} of ${topic}?`)) deadLetters();
      });
      return el("tr", { "data-seq": d.seq, "data-event-id": d.eventId },
        el("td", { class: "num" }, d.seq), el("td", {}, d.group), el("td", {}, d.eventId),
        el("td", { class: "num" }, d.attempts), el("td", {}, d.reason), el("td", {}, redrive, discard));
    });
    $("deadletters").tBodies[0].replaceChildren(...rows);
    $("deadletters").dataset.loaded = topic;
  } catch (err) {
    result("error", err.message);
  }
}

// ---- start -------------------------------------------------------------------

$("admin-token").value = token();
$("token-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  setToken($("admin-token").value.trim());
  refresh();
});
$("browse-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  browse($("browse-from").value.trim() || "earliest");
});
$("browse-next").addEventListener("click", () => browseNext && browse(browseNext));
$("dlq-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  deadLetters();
});
$("dlq-redrive-all").addEventListener("click", async () => {
  const topic = $("dlq-topic").value.trim();
  if (topic && (await act(`redrive all of ${topic}`, "POST", "/admin/deadletters/redrive", { topic, all: "true" }, `Redrive every dead letter of ${topic}?`))) deadLetters();
});
refresh();
setInterval(refresh, EVERY_MS);
