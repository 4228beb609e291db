// The tenant's API keys: list (never a key), create (the key shown once,
// in this page only, until it is left), revoke (press twice).
import { ApiError, json, send } from "./api";
import { clear, h } from "./dom";

export function keysPage(root: HTMLElement, signOut: () => void): () => void {
  const msg = h("p", { class: "error", role: "alert" });
  const tbody = h("tbody");
  const name = h("input", { id: "kname", type: "text", spellcheck: "false", maxlength: "64", placeholder: "ci runner" });
  const made = h("div", { role: "status" });
  const armed = new Map<string, number>();
  let timers: number[] = [];
  const error = (e: unknown) => { msg.textContent = e instanceof ApiError ? e.message : String(e); };
  const when = (t?: string) => (t ? new Date(t).toLocaleString() : "never");
  const load = async () => {
    try {
      const res = await json("/v1/keys");
      clear(tbody);
      for (const k of res.keys || []) {
        const label = (k.name || "unnamed") + " (" + k.prefix + "…)";
        const revoke = h("button", { type: "button", class: "danger", "aria-label": "Revoke " + label }, "Revoke");
        revoke.addEventListener("click", async () => {
          if ((armed.get(k.id) || 0) < Date.now()) {
            armed.set(k.id, Date.now() + 5000);
            revoke.textContent = "Confirm";
            revoke.setAttribute("aria-label", "Confirm: revoke " + label + (k.current ? ", the key of this page" : ""));
            timers.push(window.setTimeout(() => { revoke.textContent = "Revoke"; revoke.setAttribute("aria-label", "Revoke " + label); }, 5000));
            return;
          }
          armed.delete(k.id);
          msg.textContent = "";
          try {
            await json("/v1/keys/" + encodeURIComponent(k.id), { method: "DELETE" });
            if (k.current) { signOut(); return; }
            load();
          } catch (e) { error(e); }
        });
        tbody.append(h("tr", null, h("td", null, k.name || h("span", { class: "muted" }, "unnamed")), h("td", null, k.prefix + "…"),
          h("td", null, when(k.createdAt)), h("td", null, when(k.lastUsedAt)), h("td", null, k.current ? "this page's" : ""),
          h("td", null, revoke)));
      }
    } catch (e) { error(e); }
  };
  const form = h("form", { onsubmit: async (ev: Event) => {
    ev.preventDefault();
    msg.textContent = "";
    clear(made);
    try {
      const k = await send("POST", "/v1/keys", { name: name.value.trim() });
      name.value = "";
      const shown = h("input", { id: "knew", type: "text", readonly: true, spellcheck: "false", value: k.key });
      made.append(h("label", { for: "knew" }, "New API key"), shown,
        h("p", null, "Copy it now: it is not shown again. Its prefix is " + k.prefix + "."));
      shown.focus();
      shown.select();
      load();
    } catch (e) { error(e); }
  } },
  h("div", { class: "row" },
    h("div", { class: "grow" }, h("label", { for: "kname" }, "Key name"), name),
    h("button", { type: "submit" }, "Create key")));
  root.append(h("section", { class: "card", "aria-labelledby": "keys-title" },
    h("h1", { id: "keys-title" }, "API keys"),
    h("p", { class: "muted" }, "This tenant's keys. A key is shown once, when it is made; revoking one ends its access at once. The last key cannot be revoked."),
    msg,
    h("div", { class: "scroll" }, h("table", { "aria-label": "API keys" },
      h("thead", null, h("tr", null, ...["Name", "Prefix", "Created", "Last used", "In use here", "Action"].map((c) => h("th", { scope: "col" }, c)))), tbody)),
    h("h2", null, "Create a key"), form, made));
  load();
  return () => { timers.forEach(clearTimeout); timers = []; };
}
