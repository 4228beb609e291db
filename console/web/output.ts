// Rendering a tool call's streamed events into the Output region:
// stdout, stderr, rich results (images inline as data: URLs, which the
// page's CSP allows for img only), errors, and the guard's redactions.
import { guarded, h } from "./dom";

export class Output {
  private streamEl: HTMLPreElement | null = null;
  private streamKind = "";
  results = 0;
  constructor(public el: HTMLElement) {}

  start(title: string): void {
    this.el.append(h("div", { class: "meta" }, "▶ " + title));
    this.streamEl = null;
    this.results = 0;
    this.scroll();
  }

  text(kind: "stdout" | "stderr", data: string): void {
    if (!this.streamEl || this.streamKind !== kind) {
      this.streamEl = h("pre", { class: kind });
      this.streamKind = kind;
      this.el.append(this.streamEl);
    }
    this.streamEl.append(guarded(data));
    this.scroll();
  }

  result(r: any): void {
    this.streamEl = null;
    this.results++;
    const img = (mime: string, b64: string, alt: string) => h("img", { src: "data:" + mime + ";base64," + b64, alt });
    if (r.png) this.el.append(img("image/png", r.png, "chart or image (PNG) from the code"));
    else if (r.jpeg) this.el.append(img("image/jpeg", r.jpeg, "image (JPEG) from the code"));
    else if (r.svg) this.el.append(img("image/svg+xml", b64utf8(r.svg), "image (SVG) from the code"));
    else if (r.text !== undefined) this.el.append(h("pre", { class: "result" }, guarded(String(r.text))));
    else if (r.json !== undefined) this.el.append(h("pre", { class: "result" }, guarded(JSON.stringify(r.json, null, 2))));
    else if (r.html !== undefined) this.el.append(h("pre", { class: "result" }, guarded(String(r.html))));
    else if (r.markdown !== undefined) this.el.append(h("pre", { class: "result" }, guarded(String(r.markdown))));
    this.scroll();
  }

  error(title: string, detail: string): void {
    this.streamEl = null;
    this.el.append(h("div", { class: "err", role: "alert" }, h("strong", null, title), detail ? ["\n", guarded(detail)] : null));
    this.scroll();
  }

  meta(text: string): void {
    this.streamEl = null;
    this.el.append(h("div", { class: "meta" }, guarded(text)));
    this.scroll();
  }

  private scroll(): void {
    this.el.scrollTop = this.el.scrollHeight;
  }
}

function b64utf8(s: string): string {
  const bytes = new TextEncoder().encode(s);
  let bin = "";
  bytes.forEach((b) => (bin += String.fromCharCode(b)));
  return btoa(bin);
}

// final renders the tool's final result: run_code's error and results
// not streamed already; run_analysis's parsed output.
export function final(out: Output, tool: string, res: any): void {
  if (tool === "run_code") {
    if (!out.results && Array.isArray(res.results)) res.results.forEach((r: any) => out.result(r));
    if (res.error) out.error(res.error.name + ": " + res.error.value, res.error.traceback || "");
    if (res.notice) out.meta(res.notice);
    out.meta((res.success ? "✓ done" : "✗ failed") + " in " + (res.executionTimeMs ?? "?") + " ms" +
      (res.timedOut ? " (timed out)" : "") + (res.contextId ? " · context " + res.contextId : ""));
    return;
  }
  if (res.parsedOutput !== undefined && res.parsedOutput !== null) {
    out.el.append(h("pre", { class: "result" }, guarded(JSON.stringify(res.parsedOutput, null, 2))));
  } else if (res.result !== undefined && res.result !== null) {
    out.el.append(h("pre", { class: "result" }, guarded(typeof res.result === "string" ? res.result : JSON.stringify(res.result, null, 2))));
  }
  if (res.error) out.error(typeof res.error === "string" ? res.error : (res.error.name || "error") + ": " + (res.error.value || res.error.message || ""), res.error.traceback || "");
  out.meta((res.success ? "✓ analysis done" : "✗ analysis failed") + (res.exitCode !== undefined ? " · exit " + res.exitCode : ""));
}
