// A context's network policy (the context wire's network): mode, the
// allow and deny rules with their ports, the headers the proxy sets (by
// name: no route returns a value), who reaches its ports, the secrets it
// may use. Its connections are in the context's audit trail beside.
import { clear, h } from "./dom";

export interface Net {
  mode: string; allow?: string[]; deny?: string[]; headers?: { host: string; names: string[] }[];
  ingress?: { public?: boolean; maskRequestHost?: string }; secrets?: string[];
}

const MODES: Record<string, string> = {
  none: "none: no egress",
  allowlist: "allowlist: only the allowed destinations",
  open: "open: every public destination but the denied",
};

export function networkSection(): { el: HTMLElement; show: (n: Net | null | undefined, known: boolean) => void } {
  const tbody = h("tbody");
  const el = h("section", { class: "card", "aria-labelledby": "net-title" },
    h("h2", { id: "net-title" }, "Network policy"),
    h("table", { "aria-label": "Network policy" }, tbody),
    h("p", { class: "muted" }, "Rules read host[:ports]; deny wins over allow. Its connections and DNS questions are in the audit trail above."));
  let last = "";
  const show = (n: Net | null | undefined, known: boolean) => {
    const sig = known ? JSON.stringify(n || null) : "?";
    if (sig === last) return;
    last = sig;
    clear(tbody);
    const row = (k: string, v: string | Node) => tbody.append(h("tr", null, h("th", { scope: "row" }, k), h("td", { class: "wrap" }, v)));
    if (!known) { row("Mode", "…"); return; }
    if (!n) {
      row("Mode", "no network: loopback only");
      return;
    }
    const list = (xs?: string[]) => (xs && xs.length ? xs.join(", ") : "–");
    row("Mode", MODES[n.mode] || n.mode);
    row("Allow", list(n.allow));
    row("Deny", list(n.deny));
    row("Headers set", n.headers?.length ? n.headers.map((r) => r.host + ": " + r.names.join(", ")).join("; ") : "–");
    row("Ports", n.ingress?.public ? "public: anyone with the URL" : "with the traffic token or the tenant's key");
    if (n.ingress?.maskRequestHost) row("Host sent to ports", n.ingress.maskRequestHost);
    row("Secrets", list(n.secrets));
  };
  return { el, show };
}
