// Small DOM helpers: elements are built with properties and text nodes,
// never from HTML strings, so nothing a sandbox printed becomes markup.

type Attrs = Record<string, string | number | boolean | ((ev: any) => void) | undefined | null>;
type Child = Node | string | number | null | undefined | false | Child[];

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v as EventListener);
    } else if (k === "class") {
      el.className = String(v);
    } else if (k === "value" && "value" in el) {
      (el as any).value = String(v);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
}

export function clear(el: Node): void {
  while (el.firstChild) el.removeChild(el.firstChild);
}

// The guard's marks ([REDACTED:TYPE]) are shown as redactions.
const redaction = /\[REDACTED:[A-Z0-9_]+\]/g;

export function guarded(text: string): Node {
  const frag = document.createDocumentFragment();
  let last = 0;
  for (const m of text.matchAll(redaction)) {
    const i = m.index ?? 0;
    if (i > last) frag.appendChild(document.createTextNode(text.slice(last, i)));
    frag.appendChild(h("mark", { class: "redaction", title: "redacted by the guard" }, m[0]));
    last = i + m[0].length;
  }
  if (last < text.length) frag.appendChild(document.createTextNode(text.slice(last)));
  return frag;
}

export function bytes(n: number | undefined): string {
  if (!n) return "–";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + u[i];
}

export function duration(ms: number): string {
  if (ms < 0) ms = 0;
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + "m " + (s % 60) + "s";
  const hr = Math.floor(m / 60);
  return hr + "h " + (m % 60) + "m";
}

export function announce(el: HTMLElement, text: string): void {
  el.textContent = text;
}
