// The admin page: the heaviest denied keys per rule (GET /debug/limited),
// the rules in force (GET /debug/config) and the explain box
// (GET /debug/explain). Every value shown comes from callers (keys are
// attacker-controlled), so the page only ever sets textContent and
// attributes of numbers: never innerHTML, never a URL or a style made of
// data. The Content-Security-Policy forbids inline script and style, and
// every origin but this one.
"use strict";

const refreshMs = 2000;
const svgNS = "http://www.w3.org/2000/svg";

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function num(x) {
  if (typeof x !== "number") return "";
  return Number.isInteger(x) ? x.toLocaleString("en") : x.toLocaleString("en", { maximumFractionDigits: 1 });
}

function pct(x) { return typeof x === "number" ? Math.round(x * 100) + "%" : ""; }

function ago(iso, now) {
  const s = Math.max(0, Math.round((Date.parse(now) - Date.parse(iso)) / 1000));
  if (s < 60) return s + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  return Math.round(s / 3600) + "h ago";
}

function query() {
  const p = new URLSearchParams();
  p.set("window", document.getElementById("window").value);
  p.set("by", document.getElementById("by").value);
  p.set("k", document.getElementById("k").value);
  return p.toString();
}

// getJSON fetches path on the page's origin. The URL is built from
// location.origin, which leaves out credentials a user put in the page's
// address (fetch refuses a URL holding them; the browser still sends them
// as the page's basic auth).
async function getJSON(path) {
  const r = await fetch(new URL(path, location.origin), { headers: { Accept: "application/json" }, cache: "no-store" });
  if (!r.ok) throw new Error(path.split("?")[0] + ": " + r.status + " " + (await r.text()).trim());
  return r.json();
}

// chart draws a rule's decisions and denials per step as two polylines.
function chart(series) {
  const w = 300, h = 60, pad = 2;
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("class", "chart");
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  const total = series.reduce((a, p) => a + p.decisions, 0);
  const denied = series.reduce((a, p) => a + p.denied, 0);
  svg.setAttribute("aria-label", "last " + series.length * 10 + "s: " + total + " decisions, " + denied + " denied");
  const max = Math.max(1, ...series.map((p) => p.decisions));
  const line = (field, cls) => {
    const pl = document.createElementNS(svgNS, "polyline");
    pl.setAttribute("class", cls);
    const n = Math.max(1, series.length - 1);
    pl.setAttribute("points", series.map((p, i) =>
      ((i / n) * w).toFixed(1) + "," + (h - pad - (p[field] / max) * (h - 2 * pad)).toFixed(1)).join(" "));
    svg.appendChild(pl);
  };
  line("decisions", "decisions");
  line("denied", "denied");
  return svg;
}

function ruleCard(rule, now, win, explainable) {
  const card = el("article", "card");
  card.dataset.rule = rule.rule;
  const title = rule.domain ? rule.domain + " / " + rule.rule : rule.rule;
  card.appendChild(el("h3", "", title));
  const meta = [rule.kind, rule.limit];
  if (rule.shadow) meta.push("shadow mode: denials counted, callers allowed");
  if (rule.source) meta.push(rule.source);
  card.appendChild(el("p", "meta", meta.join(" · ")));
  card.appendChild(chart(rule.series));
  const legend = el("p", "meta legend");
  legend.appendChild(el("span", "d", "— decisions"));
  legend.appendChild(document.createTextNode("  "));
  legend.appendChild(el("span", "x", "— denied"));
  legend.appendChild(document.createTextNode("  per 10s, last 10 minutes · since tracked: " + num(rule.decisions) + " decisions, " + num(rule.denied) + " denied"));
  card.appendChild(legend);
  if (!rule.keys.length) {
    card.appendChild(el("p", "empty", "no key denied in the window"));
    return card;
  }
  const wrap = el("div", "scroll");
  const t = el("table");
  const head = el("tr");
  ["key", "denied " + win, "denied cost " + win, "denied total", "allowed share " + win, "last seen"].forEach((c, i) => {
    head.appendChild(el("th", i === 3 || i === 5 ? "hide-narrow" : "", c));
  });
  if (explainable) head.appendChild(el("th", "", ""));
  t.appendChild(head);
  const m = win === "15m" ? "15m" : "1m";
  for (const k of rule.keys) {
    const tr = el("tr");
    tr.appendChild(el("td", "key", k.key));
    tr.appendChild(el("td", "", num(k.denied[m])));
    tr.appendChild(el("td", "", num(k.denied_cost[m])));
    tr.appendChild(el("td", "hide-narrow", num(k.denied.total)));
    tr.appendChild(el("td", "", pct(k.allowed_share[m])));
    tr.appendChild(el("td", "hide-narrow", ago(k.last_seen, now)));
    if (explainable) {
      const td = el("td");
      const b = el("button", "", "explain");
      b.type = "button";
      b.addEventListener("click", () => {
        document.getElementById("explain-domain").value = rule.domain;
        document.getElementById("explain-descriptor").value = k.key.split(", ").join(",");
        explain();
      });
      td.appendChild(b);
      tr.appendChild(td);
    }
    t.appendChild(tr);
  }
  wrap.appendChild(t);
  card.appendChild(wrap);
  return card;
}

