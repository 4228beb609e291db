// @sandlot/sdk: the TypeScript SDK of sandlot, self-hosted sandboxes for AI
// agents. The framework tools are separate entry points
// (@sandlot/sdk/ai, /openai-agents, /langchain, /openai) so that this one
// needs nothing but fetch.

export * from "./client.js";
export * from "./errors.js";
export * from "./ecm.js";
export { SDK_VERSION, compatible } from "./version.js";
export type { components, paths } from "./openapi.js";
