// fleetpulse console: the pages (fleet, one cluster, sets, brake, HealthPolicies). Each
// builds its DOM from the state console.js keeps; the fleet table renders only the rows in
// view, so 10,000 clusters scroll like ten.
"use strict";

(() => {
  const { state, h, s, verdict, ago, clock, when, span, hubNow, clusterHref, headers, answerText, ROW_HEIGHT } =
    window.fleetpulse;

  // ---------- fleet ----------

  const COLUMNS = [
    ["id", "Cluster"],
    ["reachable", "Reachable"],
    ["ready", "Ready"],
    ["healthy", "Healthy"],
    ["lastHeard", "Last heard"],
    ["failing", "Failing checks"],
    ["sets", "Selected by"],
  ];
  const RANK = { False: 0, Unknown: 1, True: 2 };
  // Names sort as people read them: edge-2 before edge-10.
  const names = new Intl.Collator(undefined, { numeric: true });
  const byId = (a, b) => names.compare(a.id, b.id);

  function matches(row, text, status) {
    if (status === "unhealthy" && row.healthy === "True" && row.ready === "True" && row.reachable === "True") return false;
    if (status === "unreachable" && row.reachable === "True") return false;
    if (status === "failing" && row.failing.length === 0) return false;
    if (status === "healthy" && row.healthy !== "True") return false;
    if (!text) return true;
    if (row.id.toLowerCase().includes(text) || row.reason.toLowerCase().includes(text)) return true;
    if (row.sets.some((x) => x.toLowerCase().includes(text))) return true;
    return row.failing.some((f) => f.name.toLowerCase().includes(text) || f.message.toLowerCase().includes(text));
  }

  function compare(key) {
    switch (key) {
      case "reachable":
      case "ready":
      case "healthy":
        return (a, b) => RANK[a[key]] - RANK[b[key]] || byId(a, b);
      case "lastHeard":
        return (a, b) => (a.lastHeard || 0) - (b.lastHeard || 0) || byId(a, b);
      case "failing":
        return (a, b) => b.failing.length - a.failing.length || byId(a, b);
      case "sets":
        return (a, b) => a.sets.join().localeCompare(b.sets.join()) || byId(a, b);
      default:
        return byId;
    }
  }

  function computeView() {
    const text = state.filter.text.toLowerCase();
    const view = [];
    for (const row of state.rows.values()) if (matches(row, text, state.filter.status)) view.push(row);
    view.sort(compare(state.sort.key));
    if (state.sort.desc) view.reverse();
    state.view = view;
  }

  let fleetDom = null;

  function fleetPage() {
    const count = h("span", { id: "fleet-count" });
    const chips = h("div", { class: "chips", id: "fleet-chips" });
    const search = h("input", {
      type: "search", id: "fleet-search", placeholder: "search clusters, checks, messages, sets",
      value: state.filter.text,
      oninput: (e) => { state.filter.text = e.target.value; refresh(true); },
    });
    const select = h("select", { id: "fleet-filter", onchange: (e) => { state.filter.status = e.target.value; refresh(true); } },
      [["all", "all clusters"], ["unhealthy", "not healthy"], ["unreachable", "unreachable"], ["failing", "with failing checks"], ["healthy", "healthy"]]
        .map(([v, label]) => h("option", { value: v, selected: state.filter.status === v }, label)));
    const head = h("div", { class: "grid-head", role: "row" },
      COLUMNS.map(([key, label]) => h("div", {
        "data-sort": key,
        class: state.sort.key === key ? "sorted" + (state.sort.desc ? " desc" : "") : "",
        onclick: () => {
          state.sort = { key, desc: state.sort.key === key ? !state.sort.desc : false };
          for (const d of head.children) d.className = d.dataset.sort === key ? "sorted" + (state.sort.desc ? " desc" : "") : "";
          refresh(true);
        },
      }, label)));
    const spacer = h("div", { class: "grid-spacer" });
    const grid = h("div", { class: "grid", id: "fleet-grid", role: "table" }, spacer);
    grid.addEventListener("scroll", () => paint());
    // "Last heard" reads as time since: repaint the rows in view every second.
    const every = setInterval(() => (grid.isConnected ? paint() : clearInterval(every)), 1000);
    fleetDom = { count, chips, grid, spacer };
    const body = h("div", {},
      h("h1", {}, "Fleet ", count),
      chips,
      h("div", { class: "tools" }, search, select, h("span", { class: "muted" }, "click a column to sort; a row for its cluster")),
      head, grid);
    if (state.fleetLoaded) queueMicrotask(() => refresh(true));
    else spacer.append(h("div", { class: "empty" }, "waiting for the hub..."));
    return body;
  }

  let pending = false;
  function refresh(now) {
    if (now) {
      computeView();
      paintChips();
      paint();
      return;
    }
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; refresh(true); });
  }

  function paintChips() {
    if (!fleetDom) return;
    let reachable = 0, ready = 0, healthy = 0, failing = 0;
    for (const r of state.rows.values()) {
      if (r.reachable === "True") reachable++;
      if (r.ready === "True") ready++;
      if (r.healthy === "True") healthy++;
      if (r.failing.length) failing++;
    }
    const total = state.rows.size;
    fleetDom.count.textContent = "(" + total + " clusters" + (state.view.length !== total ? ", " + state.view.length + " shown" : "") + ")";
    fleetDom.count.dataset.total = total;
    fleetDom.chips.replaceChildren(
      h("span", { class: "chip" }, h("b", {}, reachable), "reachable"),
      h("span", { class: "chip" }, h("b", {}, ready), "ready"),
      h("span", { class: "chip" }, h("b", {}, healthy), "healthy"),
      h("span", { class: "chip" }, h("b", { class: total - healthy ? "error" : "" }, total - healthy), "not healthy"),
      h("span", { class: "chip" }, h("b", {}, failing), "with failing checks"));
  }

  function rowDom(row) {
    const failing = row.failing.map((f) => f.name + ": " + f.message).join("; ");
    const title = [row.reason, failing].filter(Boolean).join("\n");
    return h("div", { class: "grid-row", role: "row", "data-id": row.id, title: title || null, onclick: () => { location.hash = clusterHref(row.id); } },
      h("div", { class: "name" }, h("a", { href: clusterHref(row.id) }, row.id), row.paused ? h("span", { class: "muted" }, " (paused)") : null),
      h("div", {}, verdict(row.reachable)),
      h("div", {}, verdict(row.ready)),
      h("div", {}, verdict(row.healthy)),
      h("div", { title: row.lastHeard ? when(row.lastHeard) : null }, ago(row.lastHeard)),
      h("div", { class: failing ? "fail" : "muted" }, failing || (row.reason ? row.reason : "")),
      h("div", {}, row.sets.join(", ")));
  }

  function paint() {
    if (!fleetDom || !fleetDom.grid.isConnected) return;
    const { grid, spacer } = fleetDom;
    const view = state.view;
    spacer.style.height = view.length * ROW_HEIGHT + "px";
    const first = Math.max(0, Math.floor(grid.scrollTop / ROW_HEIGHT) - 5);
    const last = Math.min(view.length, Math.ceil((grid.scrollTop + grid.clientHeight) / ROW_HEIGHT) + 5);
    const rows = [];
    for (let i = first; i < last; i++) {
      const el = rowDom(view[i]);
      el.style.transform = "translateY(" + i * ROW_HEIGHT + "px)";
      rows.push(el);
    }
    if (view.length === 0) rows.push(h("div", { class: "empty" }, state.rows.size ? "no cluster matches" : "no clusters"));
    spacer.replaceChildren(...rows);
    if (window.fleetpulseConsole.fleetRenderedAt === null && state.fleetLoaded) {
      window.fleetpulseConsole.fleetRenderedAt = performance.now();
      window.fleetpulseConsole.fleetRows = state.rows.size;
    }
  }

  // ---------- one cluster ----------

  let detailFor = null;
  let detailLoading = false;

  let reloadAgain = false;

  async function clusterReload(id) {
    // A change arriving while the cluster loads is fetched once that load ends.
    if (detailLoading) {
      reloadAgain = true;
      return;
    }
    detailLoading = true;
    reloadAgain = false;
    try {
      const [ns, name] = window.fleetpulse.splitId(id);
      const response = await fetch("/v1/console/clusters/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name), { headers: headers(), cache: "no-store" });
      state.detail = response.ok ? await response.json() : { error: response.status + ": " + (await answerText(response)) };
      detailFor = id;
    } catch (e) {
      state.detail = { error: String(e) };
    } finally {
      detailLoading = false;
    }
    const p = window.fleetpulse.page();
    if (p.name === "cluster" && p.id === id) window.fleetpulse.render();
    if (reloadAgain && p.name === "cluster") clusterReload(p.id);
  }

  // The window a strip spans: the last minute at least, and every time in `times`
  // with a margin before the earliest.
  function window_(times, end) {
    const first = Math.min(end, ...times);
    const margin = Math.max(5000, (end - first) * 0.08);
    return Math.min(end - 60 * 1000, first - margin);
  }

  // Where time `t` falls on a strip `width` wide spanning `start` to `end`.
  function scale(start, end, width) {
    return (t) => 140 + ((t - start) / Math.max(1, end - start)) * (width - 150);
  }

  function axis(start, end, x, y) {
    return [
      s("line", { class: "axis", x1: x(start), x2: x(end), y1: y, y2: y }),
      s("text", { x: x(start), y: y + 14 }, clock(start)),
      s("text", { x: x(end), y: y + 14, "text-anchor": "end" }, clock(end) + " (now)"),
    ];
  }

  function checkHistorySvg(detail) {
    const changes = detail.checkHistory;
    const names = [...new Set(detail.object.status?.checks?.map((c) => c.name) || []), ...new Set(changes.map((c) => c.check))]
      .filter((v, i, a) => a.indexOf(v) === i);
    if (!names.length) return h("p", { class: "muted" }, "no checks reported");
    const end = hubNow();
    const start = window_(changes.map((c) => c.at), end);
    const width = 900;
    const x = scale(start, end, width);
    const svg = s("svg", { width, height: names.length * 22 + 24, role: "img", "aria-label": "check results over time", id: "check-history" });
    names.forEach((name, i) => {
      const y = i * 22 + 4;
      svg.append(s("text", { class: "lane-label", x: 0, y: y + 12 }, name));
      const mine = changes.filter((c) => c.check === name);
      svg.append(s("rect", { class: "unknown", x: x(start), y, width: x(end) - x(start), height: 14 }, s("title", {}, "no result known to this hub process")));
      mine.forEach((c, j) => {
        const to = j + 1 < mine.length ? mine[j + 1].at : end;
        svg.append(s("rect", { class: c.passing ? "pass" : "failing", x: x(c.at), y, width: Math.max(1, x(to) - x(c.at)), height: 14 },
          s("title", {}, clock(c.at) + " " + (c.passing ? "passing" : "failing") + ": " + c.message)));
      });
    });
    svg.append(...axis(start, end, x, names.length * 22 + 6));
    return svg;
  }

  function gapsSvg(detail) {
    const end = hubNow();
    const gaps = detail.gaps.slice();
    const heard = detail.row.lastHeard;
    const interval = (detail.object.spec?.heartbeat?.intervalSeconds || 10) * 1000;
    if (heard && end - heard > 2 * interval) gaps.push({ from: heard, to: end, open: true });
    const start = window_(gaps.map((g) => g.from), end);
    const width = 900;
    const x = scale(start, end, width);
    const svg = s("svg", { width, height: 44, role: "img", "aria-label": "heartbeat gaps", id: "heartbeat-gaps" },
      s("text", { class: "lane-label", x: 0, y: 16 }, "heartbeats"),
      s("rect", { class: "pass", x: x(start), y: 4, width: x(end) - x(start), height: 14, opacity: 0.35 }));
    for (const g of gaps) {
      svg.append(s("rect", { class: "gap", x: x(g.from), y: 4, width: Math.max(2, x(g.to) - x(g.from)), height: 14 },
        s("title", {}, (g.open ? "silent since " : "gap ") + clock(g.from) + " to " + clock(g.to) + " (" + span(g.to - g.from) + ")")));
    }
    svg.append(...axis(start, end, x, 26));
    return [svg, gaps.length
      ? h("ul", {}, gaps.map((g) => h("li", {}, (g.open ? "silent now, since " : "") + when(g.from) + " to " + (g.open ? "now" : when(g.to)) + ": " + span(g.to - g.from))))
      : h("p", { class: "muted" }, "no gaps longer than two heartbeat intervals seen by this hub process")];
  }

  function clusterPage(p) {
    if (detailFor !== p.id) {
      clusterReload(p.id);
      return h("div", {}, h("h1", {}, p.id), h("p", { class: "muted" }, "loading..."));
    }
    const d = state.detail;
    if (d.error) return h("div", {}, h("h1", {}, p.id), h("p", { class: "error" }, d.error));
    const st = d.object.status || {};
    const agent = st.agent;
    return h("div", { id: "cluster", "data-id": p.id },
      h("h1", {}, d.row.id, " ", verdict(d.row.reachable), " ", verdict(d.row.ready), " ", verdict(d.row.healthy)),
      d.row.reason ? h("p", { class: "error", id: "cluster-reason" }, d.row.reason) : null,
      h("div", { class: "card kv" },
        h("div", {}, "last heard"), h("div", {}, d.row.lastHeard ? when(d.row.lastHeard) + " (" + ago(d.row.lastHeard) + ")" : "never"),
        h("div", {}, "heartbeat"), h("div", {}, "every " + (d.object.spec?.heartbeat?.intervalSeconds ?? "?") + "s, grace " + (d.object.spec?.heartbeat?.gracePeriodSeconds ?? "?") + "s"),
        h("div", {}, "agent"), h("div", {}, agent ? agent.version + " (key " + agent.keyId.slice(0, 12) + "...)" : "none reported"),
        h("div", {}, "sets"), h("div", { id: "cluster-sets" }, d.sets.length ? d.sets.map((m) => m.set + (m.selected ? " (selected)" : " (matches)")).join(", ") : "none")),
      h("h2", {}, "Conditions"),
      h("table", {}, h("tr", {}, ["type", "status", "reason", "message", "since"].map((t) => h("th", {}, t))),
        (st.conditions || []).map((c) => h("tr", {}, h("td", {}, c.type), h("td", {}, verdict(c.status)), h("td", {}, c.reason), h("td", {}, c.message), h("td", {}, c.lastTransitionTime ? when(Date.parse(c.lastTransitionTime)) : "")))),
      h("h2", {}, "Checks"),
      h("table", { id: "cluster-checks" }, h("tr", {}, ["check", "kind", "phase", "result", "message", "since", "failures in a row", "success rate"].map((t) => h("th", {}, t))),
        (st.checks || []).map((c) => h("tr", {}, h("td", {}, c.name), h("td", {}, c.kind), h("td", {}, c.phase), h("td", {}, verdict(c.passing ? "True" : "False")), h("td", {}, c.message), h("td", {}, c.since ? when(Date.parse(c.since)) : ""), h("td", {}, c.consecutiveFailures ?? ""), h("td", {}, c.successRatePercent !== undefined ? c.successRatePercent + "%" : "")))),
      h("h2", {}, "Check results over time"),
      h("div", { class: "card" }, checkHistorySvg(d), h("div", { class: "legend" }, "green passing, red failing, grey not known to this hub process (its history starts when it started)")),
      h("h2", {}, "Heartbeat gaps"),
      h("div", { class: "card" }, gapsSvg(d)),
      h("h2", {}, "Recent transitions"),
      d.transitions.length
        ? h("table", {}, h("tr", {}, ["when", "condition", "from", "to", "reason", "message"].map((t) => h("th", {}, t))),
          d.transitions.slice().reverse().map((t) => h("tr", {}, h("td", {}, when(Date.parse(t.at))), h("td", {}, t.condition), h("td", {}, t.from || ""), h("td", {}, t.to), h("td", {}, t.reason), h("td", {}, t.message))))
        : h("p", { class: "muted" }, "none seen by this hub process"));
  }

  // ---------- sets ----------

  function timelineSvg(set) {
    const end = hubNow();
    const moves = set.timeline;
    const lanesOf = [];
    const add = (id) => { if (!lanesOf.includes(id)) lanesOf.push(id); };
    for (const m of moves) { m.selected.forEach(add); m.dropped.forEach((d) => add(d.cluster)); }
    set.selected.forEach(add);
    if (!lanesOf.length) return h("p", { class: "muted" }, "nothing selected yet");
    const start = window_(moves.map((m) => m.at), end);
    const width = 900;
    const x = (t) => 160 + ((t - start) / Math.max(1, end - start)) * (width - 170);
    const height = lanesOf.length * 24 + 26;
    const svg = s("svg", { width, height, role: "img", "aria-label": "who " + set.key + " selected when", class: "timeline", "data-set": set.key });
    lanesOf.forEach((id, i) => svg.append(s("text", { class: "lane-label", x: 0, y: i * 24 + 16 }, id)));
    const lane = (id) => lanesOf.indexOf(id) * 24 + 5;
    // Before the first move this hub process saw, the selection then is not known here.
    const segments = moves.length ? moves.map((m, j) => [m.at, j + 1 < moves.length ? moves[j + 1].at : end, m.selected]) : [[start, end, set.selected]];
    for (const [from, to, selected] of segments) {
      for (const id of selected) {
        svg.append(s("rect", { class: "sel", x: x(from), y: lane(id), width: Math.max(2, x(to) - x(from)), height: 14, rx: 2 },
          s("title", {}, id + " selected from " + clock(from) + (to === end ? " until now" : " to " + clock(to)))));
      }
    }
    for (const m of moves) {
      svg.append(s("line", { class: "move", x1: x(m.at), x2: x(m.at), y1: 0, y2: height - 22 }));
      for (const d of m.dropped) {
        const cx = x(m.at), cy = lane(d.cluster) + 7;
        svg.append(s("path", { class: "drop", d: `M${cx - 5} ${cy - 5} L${cx + 5} ${cy + 5} M${cx + 5} ${cy - 5} L${cx - 5} ${cy + 5}`, stroke: "#c62828", "stroke-width": 3 },
          s("title", {}, d.cluster + " dropped at " + clock(m.at) + ": " + d.reason)));
      }
    }
    svg.append(...axis(start, end, x, height - 18));
    return svg;
  }

  function setsPage() {
    if (!state.sets.length) return h("div", {}, h("h1", {}, "Sets"), h("p", { class: "muted" }, "no ClusterSets or Sets"));
    return h("div", {}, h("h1", {}, "Sets"), state.sets.map((set) => {
      const satisfied = set.conditions.find((c) => c.type === "Satisfied");
      const frozen = set.conditions.find((c) => c.type === "ReassignmentFrozen");
      return h("div", { class: "card", "data-set": set.key },
        h("h2", {}, set.key, " ", satisfied ? verdict(satisfied.status) : null),
        h("div", { class: "kv" },
          h("div", {}, "selected now"), h("div", { "data-role": "selected" }, set.selected.length ? set.selected.join(", ") : "none"),
          h("div", {}, "wants"), h("div", {}, "at most " + set.maxReplicas + " of " + set.matching.length + " matching"),
          satisfied ? [h("div", {}, "satisfied"), h("div", {}, satisfied.reason + ": " + satisfied.message)] : null,
          frozen && frozen.status === "True" ? [h("div", {}, "frozen"), h("div", { class: "error" }, frozen.message)] : null,
          h("div", {}, "last failover"), h("div", { "data-role": "last-failover" }, set.lastFailoverTime ? when(set.lastFailoverTime) + " (" + ago(set.lastFailoverTime) + "): " + (set.lastFailoverReason || "") : "none")),
        h("h2", {}, "Who was selected when"),
        timelineSvg(set),
        set.timeline.length
          ? h("table", { "data-role": "moves" }, h("tr", {}, ["when", "selected from then on", "dropped, and why"].map((t) => h("th", {}, t))),
            set.timeline.slice().reverse().map((m) => h("tr", {}, h("td", {}, when(m.at)), h("td", {}, m.selected.join(", ") || "none"), h("td", {}, m.dropped.map((d) => d.cluster + ": " + d.reason).join("; ")))))
          : h("p", { class: "muted" }, "no selection change seen by this hub process yet"));
    }));
  }

  // ---------- brake ----------

  function brakePage() {
    const hub = state.hub;
    if (!hub) return h("div", {}, h("h1", {}, "Partition brake"), h("p", { class: "muted" }, "waiting for the hub..."));
    const b = hub.partitionBrake;
    return h("div", { id: "brake", "data-state": b.state },
      h("h1", {}, "Partition brake: ", h("span", { class: "v " + (b.state === "Released" ? "True" : "False") }, b.state)),
      h("div", { class: "card kv" },
        h("div", {}, "set reassignment"), h("div", {}, b.frozen ? "frozen" : "follows cluster health"),
        h("div", {}, "since"), h("div", {}, b.since ? when(Date.parse(b.since)) : "this hub process started"),
        h("div", {}, "why"), h("div", { id: "brake-message" }, b.message),
        h("div", {}, "fleet"), h("div", {}, hub.clusters + " clusters, " + hub.sets + " sets")),
      h("p", { class: "muted" }, "The brake engages when most clusters go quiet at once: the hub then assumes it is cut off itself and moves no set until heartbeats return."));
  }

  // ---------- HealthPolicies ----------

  function policiesPage() {
    const policies = state.policies;
    return h("div", {}, h("h1", {}, "HealthPolicies"),
      policies.length
        ? h("table", { id: "policies" }, h("tr", {}, ["policy", "clusters", "accepted", "reason", "message"].map((t) => h("th", {}, t))),
          policies.map((p) => {
            const c = (p.status?.conditions || []).find((x) => x.type === "Accepted");
            return h("tr", { "data-policy": (p.metadata.namespace || "default") + "/" + p.metadata.name },
              h("td", {}, (p.metadata.namespace || "default") + "/" + p.metadata.name),
              h("td", {}, p.status?.matchedClusters ?? ""),
              h("td", {}, verdict(c ? c.status : "Unknown")),
              h("td", {}, c ? c.reason : ""),
              h("td", { class: c && c.status === "False" ? "error" : "" }, c ? c.message : ""));
          }))
        : h("p", { class: "muted" }, "no HealthPolicies"));
  }

  window.fleetpulsePages = {
    fleet: fleetPage,
    cluster: clusterPage,
    sets: setsPage,
    brake: brakePage,
    policies: policiesPage,
    fleetUpdate: () => refresh(false),
    clusterReload,
  };
})();
