// Tools for the OpenAI Agents SDK (`@openai/agents`, a peer dependency of
// this entry point only): pass them as an Agent's tools.

import { tool, type FunctionTool } from "@openai/agents";
import type { Path } from "../client.js";
import { runToolCall } from "./openai.js";
import { toolDefinitions, type ToolsOptions } from "./definitions.js";

/**
 * agentsTools binds the daemon's tools to path as Agents SDK function
 * tools. They are not strict: the schemas have optional arguments, which
 * OpenAI's strict mode cannot express; the daemon validates every call.
 */
export async function agentsTools(path: Path, opts: ToolsOptions = {}): Promise<FunctionTool[]> {
  const defs = await toolDefinitions(path, opts);
  const byName = new Map(defs.map((d) => [d.name, d]));
  return defs.map((d) =>
    tool({
      name: d.name,
      description: d.description,
      parameters: d.parameters as never,
      strict: false,
      execute: async (input: unknown) => JSON.stringify(await runToolCall(byName, d.name, input)),
    }) as unknown as FunctionTool,
  );
}
