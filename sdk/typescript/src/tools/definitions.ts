// Framework-neutral tool definitions: the daemon's own tool list (name,
// description, JSON Schema) bound to one conversation path, each with an
// execute that calls the tool there. The framework adapters wrap these.

import type { CallOptions, OpenAITool, Path, ToolName } from "../client.js";

export interface ToolDefinition {
  name: string;
  description: string;
  /** The tool's JSON Schema (draft 2020-12, without $schema), as the daemon enforces it. */
  parameters: Record<string, unknown>;
  /** Runs the tool on the path and returns its result (guarded by the daemon). */
  execute(args: unknown, opts?: { signal?: AbortSignal }): Promise<unknown>;
}

export interface ToolsOptions {
  /** The tools to offer (default: every tool the daemon offers). */
  only?: string[];
  /** Secrets, network and caller request of every call. */
  call?: Omit<CallOptions, "signal">;
}

/** toolDefinitions asks the daemon for its tools and binds them to path. */
export async function toolDefinitions(path: Path, opts: ToolsOptions = {}): Promise<ToolDefinition[]> {
  const list: OpenAITool[] = await path.client.tools({ callerRequest: opts.call?.callerRequest });
  return list
    .filter((t) => !opts.only || opts.only.includes(t.function.name))
    .map((t) => ({
      name: t.function.name,
      description: t.function.description,
      parameters: t.function.parameters,
      execute: (args: unknown, o: { signal?: AbortSignal } = {}) =>
        path.call(t.function.name as ToolName, args as never, { ...opts.call, signal: o.signal }),
    }));
}
