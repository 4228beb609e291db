// A desktop sandbox's live view, embedded: the desktop_live_view tool's
// URL (noVNC on the ports domain, https://6080-<id>.<domain>) in a frame,
// view-only or interactive. The frame's origin is never the console's, so
// the page a sandbox serves cannot read this tab's key; the CSP's
// frame-src allows the ports domain's https names only (docs/console.md).
import { ApiError, json } from "./api";
import { clear, h } from "./dom";

export function desktopSection(conv: string, path: string): { el: HTMLElement; show: (template: string | undefined) => void } {
  const box = h("div");
  const msg = h("p", { class: "error", role: "alert" });
  const watch = h("button", { type: "button", class: "secondary" }, "Watch the desktop");
  const control = h("button", { type: "button", class: "secondary" }, "Control the desktop");
  const close = h("button", { type: "button", class: "secondary", hidden: true }, "Close the live view");
  const session = path.startsWith("desktop:");
  const el = h("section", { class: "card", "aria-labelledby": "desk-title", hidden: true },
    h("h2", { id: "desk-title" }, "Desktop"),
    session
      ? h("p", { class: "muted" }, "The live view is a video of the screen: the guard cannot redact pixels. Watching sends no input; controlling passes the mouse and keyboard to the desktop.")
      : h("p", { class: "muted" }, "This desktop was made through the E2B SDK: its live view is the SDK's stream (sandbox.stream). The desktop tools' sessions (paths desktop:…) are viewed here."),
    session ? h("div", { class: "row" }, watch, control, close) : null, msg, box);
  const open = async (viewOnly: boolean) => {
    msg.textContent = "";
    watch.disabled = control.disabled = true;
    try {
      const res = await json("/v1/tools/desktop_live_view", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ conversationId: conv, pathId: path, args: { viewOnly } }) });
      const url = new URL(res.url ?? "");
      if (url.protocol !== "https:") throw new Error("the live view is not served over https: " + url.origin);
      clear(box);
      box.append(h("iframe", { src: url.href, title: "Desktop live view", class: "liveview", referrerpolicy: "no-referrer",
        sandbox: "allow-scripts allow-same-origin", allow: "" }),
      h("p", { class: "muted" }, (viewOnly ? "Watching" : "Controlling") + " through " + url.origin + "."));
      close.hidden = false;
    } catch (e) {
      msg.textContent = e instanceof ApiError ? e.message : String(e);
    } finally {
      watch.disabled = control.disabled = false;
    }
  };
  watch.addEventListener("click", () => open(true));
  control.addEventListener("click", () => open(false));
  close.addEventListener("click", () => { clear(box); close.hidden = true; });
  const show = (template: string | undefined) => { el.hidden = template !== "desktop"; };
  return { el, show };
}
