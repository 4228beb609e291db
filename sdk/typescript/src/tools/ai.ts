// Tools for the Vercel AI SDK (the `ai` package, a peer dependency of
// this entry point only): pass the result as generateText's or
// streamText's tools.

import { jsonSchema, tool, type Tool } from "ai";
import type { Path } from "../client.js";
import { runToolCall } from "./openai.js";
import { toolDefinitions, type ToolsOptions } from "./definitions.js";

/** aiTools binds the daemon's tools to path as AI SDK tools, keyed by name. */
export async function aiTools(path: Path, opts: ToolsOptions = {}): Promise<Record<string, Tool>> {
  const defs = await toolDefinitions(path, opts);
  const byName = new Map(defs.map((d) => [d.name, d]));
  const out: Record<string, Tool> = {};
  for (const d of defs) {
    out[d.name] = tool({
      description: d.description,
      inputSchema: jsonSchema(d.parameters as Parameters<typeof jsonSchema>[0]),
      execute: (input: unknown, o: { abortSignal?: AbortSignal }) => runToolCall(byName, d.name, input, o.abortSignal),
    }) as Tool;
  }
  return out;
}
