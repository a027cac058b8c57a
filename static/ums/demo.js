// The UMS demo page: a plain HTTP client of <root>/simple (no library).
(function () {
  "use strict";
  const form = document.getElementById("ums-form");
  const root = form.dataset.root;
  const log = document.getElementById("ums-log");
  const sidBox = document.getElementById("ums-sid");
  let sid = null;

  function field(name) { return form.elements[name].value; }

  async function call(service, extra, body) {
    const q = new URLSearchParams({ service: service, ...extra });
    if (sid) { q.set("sid", sid); } else { q.set("user", field("user")); q.set("password", field("password")); }
    const resp = await fetch(root + "/simple?" + q.toString(), {
      method: "POST",
      headers: { "Content-Type": "text/plain;charset=UTF-8" },
      body: body === undefined ? "" : body,
    });
    const text = await resp.text();
    const item = document.createElement("li");
    const head = ["ums.service", "ums.status", "ums.destination", "ums.domain", "ums.mom"]
      .map(function (h) { return h + "=" + (resp.headers.get(h) || ""); }).join(" ");
    item.textContent = "HTTP " + resp.status + " " + head + (text ? " | " + text : "");
    item.dataset.service = resp.headers.get("ums.service") || "";
    item.dataset.status = resp.headers.get("ums.status") || "";
    item.dataset.body = text;
    log.insertBefore(item, log.firstChild);
    return { resp: resp, text: text };
  }

  function dest() { return { destination: field("destination"), domain: field("domain") }; }

  document.getElementById("ums-login").addEventListener("click", async function () {
    sid = null;
    const r = await call("login", {});
    if (r.resp.ok) { sid = r.text; sidBox.textContent = sid; }
  });
  document.getElementById("ums-close").addEventListener("click", async function () {
    if (!sid) { return; }
    await call("close", {});
    sid = null;
    sidBox.textContent = "(none: one-shot requests)";
  });
  document.getElementById("ums-send").addEventListener("click", function () {
    call("send", dest(), field("text"));
  });
  document.getElementById("ums-receive").addEventListener("click", function () {
    call("receive", { ...dest(), timeout: field("timeout") });
  });
}());
