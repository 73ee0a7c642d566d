// fleetpulse console: the fleet from the hub's admin API, live. Plain JavaScript, no
// framework and no build step. Everything shown comes from the live stream
// (/v1/console/events) and, for one cluster, /v1/console/clusters/NS/NAME; the token the
// operator enters is kept in this tab's sessionStorage and sent as a bearer header, never
// in a URL. Text from the hub is only ever set as text (never parsed as HTML).
"use strict";

const TOKEN_KEY = "fleetpulse.token";
const STALE_AFTER_MS = 2500; // the hub ticks every 500 ms
const ROW_HEIGHT = 32;

const state = {
  rows: new Map(), // id -> row
  sets: [],
  hub: null,
  policies: [],
  fleetLoaded: false,
  skewMs: 0, // hub clock minus this browser's clock
  lastEventAt: 0,
  staleSince: null,
  connected: false,
  live: false, // whether the badge says live
  filter: { text: "", status: "all" },
  sort: { key: "id", desc: false },
  view: [], // the rows the fleet page shows, filtered and sorted
  detail: null, // the cluster page's data
};

// What tests and operators can read of the page's own timing.
window.fleetpulseConsole = { fleetRenderedAt: null, events: 0 };

// ---------- small DOM helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function verdict(status) {
  const v = status === "True" || status === "False" ? status : "Unknown";
  return h("span", { class: "v " + v }, v);
}

function hubNow() {
  return Date.now() + state.skewMs;
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString([], { hour12: false });
}

function when(ms) {
  return new Date(ms).toLocaleString([], { hour12: false });
}

function ago(ms) {
  if (ms === undefined || ms === null) return "never";
  const s = Math.max(0, Math.round((hubNow() - ms) / 1000));
  if (s < 60) return s + "s ago";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s ago";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m ago";
  return Math.floor(s / 86400) + "d ago";
}

function span(ms) {
  const s = Math.round(ms / 1000);
  return s < 120 ? s + "s" : Math.round(s / 60) + "m";
}

function splitId(id) {
  const i = id.indexOf("/");
  return [id.slice(0, i), id.slice(i + 1)];
}

function clusterHref(id) {
  const [ns, name] = splitId(id);
  return "#/cluster/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name);
}

// ---------- the token and the stream ----------

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

function headers() {
  const t = token();
  return t ? { Authorization: "Bearer " + t } : {};
}

async function answerText(response) {
  try {
    const body = await response.json();
    return body.message || body.code || response.statusText;
  } catch (_) {
    return response.statusText;
  }
}

// Reads a text/event-stream body, calling onEvent(name, data) for each event.
async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  let from = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let end;
    while ((end = buf.indexOf("\n\n", from)) >= 0) {
      const frame = buf.slice(0, end);
      buf = buf.slice(end + 2);
      from = 0;
      let name = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? "" : line.slice(c + 1);
        if (v.startsWith(" ")) v = v.slice(1);
        if (field === "event") name = v;
        else if (field === "data") data.push(v);
      }
      if (data.length) onEvent(name, data.join("\n"));
    }
    from = Math.max(0, buf.length - 1);
  }
}

let streamAbort = null;

async function connect() {
  let backoff = 500;
  for (;;) {
    streamAbort = new AbortController();
    let response;
    try {
      response = await fetch("/v1/console/events", {
        headers: headers(),
        signal: streamAbort.signal,
        cache: "no-store",
      });
    } catch (_) {
      response = null;
    }
    if (response && (response.status === 401 || response.status === 403)) {
      showLogin(token() ? "refused: " + (await answerText(response)) : null);
      return;
    }
    if (response && response.ok) {
      backoff = 500;
      state.connected = true;
      try {
        await readEvents(response, onEvent);
      } catch (_) {
        // the connection broke: reconnect below
      }
    } else if (response) {
      showProblem(response.status + ": " + (await answerText(response)));
    }
    state.connected = false;
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 4000);
  }
}

function onEvent(name, data) {
  state.lastEventAt = Date.now();
  window.fleetpulseConsole.events += 1;
  if (state.staleSince !== null || !state.live) {
    state.staleSince = null;
    state.live = true;
    showLive();
  }
  const value = JSON.parse(data);
  switch (name) {
    case "fleet":
      if (value.full) state.rows.clear();
      for (const row of value.rows) state.rows.set(row.id, row);
      for (const id of value.removed) state.rows.delete(id);
      state.fleetLoaded = true;
      fleetChanged(value);
      break;
    case "sets":
      state.sets = value;
      if (page().name === "sets") render();
      break;
    case "hub":
      state.hub = value;
      if (page().name === "brake") render();
      break;
    case "policies":
      state.policies = value;
      if (page().name === "policies") render();
      break;
    case "tick":
      state.skewMs = value.now - Date.now();
      break;
  }
}

