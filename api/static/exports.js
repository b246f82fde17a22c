// Export center: the caller's tasks newest first, live over SSE (no reload).
"use strict";
(() => {
  const { api, events, el, bytes, duration, creds, loginForm } = Plait;
  const TERMINAL = new Set(["SUCCESS", "FAILED", "CANCELLED", "TIMEOUT"]);
  const STAGES = ["fetching", "writing", "uploading"];
  const tasks = new Map();   // taskId -> state
  const streams = new Map(); // taskId -> AbortController
  let config = { signed: false };

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
  function row(t) {
    const f = t.file || {};
    const running = !TERMINAL.has(t.status);
    const details = [];
    if (t.errorMessage) details.push(el("div", { class: "error" }, t.errorMessage));
    if (t.status === "SUCCESS") {
      const q = Object.entries(t.quality || {});
      details.push(el("div", { class: "quality" }, q.length ? "quality: " + q.map(([k, v]) => `${k}=${v}`).join(", ") : "quality: clean"));
    }
    return el("tr", { dataset: { task: t.taskId, status: t.status } },
      el("td", {}, el("div", {}, t.fileName || ""), el("div", { class: "muted" }, t.taskId),
         el("div", { class: "muted" }, `${t.bizType || ""} · ${t.createdAt || ""}`)),
      el("td", {}, el("span", { class: "status " + t.status }, t.status)),
      el("td", { class: "rows" }, String(t.exportedRows || 0), t.totalRows ? el("span", { class: "muted" }, " / " + t.totalRows) : null),
      progressCell(t),
      el("td", {}, duration(t.startedAt || t.createdAt, t.finishedAt)),
      el("td", {}, f.bytes !== undefined ? bytes(f.bytes) : "", f.fileName ? el("div", { class: "muted" }, f.fileName) : null),
      el("td", {}, details),
      el("td", {},
        f.url ? el("a", { href: f.url, class: "download", download: f.fileName || "" }, el("button", { type: "button" }, "Download")) : null,
        running ? el("button", { type: "button", class: "danger cancel", onclick: () => cancel(t.taskId) }, "Cancel") : null));
  }
  function shown(t) {
    const f = Object.fromEntries(new FormData(document.getElementById("filters")));
    if (f.status && t.status !== f.status) return false;
    if (f.bizType && t.bizType !== f.bizType) return false;
    const day = (t.createdAt || "").slice(0, 10);
    if (f.from && day < f.from) return false;
    if (f.to && day > f.to) return false;
    return true;
  }
  function render() {
    const list = [...tasks.values()].filter(shown).sort((a, b) => (b.createdAt || "").localeCompare(a.createdAt || ""));
    document.querySelector("#tasks tbody").replaceChildren(...list.map(row));
    document.getElementById("count").textContent = `${list.length} of ${tasks.size} tasks`;
  }
  function follow(t) {
    if (TERMINAL.has(t.status) || streams.has(t.taskId)) return;
    const url = `/export/tasks/${encodeURIComponent(t.taskId)}/events?` + query();
    streams.set(t.taskId, events(url, (state) => {
      const old = tasks.get(state.taskId) || {};
      tasks.set(state.taskId, { ...old, ...state });
      render();
    }, () => {
      streams.delete(t.taskId);
      // the SSE state carries no fresh download link: read the task once more
      api("GET", `/export/tasks/${encodeURIComponent(t.taskId)}?` + query())
        .then((r) => { tasks.set(t.taskId, r.data); render(); }).catch(() => {});
    }));
  }
  async function load() {
    try {
      const r = await api("GET", "/export/tasks?" + query({ limit: "200" }));
      for (const t of r.data.tasks) tasks.set(t.taskId, t);
      render();
      for (const t of r.data.tasks) follow(t);
    } catch (e) {
      document.getElementById("count").textContent = "cannot list tasks: " + e.message;
    }
  }
  async function cancel(id) {
    try { await api("POST", `/export/tasks/${encodeURIComponent(id)}/cancel?` + query()); }
    catch (e) { alert(e.message); }
  }
  async function start() {
    config = await (await fetch("/ui/config")).json();
    const c = creds();
    const ready = config.signed ? c.appKey && c.secret && c.userId : c.sysCode;
    if (!ready) {
      loginForm(document.getElementById("auth"), config, () => location.reload());
      return;
    }
    document.getElementById("who").textContent = (config.signed ? c.appKey : c.sysCode) + (c.userId ? " · " + c.userId : "");
    document.getElementById("center").hidden = false;
    document.getElementById("filters").addEventListener("change", render);
    document.getElementById("filters").addEventListener("input", render);
    document.getElementById("refresh").addEventListener("click", load);
    await load();
    setInterval(load, 5000); // picks up tasks created elsewhere; live rows come over SSE
  }
  document.getElementById("signout").addEventListener("click", () => { sessionStorage.clear(); location.reload(); });
  start();
})();
