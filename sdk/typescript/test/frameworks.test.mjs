// Each framework's real package drives the SDK's tools with a scripted
// model: the model's tool call reaches a real sandbox, and the guarded
// result is what the framework hands back to the model.
import { test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Agent, run, Usage, setTracingDisabled } from "@openai/agents";
import { AIMessageChunk, HumanMessage } from "@langchain/core/messages";
import { FakeStreamingChatModel } from "@langchain/core/utils/testing";
import { aiTools } from "../dist/esm/tools/ai.js";
import { agentsTools } from "../dist/esm/tools/openai-agents.js";
import { langchainTools } from "../dist/esm/tools/langchain.js";
import { openAIFunctions } from "../dist/esm/tools/openai.js";
import { client, conversation, awsRedacted, endAll } from "./helpers.js";

afterEach(endAll);

// The model's code: state from an earlier call plus a secret the guard redacts.
const code = 'print(base + 1, "AKIA" + "QWERTYUIOPASDFGH")';
const leaked = "QWERTYUIOPASDFGH";

async function seeded() {
  const p = client().path(conversation("fw"));
  await p.runCode({ language: "python", code: "base = 41" });
  return p;
}

function checkToolOutput(text) {
  assert.ok(text.includes("42"), "the call did not run in the path's sandbox: " + text);
  assert.ok(text.includes(awsRedacted), "the result was not guarded: " + text);
  assert.ok(!text.includes(leaked), "the secret reached the model: " + text);
}

test("Vercel AI SDK: generateText with the mock language model", async () => {
  const p = await seeded();
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
  const model = new MockLanguageModelV3({
    doGenerate: [
      { content: [{ type: "tool-call", toolCallId: "c1", toolName: "run_code", input: JSON.stringify({ language: "python", code }) }], finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [] },
      { content: [{ type: "text", text: "done" }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] },
    ],
  });
  const tools = await aiTools(p, { only: ["run_code", "bash"] });
  assert.deepEqual(Object.keys(tools).sort(), ["bash", "run_code"]);
  const res = await generateText({ model, tools, prompt: "compute", stopWhen: stepCountIs(3) });
  assert.equal(res.text, "done");
  assert.equal(model.doGenerateCalls.length, 2);
  // The tools the model was offered carry the daemon's schema.
  const offered = model.doGenerateCalls[0].tools.find((t) => t.name === "run_code");
  assert.deepEqual(offered.inputSchema.required, ["language", "code"]);
  // What the model got back in its second turn.
  const toolMsg = model.doGenerateCalls[1].prompt.find((m) => m.role === "tool");
  checkToolOutput(JSON.stringify(toolMsg.content));
});

test("OpenAI Agents SDK: an Agent with a scripted model", async () => {
  setTracingDisabled(true);
  const p = await seeded();
  const requests = [];
  const model = {
    async getResponse(request) {
      requests.push(request);
      if (requests.length === 1) {
        return { usage: new Usage(), output: [{ type: "function_call", callId: "call_1", name: "run_code", arguments: JSON.stringify({ language: "python", code }), status: "completed" }] };
      }
      return { usage: new Usage(), output: [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }] };
    },
    async *getStreamedResponse() {
      throw new Error("not scripted");
    },
  };
  const agent = new Agent({ name: "analyst", instructions: "use the sandbox", model, tools: await agentsTools(p, { only: ["run_code"] }) });
  const result = await run(agent, "compute");
  assert.equal(result.finalOutput, "done");
  assert.equal(requests.length, 2);
  assert.ok(requests[0].tools.some((t) => t.name === "run_code"));
  const back = requests[1].input.find((i) => i.type === "function_call_result");
  assert.ok(back, JSON.stringify(requests[1].input));
  checkToolOutput(JSON.stringify(back.output));
});

test("LangChain.js: the fake tool-calling chat model", async () => {
  const p = await seeded();
  const tools = await langchainTools(p, { only: ["run_code"] });
  const seen = [];
  const model = new FakeStreamingChatModel({
    chunks: [new AIMessageChunk({ content: "", tool_calls: [{ id: "call_1", name: "run_code", args: { language: "python", code } }] })],
  }).bindTools(tools);
  const messages = [new HumanMessage("compute")];
  const ai = await model.invoke(messages);
  assert.equal(ai.tool_calls?.length, 1);
  messages.push(ai);
  for (const call of ai.tool_calls) {
    const t = tools.find((x) => x.name === call.name);
    messages.push(await t.invoke({ ...call, type: "tool_call" })); // a ToolCall in, a ToolMessage out
  }
  // The tool's message goes back to the model on its next turn.
  await model.invoke(messages, { callbacks: [{ handleChatModelStart: (_llm, msgs) => seen.push(...msgs.flat()) }] });
  const toolMsg = seen.find((m) => m._getType?.() === "tool" || m.getType?.() === "tool");
  assert.ok(toolMsg, "no tool message reached the model");
  checkToolOutput(String(toolMsg.content));
});

test("OpenAI-style function definitions and the tool-call dispatcher", async () => {
  const p = await seeded();
  const fns = await openAIFunctions(p);
  const names = fns.tools.map((t) => t.function.name);
  for (const n of ["run_code", "run_analysis", "bash", "read_file", "write_file"]) assert.ok(names.includes(n), names.join(","));
  const rc = fns.tools.find((t) => t.function.name === "run_code");
  assert.equal(rc.type, "function");
  assert.equal(rc.function.parameters.$schema, undefined);
  // A Chat Completions assistant message with tool_calls, as a model sends it.
  const msg = await fns.handle({ id: "call_9", type: "function", function: { name: "run_code", arguments: JSON.stringify({ language: "python", code }) } });
  assert.equal(msg.role, "tool");
  assert.equal(msg.tool_call_id, "call_9");
  checkToolOutput(msg.content);
  // A refused call is a readable answer for the model, not a thrown error.
  const bad = JSON.parse((await fns.handle({ id: "c", function: { name: "run_code", arguments: '{"lang":"python"}' } })).content);
  assert.equal(bad.error.code, "invalid_argument");
  assert.match(bad.error.message, /lang/);
});
