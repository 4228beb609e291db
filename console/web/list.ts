// The contexts page: open a conversation, the key figures, and the live
// table of contexts with filter, extend and terminate.
import { ApiError, json, send } from "./api";
import { bytes, clear, duration, h } from "./dom";
import { contexts, Ctx, liveStatus, now, onChange } from "./live";
import { me } from "./main";
import { usagePanel } from "./usage";

const EXTEND_S = 30 * 60;
const COLS = ["Tenant", "Conversation", "Path", "State", "Template", "Age", "TTL left", "Executions", "Memory", "CPU", "Actions"];

export function contextsPage(root: HTMLElement): () => void {
  const conv = h("input", { id: "conv", type: "text", required: true, spellcheck: "false", autocomplete: "off" });
  const openForm = h("form", { class: "row", onsubmit: (ev: Event) => {
    ev.preventDefault();
    const c = conv.value.trim();
    if (c) location.hash = "#/c/" + encodeURIComponent(c) + "/main";
  } },
  h("div", { class: "grow" }, h("label", { for: "conv" }, "Conversation"), conv),
  h("button", { type: "submit" }, "Open"));

  const filter = h("input", { id: "filter", type: "search", placeholder: "tenant, conversation, state, template…" });
  const live = h("span", { class: "live", role: "status" });
  const msg = h("p", { class: "error", role: "alert" });
  const tbody = h("tbody");
  const count = h("span", { class: "muted" });
  const figures = h("ul", { class: "figures", "aria-label": "Key figures" });
  const table = h("table", { class: "cards", "aria-label": "Contexts", "aria-describedby": "contexts-count" },
    h("thead", null, h("tr", null, ...COLS.map((c) => h("th", { scope: "col" }, c)))),
    tbody);
  const usage = usagePanel();
  root.append(
    h("section", { class: "card", "aria-labelledby": "open-title" }, h("h1", { id: "open-title" }, "Open a conversation"),
      h("p", { class: "muted" }, "Opens the conversation's context on path main, creating it when it has none."), openForm),
    figures,
    h("section", { class: "card", "aria-labelledby": "ctx-title" },
      h("div", { class: "row" }, h("h2", { id: "ctx-title", class: "grow" }, "Contexts ", count), live),
      h("div", { class: "row" }, h("div", { class: "grow" }, h("label", { for: "filter" }, "Filter"), filter)),
      msg,
      h("div", { class: "scroll", tabindex: "0", role: "group", "aria-label": "Contexts table, scrollable" }, table),
      h("p", { id: "contexts-count", class: "muted" }, "Live: contexts appear when created and leave when they end.")),
    usage.el);

  const act = async (what: string, fn: () => Promise<unknown>) => {
    msg.textContent = "";
    try { await fn(); } catch (e) { msg.textContent = what + ": " + (e instanceof ApiError ? e.message : String(e)); }
  };
  // Rows are kept by context and updated in place, so the table's
  // ticking (ages, TTLs) never replaces the button a keyboard user is on.
  const rows = new Map<string, { tr: HTMLTableRowElement; cells: HTMLTableCellElement[] }>();
  const armed = new Map<string, number>(); // Terminate pressed once: until when a second press ends it
  const row = (c: Ctx) => {
    const name = c.conversationId + "/" + c.pathId;
    const own = c.tenantId === me.tenant;
    const cells = COLS.map((label) => h("td", { "data-label": label }));
    cells[1].className = "wrap";
    cells[0].textContent = c.tenantId;
    cells[1].append(own ? h("a", { href: "#/c/" + encodeURIComponent(c.conversationId) + "/" + encodeURIComponent(c.pathId) }, c.conversationId) : c.conversationId);
    cells[2].textContent = c.pathId;
    if (own) {
      const term = h("button", { type: "button", class: "danger", "aria-label": "Terminate " + name }, "Terminate");
      term.addEventListener("click", () => {
        if ((armed.get(c.id) || 0) > Date.now()) {
          armed.delete(c.id);
          act("terminate", () => json("/v1/contexts/" + c.id, { method: "DELETE" }));
          return;
        }
        armed.set(c.id, Date.now() + 5000);
        term.textContent = "Confirm";
        term.setAttribute("aria-label", "Confirm: terminate " + name);
        setTimeout(() => { term.textContent = "Terminate"; term.setAttribute("aria-label", "Terminate " + name); }, 5000);
      });
      cells[10].append(h("button", { type: "button", class: "secondary", "aria-label": "Extend the TTL of " + name,
        onclick: () => act("extend", () => send("PUT", "/v1/contexts/" + c.id + "/ttl", { ttlSeconds: EXTEND_S })) }, "+30 min"), " ", term);
    } else {
      cells[10].append(h("span", { class: "muted" }, "another tenant's"));
    }
    return { tr: h("tr", { "data-id": c.id }, ...cells), cells };
  };
  const update = (r: { cells: HTMLTableCellElement[] }, c: Ctx) => {
    const t = now();
    const u = c.resourceUsage || {};
    const set = (i: number, v: string) => { if (r.cells[i].textContent !== v) r.cells[i].textContent = v; };
    if (r.cells[3].textContent !== c.status) {
      clear(r.cells[3]);
      r.cells[3].append(h("span", { class: "state state-" + c.status }, c.status));
    }
    set(4, c.template || "–");
    set(5, duration(t - Date.parse(c.createdAt)));
    set(6, duration(Date.parse(c.expiresAt) - t));
    set(7, String(c.executionCount));
    set(8, bytes(u.memoryBytes));
    set(9, u.cpuPct ? u.cpuPct.toFixed(1) + "%" : u.cpuTimeMs ? u.cpuTimeMs + " ms" : "–");
  };
  const empty = h("tr", null, h("td", { colspan: "11", class: "muted" }));
  const render = () => {
    const q = filter.value.trim().toLowerCase();
    const shown = [...contexts.values()]
      .filter((c) => !q || [c.tenantId, c.conversationId, c.pathId, c.status, c.template || "", c.id].some((f) => f.toLowerCase().includes(q)))
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
    for (const id of [...rows.keys()]) {
      if (!contexts.has(id)) { rows.get(id)!.tr.remove(); rows.delete(id); }
    }
    const want: HTMLTableRowElement[] = [];
    for (const c of shown) {
      let r = rows.get(c.id);
      if (!r) { r = row(c); rows.set(c.id, r); }
      update(r, c);
      want.push(r.tr);
    }
    if (!want.length) {
      empty.firstChild!.textContent = contexts.size ? "No context matches the filter." : "No active context.";
      want.push(empty);
    }
    const have = [...tbody.children];
    if (have.length !== want.length || have.some((tr, i) => tr !== want[i])) {
      for (const tr of have) if (!want.includes(tr as HTMLTableRowElement)) tr.remove();
      want.forEach((tr, i) => { if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null); });
    }
    count.textContent = "(" + shown.length + (shown.length !== contexts.size ? " of " + contexts.size : "") + ")";
    const s = liveStatus();
    const text = s === "live" ? "Live" : s === "reconnecting" ? "Reconnecting…" : "Connecting…";
    if (live.textContent !== text) live.textContent = text;
    live.classList.toggle("on", s === "live");
  };
  let pending = false;
  const schedule = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; render(); });
  };
  filter.addEventListener("input", schedule);
  // The figures follow the list, at most once a second.
  let figTimer = 0;
  const off = onChange(() => {
    schedule();
    if (!figTimer) figTimer = window.setTimeout(() => { figTimer = 0; loadFigures(figures); usage.load(); }, 1000);
  });
  const tick = setInterval(() => { if (!document.hidden) schedule(); }, 1000);
  render();
  loadFigures(figures);
  usage.load();
  const figTick = setInterval(() => { loadFigures(figures); usage.load(); }, 15000);
  conv.focus();
  return () => { off(); clearInterval(tick); clearInterval(figTick); clearTimeout(figTimer); };
}

async function loadFigures(ul: HTMLElement): Promise<void> {
  try {
    const m = await json("/v1/metrics/sessions");
    clear(ul);
    const fig = (label: string, v: number | string) => h("li", null, h("b", null, String(v)), label);
    ul.append(fig("active contexts", m.active_sessions ?? 0), fig("created", m.total_created ?? 0),
      fig("reused", m.total_reused ?? 0), fig("ended", m.total_terminated ?? 0),
      fig("warm pool", m.pool_size ?? 0), fig("health-check failures", m.health_check_failures ?? 0));
  } catch { /* figures are optional */ }
}
