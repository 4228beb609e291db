// The audit trail with filters, and the templates.
import { ApiError, json, send } from "./api";
import { clear, guarded, h } from "./dom";

export function auditPage(root: HTMLElement): () => void {
  const kind = h("input", { id: "akind", type: "search", placeholder: "guard.finding, network.connection…" });
  const ctx = h("input", { id: "actx", type: "search", placeholder: "context id" });
  const text = h("input", { id: "atext", type: "search" });
  const msg = h("p", { class: "error", role: "alert" });
  const tbody = h("tbody");
  let events: any[] = [];
  const render = () => {
    clear(tbody);
    const k = kind.value.trim(), c = ctx.value.trim(), q = text.value.trim().toLowerCase();
    const rows = events.filter((e) => (!k || e.kind.includes(k)) && (!c || (e.contextId || e.detail?.context || "").includes(c)) &&
      (!q || JSON.stringify(e.detail || {}).toLowerCase().includes(q)));
    if (!rows.length) tbody.append(h("tr", null, h("td", { colspan: "4", class: "muted" }, "No event matches.")));
    for (const e of rows) {
      tbody.append(h("tr", null, h("td", null, new Date(e.at).toLocaleString()), h("td", null, e.kind), h("td", null, e.contextId || e.detail?.context || "–"),
        h("td", { class: "wrap" }, guarded(Object.entries(e.detail || {}).map(([k, v]) => k + "=" + v).join(" ")))));
    }
  };
  const load = async () => {
    try {
      events = (await json("/v1/audit?limit=1000")).events || [];
      render();
    } catch (e) { msg.textContent = e instanceof ApiError ? e.message : String(e); }
  };
  [kind, ctx, text].forEach((i) => i.addEventListener("input", render));
  root.append(h("section", { class: "card", "aria-labelledby": "audit-title" },
    h("h1", { id: "audit-title" }, "Audit trail"),
    h("div", { class: "row" },
      h("div", null, h("label", { for: "akind" }, "Kind"), kind),
      h("div", null, h("label", { for: "actx" }, "Context"), ctx),
      h("div", { class: "grow" }, h("label", { for: "atext" }, "Detail contains"), text),
      h("button", { type: "button", class: "secondary", onclick: load }, "Refresh")),
    msg,
    h("div", { class: "scroll" }, h("table", { "aria-label": "Audit events" },
      h("thead", null, h("tr", null, ...["Time", "Kind", "Context", "Detail"].map((c) => h("th", { scope: "col" }, c)))), tbody))));
  load();
  return () => {};
}

export function templatesPage(root: HTMLElement): () => void {
  const msg = h("p", { class: "error", role: "alert" });
  const tbody = h("tbody");
  const name = h("input", { id: "bname", type: "text", required: true, spellcheck: "false", placeholder: "my-template" });
  const dockerfile = h("textarea", { id: "bdockerfile", rows: "6", spellcheck: "false" });
  dockerfile.value = "FROM default\nRUN echo built by the console > /home/user/built.txt\n";
  const buildBtn = h("button", { type: "submit" }, "Build");
  const state = h("p", { class: "muted", role: "status" });
  const log = h("section", { class: "output", role: "region", "aria-label": "Build log", tabindex: "0" });
  let timer = 0;
  const load = async () => {
    try {
      const res = await json("/v1/templates");
      clear(tbody);
      for (const t of res.templates || []) {
        tbody.append(h("tr", null, h("td", null, t.name || "–"), h("td", null, t.id || "–"), h("td", null, t.public ? "yes" : "no"),
          h("td", null, t.builtIn ? "yes" : "no"), h("td", { class: "wrap" }, t.image || t.source || "–"),
          h("td", null, t.createdAt ? new Date(t.createdAt).toLocaleString() : "–")));
      }
      if (!tbody.firstChild) tbody.append(h("tr", null, h("td", { colspan: "6", class: "muted" }, "No template.")));
    } catch (e) { msg.textContent = e instanceof ApiError ? e.message : String(e); }
  };
  // A build's log, followed from its offset once a second until it ends.
  const follow = async (id: string, offset: number) => {
    try {
      const b = await json("/v1/templates/builds/" + encodeURIComponent(id) + "?logsOffset=" + offset);
      for (const l of b.logs || []) log.append(h("pre", { class: l.level === "error" ? "stderr" : "" }, guarded(l.message)));
      log.scrollTop = log.scrollHeight;
      state.textContent = "Build " + b.buildId + " of " + b.name + ": " + b.status + (b.reason ? " (" + b.reason + ")" : "");
      if (b.status === "ready" || b.status === "error") { buildBtn.disabled = false; load(); return; }
      timer = window.setTimeout(() => follow(id, b.logsNext), 1000);
    } catch (e) {
      buildBtn.disabled = false;
      msg.textContent = e instanceof ApiError ? e.message : String(e);
    }
  };
  const form = h("form", { onsubmit: async (ev: Event) => {
    ev.preventDefault();
    msg.textContent = "";
    clear(log);
    buildBtn.disabled = true;
    try {
      const b = await send("POST", "/v1/templates/builds", { name: name.value.trim(), dockerfile: dockerfile.value });
      follow(b.buildId, 0);
    } catch (e) {
      buildBtn.disabled = false;
      msg.textContent = e instanceof ApiError ? e.message : String(e);
    }
  } },
  h("div", { class: "row" }, h("div", { class: "grow" }, h("label", { for: "bname" }, "Template name"), name)),
  h("label", { for: "bdockerfile" }, "Dockerfile"), dockerfile,
  h("div", { class: "row" }, buildBtn));
  root.append(h("section", { class: "card", "aria-labelledby": "tpl-title" },
    h("h1", { id: "tpl-title" }, "Templates"), msg,
    h("div", { class: "scroll" }, h("table", { "aria-label": "Templates" },
      h("thead", null, h("tr", null, ...["Name", "Id", "Public", "Built in", "Image", "Created"].map((c) => h("th", { scope: "col" }, c)))), tbody))),
    h("section", { class: "card", "aria-labelledby": "build-title" },
      h("h2", { id: "build-title" }, "Build a template"),
      h("p", { class: "muted" }, "A Dockerfile of docs/images.md's subset; its log follows here as it runs."), form, state, log));
  load();
  return () => clearTimeout(timer);
}
