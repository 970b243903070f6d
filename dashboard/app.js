// The edgecount dashboard: every refresh reads the agent's /metrics
// (Prometheus text), its trending lists and its cluster view, and shows
// them. Rates are the change of the agent's counters between two refreshes.
// Each figure also carries its raw value in data-value, which the test
// compares with the API's answers.
"use strict";
(function () {
  const TOKEN_KEY = "edgecount-token";
  const COUNTER_KEY = "edgecount-counter";
  const WINDOWS = ["5m", "1h", "24h"];
  const WRITE_ROUTES = ["POST /v1/increments", "POST /v1/reactions"];
  const READ_ROUTES = ["GET /v1/counts", "GET /v1/counts/{content_id}", "POST /v1/counts",
    "GET /v1/reactions/{user_id}", "GET /v1/reactions/{user_id}/{content_id}"];
  const body = document.body;
  const region = body.dataset.region;
  const counters = (body.dataset.counters || "").split(",").filter(Boolean);
  const interval = Number(body.dataset.intervalMs) || 2000;
  const $ = (id) => document.getElementById(id);
  let prev = null; // the previous metrics sample: {t, v}
  let refreshes = 0;

  // parseMetrics reads the Prometheus text format into name -> [{labels, value}].
  function parseMetrics(text) {
    const out = new Map();
    for (const line of text.split("\n")) {
      if (line === "" || line[0] === "#") continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
      if (!m) continue;
      const labels = {};
      if (m[2]) {
        for (const l of m[2].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
          labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
        }
      }
      if (!out.has(m[1])) out.set(m[1], []);
      out.get(m[1]).push({ labels, value: Number(m[3]) });
    }
    return out;
  }

  // total sums the series of name whose labels pass keep; null when the
  // agent exports no such metric.
  function total(ms, name, keep) {
    const series = ms.get(name);
    if (!series) return null;
    let s = 0;
    for (const x of series) if (!keep || keep(x.labels)) s += x.value;
    return s;
  }

  const routeIn = (routes) => (l) => routes.includes(l.route);

  function sample(ms) {
    return {
      writes: total(ms, "edgecount_http_requests_total", routeIn(WRITE_ROUTES)),
      reads: total(ms, "edgecount_http_requests_total", routeIn(READ_ROUTES)),
      incs: total(ms, "edgecount_agent_increments_total"),
      flushes: total(ms, "edgecount_agent_flushes_total"),
      flushSeconds: total(ms, "edgecount_agent_flush_seconds_total"),
      rollupLag: total(ms, "edgecount_rollup_lag_seconds"),
      logBytes: total(ms, "edgecount_agent_log_bytes"),
      logOldest: total(ms, "edgecount_agent_log_oldest_unacknowledged_seconds"),
      outboxBytes: total(ms, "edgecount_agent_outbox_log_bytes"),
      outboxOldest: total(ms, "edgecount_agent_outbox_log_oldest_unacknowledged_seconds"),
      outboxMessages: total(ms, "edgecount_agent_outbox_messages"),
      refused: total(ms, "edgecount_agent_log_writes_refused_total"),
    };
  }

  function fmtBytes(b) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
    return (i === 0 ? String(b) : b.toFixed(1)) + " " + units[i];
  }
  function fmtSeconds(s) {
    if (s < 1) return (s * 1000).toFixed(1) + " ms";
    return s.toFixed(2) + " s";
  }
  const fmtInt = (n) => String(Math.round(n));

  // show puts a figure in element id: its text, and its raw value in
  // data-value (removed when unknown).
  function show(id, value, fmt, extra) {
    const el = $(id);
    if (value === null || value === undefined || Number.isNaN(value)) {
      el.textContent = "—";
      delete el.dataset.value;
    } else {
      el.textContent = fmt(value);
      el.dataset.value = String(value);
    }
    for (const [k, v] of Object.entries(extra || {})) el.dataset[k] = String(v);
  }

  function showRate(id, cur, old, span) {
    if (cur === null || old === null || span <= 0) {
      show(id, null);
      return;
    }
    show(id, (cur - old) / span, (r) => r.toFixed(1) + "/s", { prev: old, cur: cur, span: span });
  }

  function showMetrics(s, t) {
    const span = prev ? (t - prev.t) / 1000 : 0;
    const p = prev ? prev.v : {};
    showRate("write-rate", s.writes, prev ? p.writes : null, span);
    showRate("read-rate", s.reads, prev ? p.reads : null, span);
    showRate("inc-rate", s.incs, prev ? p.incs : null, span);
    show("writes-total", s.writes, fmtInt);
    show("reads-total", s.reads, fmtInt);
    show("incs-total", s.incs, fmtInt);
    show("flushes-total", s.flushes, fmtInt);
    const df = prev && s.flushes !== null && p.flushes !== null ? s.flushes - p.flushes : 0;
    show("flush-time", df > 0 ? (s.flushSeconds - p.flushSeconds) / df : null, fmtSeconds);
    show("rollup-lag", s.rollupLag, fmtSeconds);
    $("rollup-note").textContent = s.rollupLag === null ? "no in-process rollup: see the rollup's /metrics" : "last applied message";
    show("log-bytes", s.logBytes, fmtBytes);
    show("log-oldest", s.logOldest, fmtSeconds);
    show("outbox-bytes", s.outboxBytes, fmtBytes);
    show("outbox-oldest", s.outboxOldest, fmtSeconds);
    show("outbox-messages", s.outboxMessages, fmtInt);
    show("refused-total", s.refused, fmtInt);
    prev = { t: t, v: s };
  }

  async function get(path) {
    const headers = {};
    const tok = sessionStorage.getItem(TOKEN_KEY);
    if (tok) headers["Authorization"] = "Bearer " + tok;
    const resp = await fetch(path, { headers: headers, cache: "no-store" });
    if (!resp.ok) {
      let msg = resp.statusText;
      try { msg = (await resp.json()).error || msg; } catch (_) { /* not JSON */ }
      const err = new Error(path.split("?")[0] + ": " + resp.status + " " + msg);
      err.status = resp.status;
      throw err;
    }
    return resp;
  }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function trendingTable(scope, win, counter, list, err) {
    const box = el("div");
    box.appendChild(el("h3", {}, win));
    if (err) {
      box.appendChild(el("p", { class: "empty" }, err.message));
      return box;
    }
    const table = el("table", { "data-scope": scope, "data-window": win, "data-counter": counter, "data-as-of": list.as_of || "" });
    const head = el("tr");
    head.append(el("th", {}, "#"), el("th", {}, "content"), el("th", { class: "num" }, counter), el("th", { class: "num" }, "± error"));
    table.appendChild(head);
    list.items.forEach((it, i) => {
      const tr = el("tr", { "data-id": it.content_id, "data-count": String(it.count), "data-error": String(it.error) });
      tr.append(el("td", {}, String(i + 1)), el("td", { title: it.content_id }, it.content_id),
        el("td", { class: "num" }, String(it.count)), el("td", { class: "num" }, String(it.error)));
      table.appendChild(tr);
    });
    if (list.items.length === 0) {
      const tr = el("tr");
      tr.appendChild(el("td", { colspan: "4", class: "empty" }, "nothing counted in " + win));
      table.appendChild(tr);
    }
    box.appendChild(table);
    return box;
  }

  async function trending(scope, counter) {
    return Promise.all(WINDOWS.map(async (w) => {
      try {
        const q = new URLSearchParams({ region: scope, counter: counter, window: w, k: "10" });
        return { w, list: await (await get("/v1/trending?" + q)).json() };
      } catch (err) {
        return { w, err };
      }
    }));
  }

  function showTrending(id, scope, counter, lists) {
    const box = $(id);
    box.replaceChildren(...lists.map((x) => trendingTable(scope, x.w, counter, x.list, x.err)));
  }

  function showCluster(view, err) {
    const box = $("cluster");
    if (err) {
      box.replaceChildren(el("p", { class: "empty", id: "cluster-none" }, err.status === 404 ? "this agent runs no gossip (set gossip.bind)" : err.message));
      return;
    }
    const table = el("table", { id: "members", "data-self": view.self });
    const head = el("tr");
    for (const h of ["name", "state", "agent", "http", "version", "rtt", "since"]) head.appendChild(el("th", {}, h));
    table.appendChild(head);
    for (const m of view.members) {
      const tr = el("tr", { "data-name": m.name, "data-state": m.state });
      tr.append(el("td", {}, m.name + (m.name === view.self ? " (this agent)" : "")),
        el("td", { class: "state-" + m.state }, m.state), el("td", {}, m.agent_id || ""),
        el("td", {}, m.http_addr || ""), el("td", {}, m.version || ""),
        el("td", {}, m.rtt_ns ? fmtSeconds(m.rtt_ns / 1e9) : ""), el("td", {}, m.since || ""));
      table.appendChild(tr);
    }
    box.replaceChildren(table);
  }

  async function refresh() {
    const counter = $("counter").value;
    const errors = [];
    const metrics = get("/metrics").then(async (r) => ({ text: await r.text(), t: Date.now() }));
    const cluster = get("/v1/cluster").then((r) => r.json());
    const regional = counter ? trending(region, counter) : Promise.resolve(null);
    const global = counter ? trending("global", counter) : Promise.resolve(null);
    const [m, c, tr, tg] = await Promise.allSettled([metrics, cluster, regional, global]);
    if (m.status === "fulfilled") {
      showMetrics(sample(parseMetrics(m.value.text)), m.value.t);
    } else {
      errors.push(m.reason.status === 401 || m.reason.status === 403 ? "enter a token with the read scope" : m.reason.message);
    }
    showCluster(c.value, c.reason);
    if (counter) {
      showTrending("trending-region", region, counter, tr.value);
      showTrending("trending-global", "global", counter, tg.value);
    } else {
      for (const id of ["trending-region", "trending-global"]) $(id).replaceChildren(el("p", { class: "empty" }, "trending is off on this agent"));
    }
    $("error").textContent = errors.join("; ");
    $("updated").textContent = new Date().toLocaleTimeString();
    refreshes++;
    $("refreshes").textContent = String(refreshes);
    $("refreshes").dataset.n = String(refreshes);
  }

  async function loop() {
    try {
      await refresh();
    } catch (err) {
      $("error").textContent = String(err);
    }
    setTimeout(loop, interval);
  }

  const sel = $("counter");
  for (const c of counters) sel.appendChild(el("option", { value: c }, c));
  const kept = sessionStorage.getItem(COUNTER_KEY);
  if (kept && counters.includes(kept)) sel.value = kept;
  sel.addEventListener("change", () => { sessionStorage.setItem(COUNTER_KEY, sel.value); refresh(); });
  const tok = $("token");
  tok.value = sessionStorage.getItem(TOKEN_KEY) || "";
  const save = () => {
    if (tok.value) sessionStorage.setItem(TOKEN_KEY, tok.value); else sessionStorage.removeItem(TOKEN_KEY);
    prev = null;
    refresh();
  };
  $("save-token").addEventListener("click", save);
  tok.addEventListener("keydown", (e) => { if (e.key === "Enter") save(); });
  loop();
})();
