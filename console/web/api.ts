// The /v1 client: every call carries the key in the Authorization header.
// The key lives in sessionStorage (this tab only), never in a URL or a
// cookie, so no other site can make the browser use it.

const KEY = "sandlot.apiKey";

export function key(): string {
  return sessionStorage.getItem(KEY) || "";
}

export function setKey(k: string): void {
  if (k) sessionStorage.setItem(KEY, k);
  else sessionStorage.removeItem(KEY);
}

export class ApiError extends Error {
  constructor(public status: number, public code: string, message: string) {
    super(message);
  }
}

let onUnauthenticated: () => void = () => {};
export function whenSignedOut(fn: () => void): void {
  onUnauthenticated = fn;
}

export async function call(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("Authorization", "Bearer " + key());
  const res = await fetch(path, { ...init, headers, credentials: "omit", cache: "no-store" });
  if (res.status === 401) onUnauthenticated();
  if (!res.ok) {
    let code = "", message = res.status + " " + res.statusText;
    try {
      const body = await res.json();
      code = body.code || "";
      message = body.message || message;
    } catch { /* not JSON */ }
    throw new ApiError(res.status, code, message);
  }
  return res;
}

export async function json<T = any>(path: string, init: RequestInit = {}): Promise<T> {
  const res = await call(path, init);
  if (res.status === 204) return undefined as T;
  return res.json();
}

export function send(method: string, path: string, body: unknown): Promise<any> {
  return json(path, { method, body: JSON.stringify(body), headers: { "Content-Type": "application/json" } });
}

// lines calls fn with each line of a streamed body (NDJSON, SSE).
export async function lines(res: Response, fn: (line: string) => void, signal?: AbortSignal): Promise<void> {
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    if (signal?.aborted) { reader.cancel(); return; }
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      fn(buf.slice(0, i).replace(/\r$/, ""));
      buf = buf.slice(i + 1);
    }
  }
  if (buf) fn(buf);
}

export function pathBase(conv: string, path: string): string {
  return "/v1/conversations/" + encodeURIComponent(conv) + "/paths/" + encodeURIComponent(path);
}
