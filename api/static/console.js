// Plait console: signed requests (WebCrypto HMAC, plait/signature.py), SSE over fetch,
// small DOM helpers. No build step, no dependencies.
"use strict";
const Plait = (() => {
  const store = window.sessionStorage;
  // The API's route prefix (PLAIT_WEB_ROUTE_PREFIX, api/prefix.py): this page's path before
  // /ui/<page>, /ui/tasks/<taskId> or /ui/silences/new (api/console.py). at("/x") is /x under it.
  const base = location.pathname.replace(/\/ui\/(?:tasks\/[^/]+|silences\/new|[^/]*)$/, "");
  const at = (url) => (url.startsWith("/") ? base + url : url);
  const enc = new TextEncoder();
  const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const rfc3986 = (s) => encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
  function canonicalQuery(search) {
    const pairs = [...new URLSearchParams(search)].map(([k, v]) => [rfc3986(k), rfc3986(v)]);
    pairs.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    return pairs.map(([k, v]) => k + "=" + v).join("&");
  }
  function creds() {
    return { appKey: store.getItem("plait.appKey") || "", secret: store.getItem("plait.secret") || "",
             userId: store.getItem("plait.userId") || "", sysCode: store.getItem("plait.sysCode") || "" };
  }
  function saveCreds(c) { for (const k of ["appKey", "secret", "userId", "sysCode"]) store.setItem("plait." + k, c[k] || ""); }
  async function signedHeaders(method, url, body) {
    const c = creds();
    if (!c.appKey || !c.secret) return {};
    const u = new URL(url, location.href);
    const ts = String(Math.floor(Date.now() / 1000));
    const nonce = hex(crypto.getRandomValues(new Uint8Array(16)));
    const bodyHash = hex(await crypto.subtle.digest("SHA-256", enc.encode(body || "")));
    const canonical = [method.toUpperCase(), decodeURIComponent(u.pathname) || "/", canonicalQuery(u.search), bodyHash, ts, nonce].join("\n");
    const key = await crypto.subtle.importKey("raw", enc.encode(c.secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    const sig = hex(await crypto.subtle.sign("HMAC", key, enc.encode(canonical)));
    return { "X-Plait-AppKey": c.appKey, "X-Plait-Timestamp": ts, "X-Plait-Nonce": nonce, "X-Plait-Signature": sig };
  }
  // The request's credential: signed with appKey/appSecret (a caller registry), else the bearer
  // token (PLAIT_ALERTMANAGER_TOKEN alone: the routes that change state need it), else none.
  async function authHeaders(method, url, body) {
    const headers = await signedHeaders(method, url, body);
    const bearer = store.getItem("plait.bearer");
    if (!headers["X-Plait-AppKey"] && bearer) headers.Authorization = "Bearer " + bearer;
    return headers;
  }
  async function api(method, url, body) {
    url = at(url);
    const text = body === undefined ? "" : JSON.stringify(body);
    const headers = await authHeaders(method, url, text);
    if (text) headers["Content-Type"] = "application/json";
    const resp = await fetch(url, { method, headers, body: text || undefined });
    const ctype = resp.headers.get("content-type") || "";
    const data = ctype.includes("json") ? await resp.json() : await resp.text();
    if (!resp.ok) {
      const msg = (data && (data.message || data.detail)) || resp.statusText;
      throw new Error(`${resp.status}: ${typeof msg === "string" ? msg : JSON.stringify(msg)}`);
    }
    return data;
  }
  // Server-Sent Events read with fetch (EventSource cannot send the signature headers).
  function events(url, onState, onEnd) {
    url = at(url);
    const ctl = new AbortController();
    (async () => {
      try {
        const resp = await fetch(url, { headers: await authHeaders("GET", url, ""), signal: ctl.signal });
        if (!resp.ok || !resp.body) return;
        const reader = resp.body.getReader();
        const dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i); buf = buf.slice(i + 2);
            const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).join("\n");
            if (data) onState(JSON.parse(data));
          }
        }
      } catch (e) { /* aborted or network: the page's refresh picks it up */ }
      if (onEnd) onEnd();
    })();
    return ctl;
  }
  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
      else if (k === "dataset") Object.assign(n.dataset, v);
      else n.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids.flat()) if (kid !== null && kid !== undefined) n.append(kid.nodeType ? kid : String(kid));
    return n;
  }
  function bytes(n) {
    if (n === null || n === undefined) return "";
    const u = ["B", "KiB", "MiB", "GiB"]; let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : n) + " " + u[i];
  }
  function duration(from, to) {
    if (!from) return "";
    const s = Math.max(0, ((to ? Date.parse(to) : Date.now()) - Date.parse(from)) / 1000);
    return s < 60 ? s.toFixed(1) + " s" : Math.floor(s / 60) + " min " + Math.round(s % 60) + " s";
  }
  function loginForm(container, needs, onDone) {
    const c = creds();
    const f = el("form", { class: "login", id: "login" },
      needs.signed ? [el("label", {}, "appKey ", el("input", { name: "appKey", value: c.appKey })),
                      el("label", {}, "appSecret ", el("input", { name: "secret", type: "password", value: c.secret }))]
                   : el("label", {}, "sysCode ", el("input", { name: "sysCode", value: c.sysCode, placeholder: "e.g. tests" })),
      el("label", {}, "userId ", el("input", { name: "userId", value: c.userId })),
      needs.bearer && !needs.signed ? el("label", {}, "bearer token ", el("input", { name: "bearer", type: "password" })) : null,
      el("button", { type: "submit" }, "Sign in"));
    f.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const { bearer, ...d } = Object.fromEntries(new FormData(f));
      if (bearer) store.setItem("plait.bearer", bearer);
      saveCreds({ ...creds(), ...d });
      onDone();
    });
    container.replaceChildren(f);
  }
  return { at, api, events, el, bytes, duration, creds, saveCreds, loginForm, signedHeaders, canonicalQuery };
})();
