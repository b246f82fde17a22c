// Alert console: current alerts and groups (Alertmanager API v2), funnel counters,
// receivers (token bucket, last delivery), silences with a matcher preview.
"use strict";
(() => {
  const { el } = Plait;
  let alerts = [];
  let bearer = sessionStorage.getItem("plait.bearer") || "";

  async function am(method, url, body) {
    const headers = { Accept: "application/json" };
    if (bearer) headers.Authorization = "Bearer " + bearer;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const resp = await fetch(Plait.at(url), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await resp.text();
    const data = text ? JSON.parse(text) : null;
    if (!resp.ok) throw new Error(`${resp.status}: ${(data && (data.message || JSON.stringify(data))) || resp.statusText}`);
    return data;
  }
  // matchers: Alertmanager/PromQL form, e.g. alertname="X", sev=~"crit.*", team!="a"
  function parseMatchers(text) {
    const out = [];
    const re = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))\s*,?/y;
    let m; const s = text.trim().replace(/^\{|\}$/g, "");
    re.lastIndex = 0;
    while (re.lastIndex < s.length && (m = re.exec(s))) {
      const op = m[2];
      out.push({ name: m[1], value: m[3] !== undefined ? m[3].replace(/\\(.)/g, "$1") : m[4],
                 isRegex: op.includes("~"), isEqual: !op.startsWith("!") });
    }
    if (re.lastIndex < s.length && s.length) throw new Error(`cannot read matchers after "${s.slice(0, re.lastIndex)}"`);
    return out;
  }
  function matches(mt, labels) {
    const v = labels[mt.name] || "";
    const hit = mt.isRegex ? new RegExp("^(?:" + mt.value + ")$").test(v) : v === mt.value;
    return mt.isEqual ? hit : !hit;
  }
  const labelsOf = (a) => el("span", { class: "labels" }, Object.entries(a.labels || {}).map(([k, v]) => el("code", {}, `${k}="${v}"`)));
  const stateOf = (a) => {
    const st = a.status || {};
    if ((st.silencedBy || []).length) return "silenced";
    if ((st.inhibitedBy || []).length) return "inhibited";
    return st.state === "active" ? "firing" : st.state || "firing";
  };
  const SEVERITIES = new Set(["critical", "warning", "info"]);
  // a link only when it is http(s) or relative: never javascript: or data: from a label
  function safeHref(url) {
    try { return ["http:", "https:"].includes(new URL(url, location.href).protocol) ? url : null; }
    catch (e) { return null; }
  }
  const quote = (v) => '"' + String(v).replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';
  const matcherText = (labels) => Object.entries(labels).map(([k, v]) => `${k}=${quote(v)}`).join(", ");
  // the filter box: label=value / label=~"re" / label!="x" matchers, the other words free text
  function filterOf(text) {
    const ms = [], words = [];
    for (const part of text.match(/[^\s,"]+(?:"(?:[^"\\]|\\.)*")?/g) || []) {
      if (/^[a-zA-Z_][a-zA-Z0-9_]*(=~|!~|!=|=)/.test(part)) ms.push(...parseMatchers(part));
      else words.push(part.toLowerCase());
    }
    return (a) => ms.every((m) => matches(m, a.labels || {})) && words.every((w) =>
      JSON.stringify([a.labels, a.annotations, (a.receivers || []).map((r) => r.name)]).toLowerCase().includes(w));
  }
  function groupKey(a, by) {
    if (by === "receiver") return (a.receivers || []).map((r) => r.name).join(", ") || "(none)";
    return by ? `${by}=${(a.labels || {})[by] ?? "(absent)"}` : "";
  }
  // Extension point: functions (alert) → Node appended to each alert's actions cell
  // (e.g. a history drawer reading /api/v2/alerts/{fingerprint}/history).
  const rowActions = [];
  window.PlaitAlertConsole = { rowActions, refresh: () => refresh() };
  // the alert's story (docs/alerting.md, "History"): one line per entry, oldest first
  const STORY = {
    received: (e) => `received from ${e.source || "?"} for ${e.receiver || "?"} (${e.status || ""})`,
    outcome: (e) => [e.outcome, e.reason, e.silenceId && "silence " + e.silenceId,
                     (e.inhibitedBy || []).length && "inhibited by " + e.inhibitedBy.join(", "),
                     e.messageId && "message " + e.messageId].filter(Boolean).join(" · "),
    message: (e) => `in message ${e.messageId} to ${e.receiver}` + (e.parts > 1 ? ` (part ${e.part} of ${e.parts})` : ""),
    attempt: (e) => `attempt ${e.attempt} to ${e.receiver}: ` + (e.ok ? "delivered" : "failed") +
                    (e.httpStatus ? ` (HTTP ${e.httpStatus})` : "") + (e.error ? ` ${e.error}` : ""),
  };
  async function showHistory(a) {
    const drawer = document.getElementById("history");
    drawer.hidden = false;
    drawer.querySelector("h3").textContent = `History of ${(a.labels || {}).alertname || a.fingerprint}`;
    const list = drawer.querySelector("ol");
    list.replaceChildren(el("li", { class: "muted" }, "loading..."));
    try {
      const story = await am("GET", `/api/v2/alerts/${encodeURIComponent(a.fingerprint)}/history`);
      list.replaceChildren(...story.entries.map((e) => el("li", { class: "story-" + e.kind, dataset: { kind: e.kind } },
        el("span", { class: "muted" }, e.time + " "), (STORY[e.kind] || JSON.stringify)(e))));
    } catch (e) { list.replaceChildren(el("li", { class: "error" }, e.message)); }
  }
  rowActions.push((a) => el("button", { type: "button", class: "history", onclick: () => showHistory(a) }, "History"));
  function alertRow(a) {
    const s = stateOf(a), sev = (a.labels || {}).severity, ann = a.annotations || {};
    const runbook = ann.runbook_url && safeHref(ann.runbook_url), gen = a.generatorURL && safeHref(a.generatorURL);
    return el("tr", { class: SEVERITIES.has(sev) ? "sev-" + sev : null,
                      dataset: { fingerprint: a.fingerprint, alertname: (a.labels || {}).alertname || "", state: s, severity: sev || "" } },
      el("td", {}, (a.labels || {}).alertname || "", el("div", { class: "muted" }, ann.summary || "")),
      el("td", {}, labelsOf(a)),
      el("td", { class: "alert-state " + (s === "firing" ? "state-active" : "state-suppressed") }, s,
         (a.status.silencedBy || []).length ? el("div", { class: "muted" }, "by " + a.status.silencedBy.join(", ")) : null),
      el("td", {}, (a.receivers || []).map((r) => r.name).join(", ")),
      el("td", { class: "muted" }, a.startsAt || ""),
      el("td", { class: "actions" },
        el("button", { type: "button", class: "silence", onclick: () => silenceAlert(a) }, "Silence"),
        runbook ? el("a", { class: "runbook", href: runbook, target: "_blank", rel: "noopener noreferrer" }, "runbook") : null,
        gen ? el("a", { class: "generator", href: gen, target: "_blank", rel: "noopener noreferrer" }, "source") : null,
        rowActions.map((f) => f(a))));
  }
  function renderAlerts() {
    let keep;
    try { keep = filterOf(document.getElementById("alert-filter").value); document.getElementById("filter-error").textContent = ""; }
    catch (e) { keep = () => true; document.getElementById("filter-error").textContent = e.message; }
    const by = document.getElementById("group-by").value;
    const shown = alerts.filter(keep);
    document.getElementById("alert-count").textContent = `(${shown.length} of ${alerts.length})`;
    const groups = new Map();
    for (const a of shown) { const k = groupKey(a, by); groups.set(k, [...(groups.get(k) || []), a]); }
    const keys = [...groups.keys()].sort();
    document.querySelector("#alerts tbody").replaceChildren(...keys.flatMap((k) => [
      by ? el("tr", { class: "group-head", dataset: { group: k } }, el("td", { colspan: "6" }, `${k} (${groups.get(k).length})`)) : null,
      ...groups.get(k).map(alertRow)].filter(Boolean)));
    const names = new Set(alerts.flatMap((a) => Object.keys(a.labels || {})));
    const sel = document.getElementById("group-by");
    for (const n of [...names].sort()) if (![...sel.options].some((o) => o.value === n)) sel.append(el("option", { value: n }, "label " + n));
  }
  // the Silence button: the form prefilled with the alert's labels as equality matchers
  function silenceAlert(a) {
    const f = document.getElementById("silence-form");
    f.querySelector("[name=matchers]").value = matcherText(a.labels || {});
    f.dataset.for = a.fingerprint;
    f.scrollIntoView({ block: "center" });
    f.querySelector("[name=comment]").focus();
    preview();
  }
  // a parsed matcher as Alertmanager's text (name, operator, quoted value)
  function matcherOf(m) {
    return `${m.name}${m.isRegex ? (m.isEqual ? "=~" : "!~") : (m.isEqual ? "=" : "!=")}${quote(m.value)}`;
  }
  // /ui/silences/new?matchers={name="value",...} (an alert message's "silence this group" link,
  // alerting/templates.py silence_url): the silence form filled with those matchers
  function prefillSilence() {
    if (!/\/ui\/silences\/new$/.test(location.pathname)) return;
    const given = new URLSearchParams(location.search).get("matchers");
    if (!given) return;
    const f = document.getElementById("silence-form");
    let text = given;
    try {
      text = parseMatchers(given).map(matcherOf).join(", ");
    } catch (e) { /* shown as given: the preview names what it cannot read */ }
    f.querySelector("[name=matchers]").value = text;
    f.scrollIntoView({ block: "center" });
    f.querySelector("[name=comment]").focus();
    preview();
  }
  function renderGroups(groups) {
    document.querySelector("#groups tbody").replaceChildren(...groups.map((g) => el("tr", {},
      el("td", {}, g.receiver.name), el("td", {}, labelsOf({ labels: g.labels })),
      el("td", {}, g.alerts.map((a) => `${(a.labels || {}).alertname || "?"} (${stateOf(a)})`).join(", ")))));
  }
  function renderFunnel(c) {
    const steps = [["received", c.received], ["deduplicated", c.deduplicated], ["silenced", c.silenced],
                   ["inhibited", c.inhibited], ["merged", c.merged], ["rejected", c.rejected],
                   ["pending", c.pending], ["delivered", c.delivered]];
    const max = Math.max(1, c.received || 0);
    document.getElementById("funnel").replaceChildren(
      ...steps.map(([name, n]) => el("div", { class: "row", dataset: { outcome: name } },
        el("span", { class: "name" }, name), el("div", { class: "fill", style: `width:${Math.round(300 * (n || 0) / max)}px;` + (name === "received" ? "background:#374151" : name === "delivered" ? "background:#1a7f37" : "") }),
        el("span", { class: "count" }, String(n || 0)))),
      el("div", { class: "muted" }, `webhook attempts ${c.attempts || 0}, failed ${c.attemptsFailed || 0}, 429 ${c.http429 || 0}, 5xx ${c.http5xx || 0}` +
        (c.balanced === false ? " — counters not balanced yet" : "")));
  }
  function renderReceivers(list) {
    document.querySelector("#receivers tbody").replaceChildren(...list.map((r) => el("tr", { dataset: { receiver: r.name } },
      el("td", {}, r.name),
      el("td", {}, r.burst ? el("div", { class: "bar", title: `${(r.tokens ?? r.burst).toFixed(2)} of ${r.burst}` },
        el("div", { style: `width:${Math.round(100 * (r.tokens ?? r.burst) / r.burst)}%` })) : "",
        el("span", { class: "muted" }, r.burst ? ` ${(r.tokens ?? r.burst).toFixed(1)} / ${r.burst}` : "not reported yet")),
      el("td", {}, String(r.outbox ?? "")),
      el("td", { class: "muted" }, r.last ? `${r.last.outcome}${r.last.status ? " " + r.last.status : ""} at ${new Date(r.last.at * 1000).toISOString()}` : "none yet"))));
  }
  function renderSilences(list) {
    document.querySelector("#silences tbody").replaceChildren(...list.map((s) => el("tr", { dataset: { silence: s.id, state: s.status.state } },
      el("td", { class: "muted" }, s.id), el("td", {}, s.matchers.map((m) => `${m.name}${m.isEqual === false ? "!" : ""}${m.isRegex ? "=~" : "="}"${m.value}"`).join(", ")),
      el("td", {}, s.status.state), el("td", { class: "muted" }, s.endsAt), el("td", {}, s.comment),
      el("td", { class: "silenced-alerts labels" }, alerts.filter((a) => (a.status.silencedBy || []).includes(s.id))
        .map((a) => el("code", { dataset: { fingerprint: a.fingerprint } }, (a.labels || {}).alertname || a.fingerprint))),
      el("td", {}, s.status.state !== "expired" ? el("button", { type: "button", class: "danger expire", onclick: () => expire(s.id) }, "Expire") : null))));
  }
  // which current alerts a silence would mute: the server's own matcher rules
  // (GET /api/v2/alerts?filter=...), the alert being silenced listed apart from the others
  let previewSeq = 0;
  async function preview() {
    const box = document.getElementById("preview");
    const form = document.getElementById("silence-form");
    const text = form.querySelector("[name=matchers]").value;
    const seq = ++previewSeq;
    if (!text.trim()) { box.textContent = "Type matchers to see which current alerts the silence would mute."; return; }
    try {
      const q = new URLSearchParams();
      for (const m of parseMatchers(text)) q.append("filter", matcherOf(m));
      const hit = await am("GET", "/api/v2/alerts?" + q);
      if (seq !== previewSeq) return;
      const others = hit.filter((a) => a.fingerprint !== form.dataset.for);
      const name = (a) => (a.labels || {}).alertname || a.fingerprint;
      box.replaceChildren(`Would mute ${hit.length} of ${alerts.length} current alerts`,
        hit.length ? ": " : ".", ...hit.map((a) => el("code", { class: "would-mute", dataset: { fingerprint: a.fingerprint } }, name(a))),
        form.dataset.for && hit.length ? el("div", { class: "others" }, others.length ? `${others.length} other alert(s) also muted: ` : "no other alert is muted",
          others.map((a) => el("code", { class: "other-muted", dataset: { fingerprint: a.fingerprint } }, matcherText(a.labels || {})))) : null);
    } catch (e) { if (seq === previewSeq) box.textContent = e.message; }
  }
  async function refresh() {
    const [a, g, s, c, r] = await Promise.allSettled([am("GET", "/api/v2/alerts"), am("GET", "/api/v2/alerts/groups"),
      am("GET", "/api/v2/silences"), am("GET", "/alerts/counters"), am("GET", "/ui/receivers")]);
    if (a.status === "fulfilled") { alerts = a.value; renderAlerts(); }
    if (g.status === "fulfilled") renderGroups(g.value);
    if (s.status === "fulfilled") renderSilences(s.value);
    if (c.status === "fulfilled") renderFunnel(c.value.data || c.value);
    if (r.status === "fulfilled") renderReceivers(r.value.receivers);
    const bad = [a, g, s, c, r].find((x) => x.status === "rejected");
    document.getElementById("who").textContent = bad ? bad.reason.message : "updated " + new Date().toLocaleTimeString();
  }
  async function expire(id) {
    try { await am("DELETE", `/api/v2/silence/${encodeURIComponent(id)}`); } catch (e) { alert(e.message); }
    refresh();
  }
  async function create(ev) {
    ev.preventDefault();
    const f = Object.fromEntries(new FormData(ev.target));
    try {
      const now = new Date();
      await am("POST", "/api/v2/silences", { matchers: parseMatchers(f.matchers), startsAt: now.toISOString(),
        endsAt: new Date(now.getTime() + parseFloat(f.hours) * 3600e3).toISOString(), createdBy: f.createdBy, comment: f.comment });
      ev.target.querySelector("[name=matchers]").value = "";
      delete ev.target.dataset.for;
    } catch (e) { alert(e.message); }
    refresh();
  }
  async function start() {
    const config = await (await fetch(Plait.at("/ui/config"))).json();
    if (!config.alerting) { document.getElementById("auth").textContent = "Alerting is not configured on this API (PLAIT_ALERTING_CONFIG)."; return; }
    if (config.bearer && !bearer) {
      const f = el("form", { class: "login" }, el("label", {}, "Alertmanager bearer token ", el("input", { name: "token", type: "password" })), el("button", {}, "Sign in"));
      f.addEventListener("submit", (e) => { e.preventDefault(); sessionStorage.setItem("plait.bearer", new FormData(f).get("token")); location.reload(); });
      document.getElementById("auth").replaceChildren(f);
      return;
    }
    document.getElementById("console").hidden = false;
    document.getElementById("silence-form").addEventListener("submit", create);
    document.querySelector("#silence-form [name=matchers]").addEventListener("input", () => { delete document.getElementById("silence-form").dataset.for; preview(); });
    document.getElementById("alert-filter").addEventListener("input", renderAlerts);
    document.getElementById("group-by").addEventListener("change", renderAlerts);
    document.querySelector("#history .close").addEventListener("click", () => { document.getElementById("history").hidden = true; });
    await refresh();
    prefillSilence(); // after the first refresh: its preview counts the current alerts
    setInterval(refresh, 2000);
  }
  start();
})();
