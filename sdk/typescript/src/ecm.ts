// Specification 001's ExecutionContextManager over the daemon: an
// application written against that interface switches to sandlot by
// constructing this one. The daemon keeps the records, the sandboxes, the
// TTL, the rotation and the guard, so the manager holds no state of its own.

import { Sandlot, type ClientOptions, type Context, type RunCodeResult } from "./client.js";
import { InvalidArgumentError, PermissionDeniedError, SandlotError } from "./errors.js";

/** The identity of an execution context. The tenant is the API key's: a tenantId, when given, must be it. */
export interface ExecutionContextIdentity {
  tenantId?: string;
  conversationId: string;
  pathId: string;
  /** The end user behind the tenant's key (sandlot's addition; part of the key). */
  userId?: string;
}

export type ExecutionContextStatus = "active" | "expired" | "error" | "terminated";

/** 001 §2.2's ExecutionContext, from the daemon's record. */
export interface ExecutionContext {
  sandboxId: string;
  /** sandlot has no MCP gateway per sandbox: the daemon's /mcp serves every context. */
  mcpUrl: string;
  /** Never a credential: the daemon authenticates with the tenant's key. */
  mcpToken: string;
  createdAt: Date;
  lastUsedAt: Date;
  expiresAt: Date;
  executionCount: number;
  totalExecutionTimeMs: number;
  status: ExecutionContextStatus;
  lastError?: string | null;
  /** The daemon's context id. */
  id: string;
}

/** 001 §5.1's ExecutionResult. */
export interface ExecutionResult {
  success: boolean;
  output?: string;
  error?: string;
  executionTimeMs: number;
  outputType: "text" | "json" | "table" | "error";
  truncated?: boolean;
}

export interface ExecutionContextManagerOptions extends ClientOptions {
  /** The client to use instead of one made from the options. */
  client?: Sandlot;
}

/** ExecutionContextManager is 001's interface, implemented over sandlot's /v1 API. */
export class ExecutionContextManager {
  readonly client: Sandlot;
  private tenant?: Promise<{ id: string; name: string }>;

  /** With no options it reads SANDLOT_URL and SANDLOT_API_KEY. */
  constructor(opts: ExecutionContextManagerOptions = {}) {
    this.client = opts.client ?? new Sandlot(opts);
  }

  /** Gets the path's active context or creates it (a sandbox is started). */
  async getOrCreateContext(identity: ExecutionContextIdentity): Promise<ExecutionContext> {
    await this.checkIdentity(identity);
    const path = this.path(identity);
    const existing = await path.activeContext();
    if (existing) return toContext(existing, this.client.url);
    // A context is made by its first use: listing its home creates it
    // without running code (no execution is counted).
    await path.listFiles("/home/user");
    const made = await path.activeContext();
    if (!made) throw new SandlotError("unavailable", "the context ended as soon as it was created; try again", 0);
    return toContext(made, this.client.url);
  }

  /** Runs code in the path's sandbox; a failure of the code is a result with success false. */
  async executeCode(identity: ExecutionContextIdentity, code: string, language: "javascript" | "python" | "typescript" | "bash" | "sh" | "r" | "java"): Promise<ExecutionResult> {
    await this.checkIdentity(identity);
    const res = await this.path(identity).runCode({ language, code });
    return toResult(res);
  }

  /** Terminates the path's context (reason manual); nothing happens when it has none. */
  async terminateContext(identity: ExecutionContextIdentity): Promise<void> {
    await this.checkIdentity(identity);
    const ctx = await this.path(identity).activeContext();
    if (!ctx) return;
    try {
      await this.client.terminate(ctx.id ?? "");
    } catch (e) {
      if (!(e instanceof SandlotError && e.code === "not_found")) throw e;
    }
  }

  /** Whether the path has an active context. */
  async hasActiveContext(identity: ExecutionContextIdentity): Promise<boolean> {
    await this.checkIdentity(identity);
    return (await this.path(identity).activeContext()) !== null;
  }

  /** The daemon ends idle contexts itself (its TTL); nothing is left for a caller to clean. */
  async cleanupExpiredContexts(): Promise<number> {
    return 0;
  }

  private path(identity: ExecutionContextIdentity) {
    return this.client.path(identity.conversationId, identity.pathId || "main", { userId: identity.userId });
  }

  /**
   * checkIdentity refuses an identity without a conversation, and one
   * whose tenantId is not the key's tenant: the key decides the tenant,
   * and a mismatch is a mistake a caller must hear of rather than have
   * its call run in another tenant's name.
   */
  private async checkIdentity(identity: ExecutionContextIdentity): Promise<void> {
    if (!identity || !identity.conversationId) throw new InvalidArgumentError("invalid_argument", "identity.conversationId is required", 0);
    if (identity.tenantId === undefined || identity.tenantId === "") return;
    const tenant = await this.keyTenant();
    if (identity.tenantId !== tenant.id && identity.tenantId !== tenant.name) {
      throw new PermissionDeniedError("permission_denied",
        `identity.tenantId ${JSON.stringify(identity.tenantId)} is not the tenant of the API key; the key decides the tenant (omit tenantId)`, 0);
    }
  }

  /** The key's tenant (GET /v1/tenant), asked once. */
  private keyTenant(): Promise<{ id: string; name: string }> {
    if (!this.tenant) {
      this.tenant = this.client.whoami();
      this.tenant.catch(() => { this.tenant = undefined; });
    }
    return this.tenant;
  }
}

function toContext(c: Context, url: string): ExecutionContext {
  const status: ExecutionContextStatus = c.status === "creating" || c.status === "ready" ? "active"
    : c.status === "error" ? "error" : c.terminationReason === "expired" ? "expired" : "terminated";
  return {
    id: c.id ?? "",
    sandboxId: c.sandboxId ?? "",
    mcpUrl: `${url}/mcp`,
    mcpToken: "",
    createdAt: new Date(c.createdAt ?? 0),
    lastUsedAt: new Date(c.lastUsedAt ?? 0),
    expiresAt: new Date(c.expiresAt ?? 0),
    executionCount: c.executionCount ?? 0,
    totalExecutionTimeMs: c.totalExecutionTimeMs ?? 0,
    status,
    lastError: c.lastError ?? null,
  };
}

/** toResult maps run_code's result to 001's ExecutionResult. */
export function toResult(r: RunCodeResult): ExecutionResult {
  const main = r.results?.find((x) => x.main)?.text;
  let output = r.stdout;
  if (main !== undefined && main !== "") output = output ? `${output}${output.endsWith("\n") ? "" : "\n"}${main}` : main;
  if (r.success) {
    return { success: true, output, executionTimeMs: r.executionTimeMs, outputType: r.outputType as ExecutionResult["outputType"], truncated: r.truncated };
  }
  const err = r.error ? `${r.error.name}: ${r.error.value}` : r.stderr || `exit code ${r.exitCode}`;
  return { success: false, output: output || undefined, error: err, executionTimeMs: r.executionTimeMs, outputType: "error", truncated: r.truncated };
}
