// OpenAI-style function definitions (Chat Completions' tools, and every
// API that copies them) and a dispatcher for the model's tool calls.

import type { Path } from "../client.js";
import { SandlotError } from "../errors.js";
import { toolDefinitions, type ToolDefinition, type ToolsOptions } from "./definitions.js";

/** A model's tool call, as Chat Completions returns it in message.tool_calls. */
export interface OpenAIToolCall {
  id: string;
  type?: "function";
  function: { name: string; arguments: string };
}

/** The message that answers a tool call. */
export interface OpenAIToolMessage {
  role: "tool";
  tool_call_id: string;
  content: string;
}

export interface OpenAIFunctions {
  /** Pass as the request's tools. */
  tools: { type: "function"; function: { name: string; description: string; parameters: Record<string, unknown> } }[];
  /** Runs one tool call on the path and returns the message to append. */
  handle(call: OpenAIToolCall, opts?: { signal?: AbortSignal }): Promise<OpenAIToolMessage>;
}

/**
 * openAIFunctions binds the daemon's tools to path as OpenAI function
 * definitions. A call that the daemon refuses (bad arguments, an unknown
 * tool) is answered to the model as {error: {code, message}} so it can
 * correct itself; a failure of the code is the tool's own result.
 */
export async function openAIFunctions(path: Path, opts: ToolsOptions = {}): Promise<OpenAIFunctions> {
  const defs = await toolDefinitions(path, opts);
  const byName = new Map<string, ToolDefinition>(defs.map((d) => [d.name, d]));
  return {
    tools: defs.map((d) => ({ type: "function" as const, function: { name: d.name, description: d.description, parameters: d.parameters } })),
    async handle(call, o = {}) {
      return { role: "tool", tool_call_id: call.id, content: JSON.stringify(await runToolCall(byName, call.function.name, call.function.arguments, o.signal)) };
    },
  };
}

/** runToolCall runs a model's call by name with its JSON arguments; refusals become readable results. */
export async function runToolCall(byName: Map<string, ToolDefinition>, name: string, argsJSON: string | unknown, signal?: AbortSignal): Promise<unknown> {
  const def = byName.get(name);
  if (!def) return { error: { code: "not_found", message: `no tool ${name}` } };
  let args: unknown = argsJSON;
  if (typeof argsJSON === "string") {
    try {
      args = argsJSON === "" ? {} : JSON.parse(argsJSON);
    } catch {
      return { error: { code: "invalid_argument", message: "the arguments are not valid JSON" } };
    }
  }
  try {
    return await def.execute(args, { signal });
  } catch (e) {
    if (e instanceof SandlotError && e.status >= 400 && e.status < 500 && e.code !== "unauthenticated") {
      return { error: { code: e.code, message: e.message } };
    }
    throw e;
  }
}
