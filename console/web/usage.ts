// The tenant's usage against its quotas (GET /v1/usage): a table with a
// meter per quota, refreshed with the key figures.
import { json } from "./api";
import { bytes, clear, h } from "./dom";

const LABELS: Record<string, string> = {
  contexts: "Active contexts",
  contextsPerConversation: "Contexts of the busiest conversation",
  volumes: "Volumes",
  volumeBytes: "Volume size",
  snapshots: "Snapshots",
  requestsInFlight: "Requests in flight",
};

export function usagePanel(): { el: HTMLElement; load: () => Promise<void> } {
  const tbody = h("tbody");
  const el = h("section", { class: "card", "aria-labelledby": "usage-title" },
    h("h2", { id: "usage-title" }, "Usage against quotas"),
    h("p", { class: "muted" }, "Of this key's tenant (quotas are per tenant), as this daemon counts them."),
    h("div", { class: "scroll" }, h("table", { "aria-label": "Usage against quotas" },
      h("thead", null, h("tr", null, ...["Quota", "Used", "Limit", "Share of the limit"].map((c) => h("th", { scope: "col" }, c)))), tbody)));
  const load = async () => {
    let u: any;
    try { u = await json("/v1/usage"); } catch { return; } // usage is optional, like the figures
    clear(tbody);
    for (const q of u.quotas || []) {
      const label = LABELS[q.name] || q.name;
      const fmt = (n: number) => (q.name === "volumeBytes" && n ? bytes(n) : String(n));
      const meter = q.limit
        ? h("meter", { min: "0", max: String(q.limit), value: String(q.used), high: String(q.limit * 0.8), optimum: "0",
          "aria-label": label + ": " + q.used + " of " + q.limit })
        : null;
      tbody.append(h("tr", { title: q.description }, h("td", null, label), h("td", null, fmt(q.used)),
        h("td", null, q.limit ? fmt(q.limit) : "none"), h("td", null, meter)));
    }
  };
  return { el, load };
}
