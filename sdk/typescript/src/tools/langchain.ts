// Tools for LangChain.js (`@langchain/core`, a peer dependency of this
// entry point only): bind them to a chat model (bindTools) or an agent.

import { tool, type StructuredToolInterface } from "@langchain/core/tools";
import type { Path } from "../client.js";
import { runToolCall } from "./openai.js";
import { toolDefinitions, type ToolsOptions } from "./definitions.js";

/** langchainTools binds the daemon's tools to path as LangChain tools; each returns its result as JSON text. */
export async function langchainTools(path: Path, opts: ToolsOptions = {}): Promise<StructuredToolInterface[]> {
  const defs = await toolDefinitions(path, opts);
  const byName = new Map(defs.map((d) => [d.name, d]));
  return defs.map((d) =>
    tool(async (input: unknown, config?: { signal?: AbortSignal }) => JSON.stringify(await runToolCall(byName, d.name, input, config?.signal)), {
      name: d.name,
      description: d.description,
      schema: d.parameters as never,
    }) as unknown as StructuredToolInterface,
  );
}
