// The audit trail with filters, and the templates.
import { ApiError, json } from "./api";
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
    const rows = events.filter((e) => (!k || e.kind.includes(k)) && (!c || (e.contextId || "").includes(c)) &&
      (!q || JSON.stringify(e.detail || {}).toLowerCase().includes(q)));
    if (!rows.length) tbody.append(h("tr", null, h("td", { colspan: "4", class: "muted" }, "No event matches.")));
    for (const e of rows) {
      tbody.append(h("tr", null, h("td", null, new Date(e.at).toLocaleString()), h("td", null, e.kind), h("td", null, e.contextId || "–"),
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
  root.append(h("section", { class: "card", "aria-labelledby": "tpl-title" },
    h("h1", { id: "tpl-title" }, "Templates"), msg,
    h("div", { class: "scroll" }, h("table", { "aria-label": "Templates" },
      h("thead", null, h("tr", null, ...["Name", "Id", "Public", "Status", "Created"].map((c) => h("th", { scope: "col" }, c)))), tbody))));
  (async () => {
    try {
      const res = await json("/v1/templates");
      for (const t of res.templates || []) {
        tbody.append(h("tr", null, h("td", null, t.name || "–"), h("td", null, t.id || "–"), h("td", null, t.public ? "yes" : "no"),
          h("td", null, t.status || t.state || "–"), h("td", null, t.createdAt ? new Date(t.createdAt).toLocaleString() : "–")));
      }
      if (!tbody.firstChild) tbody.append(h("tr", null, h("td", { colspan: "5", class: "muted" }, "No template.")));
    } catch (e) { msg.textContent = e instanceof ApiError ? e.message : String(e); }
  })();
  return () => {};
}