function showLive() {
  const live = document.getElementById("live");
  live.className = "live ok";
  live.textContent = "live";
  document.body.classList.remove("stale");
  document.getElementById("stale").hidden = true;
}

function watchStaleness() {
  setInterval(() => {
    if (!state.lastEventAt) return;
    const quiet = Date.now() - state.lastEventAt;
    if (quiet > STALE_AFTER_MS && state.staleSince === null) {
      state.staleSince = state.lastEventAt;
      state.live = false;
      const live = document.getElementById("live");
      live.className = "live stale";
      live.textContent = "stale";
      document.body.classList.add("stale");
    }
    if (state.staleSince !== null) {
      const banner = document.getElementById("stale");
      banner.hidden = false;
      banner.textContent =
        "Stale: the hub has not answered since " + clock(state.staleSince) +
        " (" + span(Date.now() - state.staleSince) + "); this page shows what it said last.";
    }
  }, 250);
}

function showProblem(text) {
  const live = document.getElementById("live");
  live.className = "live stale";
  live.textContent = "unavailable";
  live.title = text;
}

// ---------- login ----------

function showLogin(error) {
  if (streamAbort) streamAbort.abort();
  document.getElementById("main").hidden = true;
  document.getElementById("login").hidden = false;
  const err = document.getElementById("login-error");
  err.hidden = !error;
  err.textContent = error || "";
  document.getElementById("token").focus();
}

async function signIn(event) {
  event.preventDefault();
  const input = document.getElementById("token");
  const candidate = input.value.trim();
  const err = document.getElementById("login-error");
  if (!candidate) {
    err.hidden = false;
    err.textContent = "enter a token";
    return;
  }
  const response = await fetch("/v1/hub", {
    headers: { Authorization: "Bearer " + candidate },
    cache: "no-store",
  });
  if (response.status === 401 || response.status === 403) {
    err.hidden = false;
    err.textContent = "refused: " + (await answerText(response));
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, candidate);
  input.value = "";
  err.hidden = true;
  document.getElementById("login").hidden = true;
  document.getElementById("main").hidden = false;
  document.getElementById("logout").hidden = false;
  connect();
}

function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("logout").hidden = true;
  showLogin(null);
}

// ---------- routing ----------

function page() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  if (parts[0] === "cluster" && parts.length >= 3) {
    return { name: "cluster", id: decodeURIComponent(parts[1]) + "/" + decodeURIComponent(parts[2]) };
  }
  const name = ["fleet", "sets", "brake", "policies"].includes(parts[0]) ? parts[0] : "fleet";
  return { name };
}

function render() {
  const p = page();
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.dataset.page === p.name);
  }
  const main = document.getElementById("main");
  const pages = window.fleetpulsePages;
  main.replaceChildren(pages[p.name](p));
  main.dataset.page = p.name;
}

function fleetChanged(event) {
  renderPart();
  const p = page();
  if (p.name === "fleet") {
    window.fleetpulsePages.fleetUpdate(event);
  } else if (p.name === "cluster" && (event.full || event.rows.some((r) => r.id === p.id))) {
    window.fleetpulsePages.clusterReload(p.id);
  }
}

// Replicas sharing the fleet: say plainly which part this one judges.
function renderPart() {
  let owned = 0;
  let sharded = false;
  for (const row of state.rows.values()) {
    if (row.owned !== undefined) sharded = true;
    if (row.owned) owned++;
  }
  const part = document.getElementById("part");
  part.hidden = !sharded;
  if (sharded) {
    part.textContent =
      "This hub replica judges " + owned + " of " + state.rows.size +
      " clusters (the shards it owns); the others are shown as the replicas owning them last wrote them.";
  }
}

window.fleetpulse = { page, state, h, s, verdict, ago, clock, when, span, hubNow, clusterHref, splitId, headers, answerText, ROW_HEIGHT, render };

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", signIn);
  document.getElementById("logout").addEventListener("click", signOut);
  document.getElementById("logout").hidden = !token();
  window.addEventListener("hashchange", render);
  watchStaleness();
  render();
  connect();
});
