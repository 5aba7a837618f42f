// anysched console: polls the console's JSON endpoints and redraws the page.
// No framework and no build: DOM built with h(), text set as text (never HTML).
"use strict";
(function () {
  const meta = (n) => document.querySelector('meta[name="' + n + '"]').content;
  const P = meta("prefix"), CSRF = meta("csrf");
  const body = document.body, page = body.dataset.page;
  const canDrain = body.dataset.canDrain === "true", canDrill = body.dataset.canDrill === "true";

  function h(tag, attrs, ...kids) {
    const svg = ["svg", "g", "circle", "text", "line", "polyline", "rect", "path", "title"].includes(tag);
    const e = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
    return e;
  }
  const $ = (id) => document.getElementById(id);
  const secs = (s) => s < 0 ? "-" : s < 10 ? s.toFixed(1) + "s" : s < 3600 ? Math.round(s) + "s" : Math.round(s / 60) + "m";
  const clock = (ms) => ms ? new Date(ms).toLocaleString() : "-";

  function showError(msg) { const e = $("error"); e.textContent = msg || ""; e.hidden = !msg; }
  async function api(path) {
    const r = await fetch(P + "api/" + path, { credentials: "same-origin", headers: { Accept: "application/json" } });
    const j = await r.json().catch(() => ({ error: r.statusText }));
    if (!r.ok) throw new Error(j.error || r.statusText);
    return j;
  }
  async function post(path, fields) {
    const r = await fetch(P + "api/" + path, {
      method: "POST", credentials: "same-origin",
      headers: { "X-CSRF-Token": CSRF, "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
      body: new URLSearchParams(fields),
    });
    const j = await r.json().catch(() => ({ error: r.statusText }));
    if (!r.ok) throw new Error(j.error || r.statusText);
    return j;
  }
  function poll(every, fn) {
    let busy = false;
    const tick = async () => {
      if (busy) return;
      busy = true;
      try { await fn(); showError(""); $("updated").textContent = new Date().toLocaleTimeString(); }
      catch (e) { showError(e.message); }
      finally { busy = false; }
    };
    tick();
    return setInterval(tick, every);
  }

  // ---- province -----------------------------------------------------------
  const lastCenter = {}; // city -> [at, center answered]: is the center answering it now?
  function answering(p) {
    const out = {};
    for (const c of p.cities) {
      const prev = lastCenter[c.name];
      out[c.name] = (prev && c.center_answered > prev[1]) || (c.center_last && p.at - c.center_last < 3000);
      lastCenter[c.name] = [p.at, c.center_answered];
    }
    return out;
  }
  function drawMap(p, ans) {
    const svg = $("map"); if (!svg) return;
    const pts = p.cities.filter((c) => c.lat || c.lon);
    svg.replaceChildren();
    if (!pts.length) { svg.append(h("text", { x: 500, y: 350, "text-anchor": "middle" }, "no topology yet")); return; }
    const lats = pts.map((c) => c.lat), lons = pts.map((c) => c.lon);
    const [a, b, c0, d] = [Math.min(...lats), Math.max(...lats), Math.min(...lons), Math.max(...lons)];
    const X = (lon) => 60 + (d === c0 ? 0.5 : (lon - c0) / (d - c0)) * 880, Y = (lat) => 60 + (b === a ? 0.5 : (b - lat) / (b - a)) * 580;
    const colors = { announced: "#1f9d55", routed: "#5b6b8c", drilled: "#7a4fd6", withdrawn: "#d23c3c", center: "#2b7bd6" };
    const placed = []; // label boxes so far: cities close together (huaibei and suzhou) must not overprint
    for (const c of pts) {
      const x = X(c.lon), y = Y(c.lat);
      const g = h("g", { "data-city": c.name },
        h("title", {}, c.name + ": " + c.route + (c.route_why ? " (" + c.route_why + ")" : "")),
        ans[c.name] ? h("circle", { cx: x, cy: y, r: 26, class: "answering" }) : null,
        h("circle", { cx: x, cy: y, r: 16, fill: colors[c.route] || "#888" }),
        labelAt(placed, x, y, c.name));
      svg.append(g);
    }
  }
  // labelAt is a city's name below its dot, else above, right or left of
  // it, the first place whose box meets no label placed before.
  function labelAt(placed, x, y, name) {
    const w = name.length * 9 + 4, hgt = 18;
    const tries = [
      { x: x, y: y + 38, anchor: "middle", box: [x - w / 2, y + 24, w, hgt] },
      { x: x, y: y - 24, anchor: "middle", box: [x - w / 2, y - 38, w, hgt] },
      { x: x + 22, y: y + 5, anchor: "start", box: [x + 22, y - 9, w, hgt] },
      { x: x - 22, y: y + 5, anchor: "end", box: [x - 22 - w, y - 9, w, hgt] },
    ];
    const meets = (a, b) => a[0] < b[0] + b[2] && b[0] < a[0] + a[2] && a[1] < b[1] + b[3] && b[1] < a[1] + a[3];
    const t = tries.find((t) => !placed.some((b) => meets(t.box, b))) || tries[0];
    placed.push(t.box);
    return h("text", { x: t.x, y: t.y, "text-anchor": t.anchor }, name);
  }
  function cityCard(c, ans) {
    return h("article", { class: "card route-" + c.route + (ans ? " answering" : ""), "data-city": c.name },
      h("h2", {}, c.name + " ", h("span", { class: "tag route" }, c.route), ans ? h("span", { class: "tag" }, " center answering") : null),
      h("p", { class: "why" }, c.route_why || ""),
      c.instances && c.instances.length ? c.instances.map((i) => h("div", { class: "inst" }, h("b", {}, i.id), " ",
        h("span", { class: "state-" + i.state }, i.state), " · rev " + i.revision + " · age " + secs(i.age_s) +
        (i.peers ? " · " + i.peers : ""))) : h("div", { class: "inst muted" }, "no scheduler registered"),
      c.health ? h("div", { class: "hl" }, c.health.available + "/" + c.health.servers + " available" +
        (c.health.drained ? " · " + c.health.drained + " drained" : "") + (c.health.unhealthy ? " · " + c.health.unhealthy + " unhealthy" : "") +
        (c.health.panic_nodes ? " · " + c.health.panic_nodes + " nodes in panic" : "")) : null,
      h("div", { class: "traffic" }, "center answered " + c.center_answered + (c.center_failed ? " (" + c.center_failed + " failed)" : "") +
        (c.city_reports ? " · city answered " + c.city_answered : "")));
  }
  function province() {
    poll(1500, async () => {
      const p = await api("province");
      const ans = answering(p);
      drawMap(p, ans);
      $("cities").replaceChildren(...p.cities.map((c) => cityCard(c, ans[c.name])));
      $("centers").replaceChildren(...(p.centers || []).map((s) => h("div", { class: "center-card" }, h("b", {}, s.id), " " + s.state +
        " · rev " + s.revision + " · " + (s.announced ? "announces " + s.prefix : s.why))));
    });
  }

  // ---- rates ---------------------------------------------------------------
  const palette = ["#2b7bd6", "#1f9d55", "#d98c00", "#d23c3c", "#7a4fd6", "#2a9d8f", "#b3541e", "#6b7385", "#c2185b", "#00838f", "#827717", "#5d4037"];
  const WINDOW = 60; // samples kept (about a minute)
  function chart(id, keysId, series) {
    const svg = $(id); if (!svg) return;
    const W = 600, H = 220, L = 40, B = 20, T = 8;
    let max = 1;
    for (const s of series) for (const v of s.values) if (v > max) max = v;
    const nice = Math.pow(10, Math.floor(Math.log10(max))); max = Math.ceil(max / nice) * nice;
    svg.replaceChildren(
      h("line", { class: "axis", x1: L, y1: H - B, x2: W, y2: H - B }), h("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }),
      h("text", { x: L - 4, y: T + 8, "text-anchor": "end" }, String(max)), h("text", { x: L - 4, y: H - B, "text-anchor": "end" }, "0"),
      h("text", { x: W, y: H - 4, "text-anchor": "end" }, "now"), h("text", { x: L, y: H - 4 }, "-" + WINDOW + "s"));
    series.forEach((s, i) => {
      const n = s.values.length; if (n < 2) return;
      const pts = s.values.map((v, j) => (L + (W - L) * (WINDOW - n + j) / (WINDOW - 1)).toFixed(1) + "," + (H - B - (H - B - T) * v / max).toFixed(1));
      svg.append(h("polyline", { points: pts.join(" "), stroke: s.color || palette[i % palette.length] }));
    });
    $(keysId).replaceChildren(...series.map((s, i) => h("span", {}, h("i", { style: "background:" + (s.color || palette[i % palette.length]) }),
      s.name + " " + (s.values.length ? s.values[s.values.length - 1].toFixed(1) : "0") + "/s")));
  }
  function rates() {
    let prev = null;
    const hist = { who: { center: [], cities: [] }, fail: { center: [] }, results: {}, cities: {} };
    const push = (arr, v) => { arr.push(v); if (arr.length > WINDOW) arr.shift(); };
    poll(1000, async () => {
      const p = await api("province");
      if (prev) {
        const dt = (p.at - prev.at) / 1000;
        if (dt > 0) {
          const pc = Object.fromEntries(prev.cities.map((c) => [c.name, c]));
          let center = 0, city = 0, failed = 0;
          const rows = [];
          for (const c of p.cities) {
            const o = pc[c.name] || c;
            const cr = Math.max(0, c.center_answered - o.center_answered) / dt, yr = Math.max(0, c.city_answered - o.city_answered) / dt;
            const fr = Math.max(0, c.center_failed - o.center_failed + c.city_failed - o.city_failed) / dt;
            center += cr; city += yr; failed += fr;
            push(hist.cities[c.name] = hist.cities[c.name] || [], cr);
            rows.push(h("tr", { "data-city": c.name }, h("td", {}, c.name), h("td", {}, c.route), h("td", {}, cr.toFixed(1)),
              h("td", {}, c.city_reports ? yr.toFixed(1) : "not reported"), h("td", {}, fr.toFixed(1)), h("td", {}, c.center_answered)));
          }
          const or = Math.max(0, p.center_outside - prev.center_outside) / dt, of = Math.max(0, p.center_outside_failed - prev.center_outside_failed) / dt;
          center += or; failed += of;
          rows.push(h("tr", { "data-city": "" }, h("td", { class: "muted" }, "in no zone"), h("td", {}, "-"), h("td", {}, or.toFixed(1)),
            h("td", {}, "-"), h("td", {}, of.toFixed(1)), h("td", {}, p.center_outside)));
          $("rates-table").tBodies[0].replaceChildren(...rows);
          push(hist.who.center, center); push(hist.who.cities, city); push(hist.fail.center, failed);
          const pr = Object.fromEntries((prev.results || []).map((r) => [r.result, r.count]));
          for (const r of p.results || []) push(hist.results[r.result] = hist.results[r.result] || [], Math.max(0, r.count - (pr[r.result] || 0)) / dt);
          chart("chart-who", "keys-who", [{ name: "center", values: hist.who.center, color: "#2b7bd6" }, { name: "cities (reported)", values: hist.who.cities, color: "#1f9d55" }]);
          chart("chart-fail", "keys-fail", [{ name: "failed", values: hist.fail.center, color: "#d23c3c" }]);
          chart("chart-results", "keys-results", Object.entries(hist.results).map(([k, v]) => ({ name: k, values: v })));
          const busy = Object.entries(hist.cities).filter(([, v]) => v.some((x) => x > 0));
          chart("chart-cities", "keys-cities", busy.map(([k, v]) => ({ name: k, values: v })));
        }
      }
      prev = p;
    });
  }

  // ---- health ----------------------------------------------------------------
  function actButton(kind, name, undrain) {
    if (!canDrain) return null;
    return h("button", { class: undrain ? "undrain" : "drain", "data-kind": kind, "data-name": name,
      onclick: async (ev) => {
        ev.preventDefault();
        const what = kind + " " + name;
        if (!undrain && !confirm("Drain " + what + "? Its STBs go to other servers.")) return;
        try { await post(undrain ? "undrain" : "drain", { kind, name }); refresh(); } catch (e) { showError(what + ": " + e.message); }
      } }, undrain ? "undrain" : "drain");
  }
  let refresh = () => {};
  function health() {
    let last = null;
    const draw = () => {
      if (!last) return;
      const v = last, f = ($("filter").value || "").toLowerCase();
      $("drains").tBodies[0].replaceChildren(...(v.drains && v.drains.length ? v.drains.map((d) => h("tr", {}, h("td", {}, d.kind), h("td", {}, d.name),
        h("td", {}, d.reason || ""), h("td", {}, clock(d.at)), h("td", {}, d.state || "active"),
        h("td", {}, d.from || d.until ? (d.from ? clock(d.from) : "now") + " – " + (d.until ? clock(d.until) : "undrain") : "-"),
        h("td", {}, actButton(d.kind, d.name, true))))
        : [h("tr", {}, h("td", { colspan: 7, class: "muted" }, "none"))]));
      const rows = [];
      let region = null, node = null;
      for (const s of v.servers || []) {
        const famDown = s.family_down ? s.family_down + " down" : "";
        if (f && ![s.region, s.node, s.server, s.verdict, s.why || "", famDown].some((x) => x.toLowerCase().includes(f))) continue;
        if (s.region !== region) {
          region = s.region;
          rows.push(h("tr", { class: "region-row" }, h("td", { colspan: 7 }, "region " + region), h("td", {}, actButton("region", region))));
        }
        if (s.node !== node) {
          node = s.node;
          rows.push(h("tr", { class: "node-row" }, h("td", {}), h("td", { colspan: 6 }, "node " + node), h("td", {}, actButton("node", node))));
        }
        rows.push(h("tr", { class: "v-" + s.verdict, "data-server": s.server }, h("td", {}, s.region), h("td", {}, s.node), h("td", {}, s.server + " ", h("span", { class: "muted" }, s.address + (s.address6 ? " " + s.address6 : ""))),
          h("td", {}, h("span", { class: "tag v" }, s.verdict), famDown ? " " : "", famDown ? h("span", { class: "tag" }, famDown) : "", s.panic ? " (node in panic)" : ""),
          h("td", {}, s.why || (famDown ? famDown + ": " + (s.family_why || "") : "") || (s.measured ? "" : "no live checker: counted available")),
          h("td", {}, s.measured ? s.rtt_ms.toFixed(1) + " ms" + (s.loss ? " · " + (100 * s.loss).toFixed(1) + "% loss" : "") : "-"),
          h("td", {}, s.effective !== s.weight ? s.weight + " → " + s.effective.toFixed(0) + (s.weight_why ? " (" + s.weight_why + ")" : "") : String(s.weight)),
          h("td", {}, actButton("server", s.server))));
      }
      const tbl = h("table", { class: "grid" }, h("thead", {}, h("tr", {}, ...["region", "node", "server", "verdict", "why", "rtt", "weight", ""].map((t) => h("th", {}, t)))), h("tbody", {}, rows));
      $("servers").replaceChildren(v.error ? h("p", { class: "muted" }, v.error) : "", tbl);
    };
    $("filter").addEventListener("input", draw);
    const load = async () => { last = await api("health"); draw(); };
    refresh = () => load().catch((e) => showError(e.message));
    poll(2000, load);
  }

  // ---- drills ----------------------------------------------------------------
  const pctOf = (f) => (100 * f).toFixed(2) + "%";
  // qoePhases is a drill's QoE table: each phase's last plans, the
  // switches and drops of the plans made in it, who planned.
  function qoePhases(r) {
    if (!r.qoe || !r.qoe.length) return r.qoe_note ? h("p", { class: "muted qoe-note" }, "qoe: " + r.qoe_note) : null;
    const dash = (ok, v) => ok ? String(v) : "-";
    return h("table", { class: "grid qoe-phases" },
      h("thead", {}, h("tr", {}, ...["qoe of " + r.target + "'s viewers", "sessions", "objective", "at desired", "fallback", "starved", "switches", "drops", "plans", "planned by"].map((t) => h("th", {}, t)))),
      h("tbody", {}, r.qoe.map((p) => {
        const s = p.state, on = p.seen && !p.no_plan;
        return h("tr", { "data-phase": p.phase }, h("td", {}, p.phase), h("td", {}, dash(on, s.sessions)), h("td", {}, dash(on, s.objective.toFixed(1))),
          h("td", {}, dash(on && s.planned > 0, pctOf(s.at_desired))), h("td", {}, dash(on, s.fallback)), h("td", {}, dash(on, s.starved)),
          h("td", {}, dash(p.plans > 0, p.switches)), h("td", {}, dash(p.plans > 0, p.drops)), h("td", {}, dash(p.seen, p.plans)), h("td", {}, p.who));
      })));
  }
  function drills() {
    const form = $("drill-form");
    if (form && canDrill) form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const fd = new FormData(form), fields = { region: fd.get("region"), duration: fd.get("duration") };
      if (fd.get("production")) fields.production = "on";
      $("drill-msg").textContent = "starting…";
      try {
        const r = await post("drill", fields);
        $("drill-msg").textContent = "drill of " + fields.region + " started until " + new Date(r.until).toLocaleTimeString() + " (" + (r.instances || []).join(", ") + ")";
      } catch (e) { $("drill-msg").textContent = ""; showError("drill: " + e.message); }
    });
    poll(1000, async () => {
      const v = await api("drills");
      $("runs").replaceChildren(...(v.runs && v.runs.length ? v.runs.map((r) => h("article", { class: "run state-" + r.state, "data-target": r.target },
        h("h2", {}, r.target + " ", h("span", { class: "tag" }, r.state), h("span", { class: "muted" }, " " + clock(r.started) + " → " + new Date(r.until).toLocaleTimeString() + (r.by ? " · by " + r.by : ""))),
        h("ol", { class: "timeline" }, (r.events || []).map((e) => h("li", {}, h("span", { class: "at" }, "+" + e.at_s.toFixed(1) + "s"), " " + e.text))),
        r.report ? h("p", { class: "report" }, r.report) : null, qoePhases(r))) : [h("p", { class: "muted none" }, "No drill followed yet.")]));
    });
  }

  // ---- qoe and history ---------------------------------------------------------
  const kbps = (k) => k <= 0 ? "-" : k < 1000 ? k.toFixed(0) + " kb/s" : k < 1e6 ? (k / 1e3).toFixed(1) + " Mb/s" : (k / 1e6).toFixed(2) + " Gb/s";
  function planRow(city, id, note, q) {
    return h("tr", {}, h("td", {}, city), h("td", {}, id), h("td", {}, q.sessions), h("td", {}, q.planned), h("td", {}, q.fallback), h("td", {}, q.starved),
      h("td", {}, q.objective.toFixed(1)), h("td", {}, pctOf(q.at_desired)), h("td", {}, q.switches), h("td", {}, q.drops),
      h("td", {}, pctOf(q.gap)), h("td", {}, secs(q.age_s)), h("td", {}, q.peers), h("td", {}, kbps(q.held_kbps) + " / " + kbps(q.capacity_kbps)),
      h("td", {}, note + (q.safe_mode ? " safe mode" : "") + (q.idle ? " idle" : "")));
  }
  // spark is a sparkline the server drew (its path in a 160×32 box).
  function spark(cls, d, title) {
    return h("svg", { class: "spark " + cls, viewBox: "0 0 160 32", role: "img" }, h("title", {}, title), h("path", { d: d || "" }));
  }
  function qoe() {
    poll(2000, async () => {
      const p = await api("province?qoe=history");
      const regions = (p.qoe || []).map((r) => {
        const s = r.state;
        return h("tr", { "data-region": r.region, class: r.plan ? null : "no-plan" }, h("td", {}, r.region), h("td", {}, r.who), h("td", {}, r.plan ? s.sessions : "-"),
          h("td", { class: "spark-cell" }, spark("obj", r.objective_path, "objective over the last 10 minutes, from " + r.objective_min.toFixed(1) + " (bottom) to " + r.objective_max.toFixed(1) + " (top)"),
            " ", h("span", { class: "val" }, r.plan ? s.objective.toFixed(1) : "-")),
          h("td", { class: "spark-cell" }, spark("desired", r.at_desired_path, "share at the desired bitrate over the last 10 minutes, 0 (bottom) to 100% (top)"),
            " ", h("span", { class: "val" }, s.planned > 0 ? pctOf(s.at_desired) : "-")),
          h("td", {}, r.plan ? s.switches + " / " + s.drops : "-"), h("td", {}, r.plan ? s.fallback + " / " + s.starved : "-"));
      });
      $("qoe-regions").tBodies[0].replaceChildren(...(regions.length ? regions : [h("tr", {}, h("td", { colspan: 7, class: "muted" }, "no region's viewers are planned (selection: qoe)"))]));
      const rows = [];
      for (const c of p.cities) for (const i of c.instances || []) if (i.qoe) rows.push(planRow(c.name, i.id, "", i.qoe));
      for (const cn of p.centers || []) for (const q of cn.planning || []) rows.push(planRow(q.region, cn.id, "a center's plan for a city whose schedulers are gone", q));
      $("plans").tBodies[0].replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { colspan: 15, class: "muted" }, "no scheduler reports a QoE plan (selection: qoe)"))]));
    });
    let filled = false;
    poll(5000, async () => {
      const v = await api("history");
      $("history").tBodies[0].replaceChildren(...(v.entries || []).map((e) => h("tr", {}, h("td", {}, e.revision + (e.revision === v.current ? " (current)" : "")),
        h("td", {}, clock(e.at)), h("td", {}, e.identity), h("td", {}, e.note || ""), h("td", {}, e.summary || ""), h("td", {}, e.kept ? "yes" : "no"))));
      if (!filled) {
        const kept = (v.entries || []).filter((e) => e.kept).map((e) => e.revision);
        const opts = () => kept.map((r) => h("option", { value: r }, String(r)));
        $("diff-from").replaceChildren(...opts()); $("diff-to").replaceChildren(...opts());
        if (kept.length > 1) $("diff-from").value = kept[1];
        filled = kept.length > 0;
      }
    });
    $("failures-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      $("failures-go").disabled = true;
      try {
        const f = await api("failures");
        const rows = f.cities.map((c) => h("tr", {}, ...[c.region, String(c.viewers), c.order, c.planned, String(c.unplanned), c.taken_by || "-",
          c.proposed || "-", c.p_planned, c.reserve || "-", c.short_mbps].map((x) => h("td", {}, x))));
        if (!rows.length) rows.push(h("tr", {}, h("td", { colspan: "10", class: "muted" }, "no city's viewers are known (selection: qoe)")));
        if ((f.stale || []).length) rows.push(h("tr", {}, h("td", { colspan: "10", class: "muted" }, "no plan state newer than a minute from " + f.stale.join(", "))));
        $("failures").tBodies[0].replaceChildren(...rows);
      } catch (e) { showError("failure plan: " + e.message); }
      $("failures-go").disabled = false;
    });
    $("diff-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      try {
        const d = await api("diff?from=" + encodeURIComponent($("diff-from").value) + "&to=" + encodeURIComponent($("diff-to").value));
        const secsEl = (d.sections || []).filter((s) => (s.added || []).length + (s.removed || []).length + (s.changed || []).length > 0).map((s) =>
          h("div", { class: "diff-sec" }, h("b", {}, s.kind),
            (s.added || []).map((n) => h("div", { class: "add" }, "+ " + n)), (s.removed || []).map((n) => h("div", { class: "del" }, "- " + n)),
            (s.changed || []).map((n) => h("div", { class: "chg" }, "~ " + n))));
        $("diff").replaceChildren(h("p", {}, "revision " + d.from + " → " + d.to + ": servers " + d.servers_before + " → " + d.servers_after +
          ", networks " + d.networks_before + " → " + d.networks_after + ((d.emptied_regions || []).length ? "; emptied: " + d.emptied_regions.join(", ") : "")),
          ...(secsEl.length ? secsEl : [h("p", { class: "muted" }, "no differences")]));
      } catch (e) { showError("diff: " + e.message); }
    });
  }

  ({ province, rates, health, drills, qoe })[page]();
})();