async function refreshLimited() {
  const status = document.getElementById("status");
  try {
    const r = await getJSON("/debug/limited?" + query());
    const win = document.getElementById("window").value;
    const box = document.getElementById("rules");
    const cards = r.rules.map((rule) => ruleCard(rule, r.now, win, rule.kind === "envoy" && !r.hashed));
    box.replaceChildren(...cards);
    if (!cards.length) box.appendChild(el("p", "empty", "no decisions yet"));
    document.getElementById("hashed").hidden = !r.hashed;
    status.className = "";
    status.textContent = "updated " + new Date(r.now).toLocaleTimeString();
  } catch (e) {
    status.className = "error";
    status.textContent = String(e.message || e);
  }
}

function sourceText(s) {
  if (!s) return "";
  if (s.xds_resource) return "xDS " + s.xds_resource + " (version " + s.version + ")";
  return s.file + ":" + s.line + ":" + s.column;
}

function rateText(r) {
  if (r.unlimited) return "unlimited";
  if (r.deny_all) return "deny all";
  let s = r.requests + " per " + r.period + ", " + r.algorithm;
  if (r.burst) s += ", burst " + r.burst;
  return s;
}

async function refreshConfig() {
  const box = document.getElementById("config");
  try {
    const c = await getJSON("/debug/config");
    const meta = document.getElementById("config-meta");
    if (!c.loaded) {
      meta.textContent = "no rules loaded (no --config): inline limits only";
      box.replaceChildren();
      return;
    }
    meta.textContent = "loaded " + c.loaded_at + " from " + (c.files.join(", ") || "xDS");
    const wrap = el("div", "scroll");
    const t = el("table", "config");
    const head = el("tr");
    ["rule", "limit", "defined at", "failure mode"].forEach((h) => head.appendChild(el("th", "", h)));
    t.appendChild(head);
    const row = (name, limit, src, fm) => {
      const tr = el("tr");
      [name, limit, src, fm].forEach((v) => tr.appendChild(el("td", "", v)));
      t.appendChild(tr);
    };
    for (const d of c.domains) {
      for (const r of d.rules) row(d.domain + " / " + r.name + " (" + r.path + ")", rateText(r), sourceText(r.source), r.failure_mode);
    }
    for (const p of c.policies) row("policy " + p.name, rateText(p), sourceText(p.source), p.failure_mode);
    wrap.appendChild(t);
    box.replaceChildren(wrap);
  } catch (e) {
    box.replaceChildren(el("p", "error", String(e.message || e)));
  }
}

function explainText(r) {
  const lines = [];
  for (const d of r.descriptors) {
    lines.push("descriptor " + d.entries.map((e) => e.key + "=" + JSON.stringify(e.value)).join(", "));
    if (!d.matched) lines.push("  matches no rule: the Envoy API answers OK for it");
    for (const m of d.rules || []) {
      lines.push("  matches " + m.name + " at " + sourceText(m.source));
      lines.push("    limit:     " + rateText(m));
      lines.push("    decision:  " + m.decision);
      if (m.store_key) lines.push("    store key: " + m.store_key);
    }
    for (const c of d.candidates || []) {
      lines.push("  nearest: " + c.path + " at " + sourceText(c.source));
      for (const why of c.reasons) lines.push("    - " + why);
    }
  }
  return lines.join("\n");
}

async function explain() {
  const out = document.getElementById("explain-out");
  const p = new URLSearchParams();
  p.set("domain", document.getElementById("explain-domain").value);
  p.set("descriptor", document.getElementById("explain-descriptor").value);
  try {
    out.className = "";
    out.textContent = explainText(await getJSON("/debug/explain?" + p.toString()));
  } catch (e) {
    out.className = "error";
    out.textContent = String(e.message || e);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("host").textContent = "(" + location.host + ")";
  document.getElementById("explain").addEventListener("submit", (ev) => { ev.preventDefault(); explain(); });
  for (const id of ["window", "by", "k"]) document.getElementById(id).addEventListener("change", refreshLimited);
  document.getElementById("controls").addEventListener("submit", (ev) => ev.preventDefault());
  refreshLimited();
  refreshConfig();
  setInterval(refreshLimited, refreshMs);
  setInterval(refreshConfig, 30 * refreshMs);
});
