// Export center: the caller's tasks newest first, live over SSE (no reload).
"use strict";
(() => {
  const { api, events, el, bytes, duration, creds, loginForm } = Plait;
  const TERMINAL = new Set(["SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"]);
  const STAGES = ["fetching", "writing", "uploading"];
  const tasks = new Map();   // taskId -> state
  const streams = new Map(); // taskId -> AbortController
  let config = { signed: false };
  let pages = [];         // cursors of the pages before this one ("" = the first page)
  let cursor = "";        // this page's cursor
  let nextCursor = null;  // data.nextCursor of this page
  // /ui/tasks/<taskId> (an alert message's task link, alerting/templates.py task_url): this
  // task alone, read with GET /export/tasks/{taskId}; null on /ui/exports
  const focus = ((m) => (m ? decodeURIComponent(m[1]) : null))(/\/ui\/tasks\/([^/]+)$/.exec(location.pathname));

  function query(extra) {
    const c = creds(); const q = new URLSearchParams();
    if (c.userId) q.set("userId", c.userId);
    if (!config.signed && c.sysCode) q.set("sysCode", c.sysCode);
    for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
    return q.toString();
  }
  function stageOf(t) {
    if (t.status === "SUCCESS") return "done";
    if (t.status !== "RUNNING") return null;
    return t.stage || "fetching";
  }
  function progressCell(t) {
    const stage = stageOf(t);
    const pct = t.status === "SUCCESS" ? 100 : Math.round((t.progress || 0) * 100);
    const busy = stage === "writing" || stage === "uploading";
    const bar = el("div", { class: "bar" + (busy ? " busy" : ""), title: busy ? stage + "…" : pct + "%" },
                   el("div", { style: `width:${pct}%` }));
    const idx = stage === "done" ? STAGES.length : STAGES.indexOf(stage);
    const chips = el("div", { class: "stages" }, STAGES.map((s, i) =>
      el("span", { class: idx > i ? "done" : idx === i ? "now" : "" }, s)));
    return el("td", { class: "progress" }, bar, stage ? chips : null,
              t.progress !== null && t.progress !== undefined && !busy ? el("span", { class: "muted" }, pct + "%") : null);
  }
  // rows per second over the task's run (started → finished, or now)
  function rate(t) {
    const from = Date.parse(t.startedAt || t.createdAt || "");
    const to = t.finishedAt ? Date.parse(t.finishedAt) : Date.now();
    const s = (to - from) / 1000;
    return t.exportedRows && s > 0 ? t.exportedRows / s : null;
  }
  function eta(t, perSec) {
    if (t.status === "SUCCESS") return "done";
    if (TERMINAL.has(t.status) || !t.totalRows || !perSec) return "";
    const s = Math.max(0, (t.totalRows - (t.exportedRows || 0)) / perSec);
    return s < 60 ? Math.ceil(s) + " s" : Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  }
  // the expiry a download link carries: expires=<epoch s> (local store), Expires=<epoch s>
  // (S3 SigV2) or X-Amz-Date + X-Amz-Expires (S3 SigV4); null when it carries none
  function linkExpiry(url) {
    let q;
    try { q = new URL(url, location.href).searchParams; } catch (e) { return null; }
    const epoch = q.get("expires") || q.get("Expires");
    if (epoch && /^\d+$/.test(epoch)) return new Date(Number(epoch) * 1000);
    const d = q.get("X-Amz-Date"), ttl = q.get("X-Amz-Expires");
    const m = d && /^(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)Z$/.exec(d);
    return m && ttl ? new Date(Date.UTC(m[1], m[2] - 1, m[3], m[4], m[5], m[6]) + Number(ttl) * 1000) : null;
  }
  function fileCell(f, dl) {
    const exp = f.url ? linkExpiry(f.url) : null;
    return el("td", {}, f.bytes !== undefined ? bytes(f.bytes) : "", f.fileName ? el("div", { class: "muted" }, f.fileName) : null,
      exp ? el("div", { class: "expiry muted", dataset: { expires: exp.toISOString() } },
               (exp < new Date() ? "link expired " : "link expires ") + exp.toISOString().replace(".000", "")) : null,
      dl ? el("div", { class: "downloads muted", dataset: { count: String(dl.count) } },
              `downloads: ${dl.count}` + (dl.lastAt ? `, last ${dl.lastAt}` : "")) : null);
  }
  function row(t) {
    const f = t.file || {};
    const running = !TERMINAL.has(t.status);
    const details = [];
    if (t.errorMessage) details.push(el("div", { class: "error" }, t.errorMessage));
    if (t.status === "SUCCESS") {
      const q = Object.entries(t.quality || {});
      details.push(el("div", { class: "quality" }, q.length ? "quality: " + q.map(([k, v]) => `${k}=${v}`).join(", ") : "quality: clean"));
    }
    const perSec = rate(t);
    return el("tr", { dataset: { task: t.taskId, status: t.status } },
      el("td", {}, el("div", {}, t.fileName || ""), t.bizDesc ? el("div", { class: "desc" }, t.bizDesc) : null,
         el("div", { class: "muted" }, t.taskId), el("div", { class: "muted" }, `${t.bizType || ""} · ${t.createdAt || ""}`)),
      el("td", {}, el("span", { class: "status " + t.status }, t.status)),
      el("td", { class: "rows" }, String(t.exportedRows || 0), t.totalRows ? el("span", { class: "muted" }, " / " + t.totalRows) : null),
      progressCell(t),
      el("td", {}, duration(t.startedAt || t.createdAt, t.finishedAt),
         el("div", { class: "rate muted" }, perSec ? Math.round(perSec) + " rows/s" : ""),
         el("div", { class: "eta muted" }, eta(t, perSec) ? "ETA " + eta(t, perSec) : "")),
      fileCell(f, t.downloads),
      el("td", {}, details),
      el("td", {},
        f.url ? el("a", { href: f.url, class: "download", download: f.fileName || "" }, el("button", { type: "button" }, "Download")) : null,
        running ? el("button", { type: "button", class: "danger cancel", onclick: () => cancel(t.taskId) }, "Cancel") : null,
        el("button", { type: "button", class: "again", onclick: () => runAgain(t.taskId) }, "Run again")));
  }
  // server-side filters of GET /export/tasks (status, bizType, createdFrom/To)
  function filters() {
    const f = Object.fromEntries(new FormData(document.getElementById("filters")));
    const q = { limit: f.limit || "20" };
    if (f.status) q.status = f.status;
    if (f.bizType) q.bizType = f.bizType;
    if (f.from) q.createdFrom = f.from + "T00:00:00Z";
    if (f.to) q.createdTo = f.to + "T23:59:59.999Z";
    return q;
  }
  function render() {
    const list = [...tasks.values()].sort((a, b) => (b.createdAt || "").localeCompare(a.createdAt || ""));
    document.querySelector("#tasks tbody").replaceChildren(...list.map(row));
    document.getElementById("count").textContent = focus ? `task ${focus}` : `page ${pages.length + 1}: ${list.length} tasks`;
    document.getElementById("next-page").disabled = !nextCursor;
    document.getElementById("prev-page").disabled = !pages.length;
  }
  function follow(t) {
    if (TERMINAL.has(t.status) || streams.has(t.taskId)) return;
    const url = `/export/tasks/${encodeURIComponent(t.taskId)}/events?` + query();
    streams.set(t.taskId, events(url, (state) => {
      if (!tasks.has(state.taskId)) return; // paged away
      const old = tasks.get(state.taskId);
      tasks.set(state.taskId, { ...old, ...state });
      render();
    }, () => {
      streams.delete(t.taskId);
      // the SSE state carries no fresh download link: read the task once more
      api("GET", `/export/tasks/${encodeURIComponent(t.taskId)}?` + query())
        .then((r) => { if (tasks.has(t.taskId)) { tasks.set(t.taskId, r.data); render(); } }).catch(() => {});
    }));
  }
  async function load() {
    if (focus) return loadOne();
    try {
      const r = await api("GET", "/export/tasks?" + query({ ...filters(), ...(cursor ? { cursor } : {}) }));
      tasks.clear();
      for (const t of r.data.tasks) tasks.set(t.taskId, t);
      nextCursor = r.data.nextCursor;
      render();
      for (const t of r.data.tasks) follow(t);
    } catch (e) {
      document.getElementById("count").textContent = "cannot list tasks: " + e.message;
    }
  }
  async function loadOne() {
    try {
      const t = (await api("GET", `/export/tasks/${encodeURIComponent(focus)}?` + query())).data;
      tasks.clear();
      tasks.set(t.taskId, t);
      nextCursor = null;
      render();
      follow(t);
    } catch (e) {
      tasks.clear();
      render();
      document.getElementById("count").textContent = `cannot show task ${focus}: ` + e.message;
    }
  }
  async function cancel(id) {
    try { await api("POST", `/export/tasks/${encodeURIComponent(id)}/cancel?` + query()); }
    catch (e) { alert(e.message); }
  }
  // "Run again": the task's accepted request (GET /export/tasks/{id} → spec), posted
  // anew with reuse=false so a recent identical result is not answered instead
  async function runAgain(id) {
    try {
      const t = (await api("GET", `/export/tasks/${encodeURIComponent(id)}?` + query())).data;
      if (!t.spec) throw new Error("this task's request is no longer kept: it cannot be run again");
      const r = await api("POST", "/export/tasks?reuse=false", t.spec);
      if (focus) { location.assign(Plait.at("/ui/tasks/" + encodeURIComponent(r.data.taskId))); return; }
      document.getElementById("count").textContent = `started again as ${r.data.taskId}`;
      pages = []; cursor = "";
      await load();
    } catch (e) { alert(e.message); }
  }
  function turn(to) {
    if (to === "next" && nextCursor) { pages.push(cursor); cursor = nextCursor; }
    else if (to === "prev" && pages.length) cursor = pages.pop();
    else if (to === "first") { pages = []; cursor = ""; }
    load();
  }
  async function start() {
    config = await (await fetch(Plait.at("/ui/config"))).json();
    const c = creds();
    const ready = config.signed ? c.appKey && c.secret && c.userId : c.sysCode;
    if (!ready) {
      loginForm(document.getElementById("auth"), config, () => location.reload());
      return;
    }
    document.getElementById("who").textContent = (config.signed ? c.appKey : c.sysCode) + (c.userId ? " · " + c.userId : "");
    document.getElementById("center").hidden = false;
    if (focus) { // one task: no filters or pages, a way back to the list
      for (const n of document.querySelectorAll("#filters label, #prev-page, #next-page")) n.hidden = true;
      document.getElementById("all-tasks").hidden = false;
    }
    document.getElementById("filters").addEventListener("change", () => turn("first"));
    document.getElementById("refresh").addEventListener("click", () => load());
    document.getElementById("next-page").addEventListener("click", () => turn("next"));
    document.getElementById("prev-page").addEventListener("click", () => turn("prev"));
    await load();
    setInterval(load, 5000); // picks up tasks created elsewhere; live rows come over SSE
  }
  document.getElementById("signout").addEventListener("click", () => { sessionStorage.clear(); location.reload(); });
  start();
})();
