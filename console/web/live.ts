// The live list: GET /v1/contexts/events read with fetch (an EventSource
// cannot send the Authorization header), parsed as server-sent events,
// reconnecting with a backoff.
import { call, lines } from "./api";
import type { Net } from "./network";

export interface Ctx {
  id: string; tenantId: string; userId?: string; conversationId: string; pathId: string;
  status: string; terminationReason?: string; template?: string; createdAt: string; lastUsedAt: string;
  expiresAt: string; executionCount: number; resourceUsage: { memoryBytes?: number; cpuPct?: number; cpuTimeMs?: number };
  network?: Net;
}

export const contexts = new Map<string, Ctx>();
let skew = 0; // server time minus ours, ms
const listeners = new Set<() => void>();
let status = "connecting";
let ctrl: AbortController | null = null;

export function now(): number { return Date.now() + skew; }
export function liveStatus(): string { return status; }
export function onChange(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}
function changed(): void { listeners.forEach((fn) => fn()); }

function serverTime(t: string): void {
  const s = Date.parse(t);
  if (!isNaN(s)) skew = s - Date.now();
}

function apply(event: string, data: string): void {
  const v = JSON.parse(data);
  if (event === "snapshot") {
    contexts.clear();
    for (const c of v.contexts as Ctx[]) contexts.set(c.id, c);
    serverTime(v.serverTime);
  } else if (event === "context") {
    const c = v.context as Ctx;
    serverTime(v.serverTime);
    if (c.status === "creating" || c.status === "ready") contexts.set(c.id, c);
    else contexts.delete(c.id);
  }
  changed();
}

export function start(): void {
  stop();
  const ac = new AbortController();
  ctrl = ac;
  let delay = 500;
  const run = async () => {
    while (!ac.signal.aborted) {
      try {
        const res = await call("/v1/contexts/events", { signal: ac.signal, headers: { Accept: "text/event-stream" } });
        status = "live";
        delay = 500;
        changed();
        let event = "", data = "";
        await lines(res, (line) => {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trimStart();
          else if (line === "") {
            if (event && data) apply(event, data);
            event = ""; data = "";
          }
        }, ac.signal);
      } catch (e) {
        if (ac.signal.aborted) return;
      }
      status = "reconnecting";
      changed();
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  };
  run();
}

export function stop(): void {
  ctrl?.abort();
  ctrl = null;
  contexts.clear();
  status = "connecting";
}
