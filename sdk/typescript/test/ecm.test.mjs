// Specification 001's ExecutionContextManager, as an outside test uses it:
// constructed with no options (SANDLOT_URL, SANDLOT_API_KEY), identities
// {conversationId, pathId}, the tenant the key's.
import { test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { ExecutionContextManager, PermissionDeniedError, Sandlot } from "../dist/esm/index.js";
import { conversation, awsKeyCode, awsRedacted, endAll } from "./helpers.js";

afterEach(endAll);

test("ExecutionContextManager: lazy creation, reuse, results, termination", async () => {
  const m = new ExecutionContextManager();
  const id = { conversationId: conversation("ecm"), pathId: "main" };
  assert.equal(await m.hasActiveContext(id), false);
  const a = await m.executeCode(id, "x = 20\nprint(x * 2)", "python");
  assert.deepEqual(
    { success: a.success, output: a.output, outputType: a.outputType },
    { success: true, output: "40\n", outputType: "text" },
  );
  assert.equal(typeof a.executionTimeMs, "number");
  assert.equal(await m.hasActiveContext(id), true);
  const ctx = await m.getOrCreateContext(id);
  assert.equal(ctx.status, "active");
  assert.ok(ctx.sandboxId);
  assert.ok(ctx.expiresAt > ctx.createdAt);
  assert.ok(ctx.executionCount >= 1);
  const b = await m.executeCode(id, "console.log(JSON.stringify({n: 1}))", "javascript");
  assert.equal(b.success, true);
  assert.equal(b.outputType, "json");
  const again = await m.executeCode(id, "x", "python");
  assert.equal(again.output, "20");
  const err = await m.executeCode(id, "1/0", "python");
  assert.equal(err.success, false);
  assert.equal(err.outputType, "error");
  assert.match(err.error, /ZeroDivisionError/);
  const red = await m.executeCode(id, awsKeyCode, "python");
  assert.ok(red.output.includes(awsRedacted), red.output);
  await m.terminateContext(id);
  assert.equal(await m.hasActiveContext(id), false);
  await m.terminateContext(id); // nothing to terminate: no error
});

test("ExecutionContextManager: getOrCreateContext creates without running code; branches are separate", async () => {
  const m = new ExecutionContextManager();
  const conv = conversation("ecm");
  const main = await m.getOrCreateContext({ conversationId: conv, pathId: "main" });
  assert.equal(main.status, "active");
  assert.equal(main.executionCount, 0);
  const same = await m.getOrCreateContext({ conversationId: conv, pathId: "main" });
  assert.equal(same.sandboxId, main.sandboxId);
  const branch = await m.getOrCreateContext({ conversationId: conv, pathId: "b" });
  assert.notEqual(branch.sandboxId, main.sandboxId);
  await m.terminateContext({ conversationId: conv, pathId: "main" });
  await m.terminateContext({ conversationId: conv, pathId: "b" });
});

test("ExecutionContextManager: a tenantId other than the key's is refused", async () => {
  const m = new ExecutionContextManager();
  const me = await new Sandlot().whoami();
  const conv = conversation("ecm");
  for (const tenantId of [me.id, me.name]) {
    const r = await m.executeCode({ tenantId, conversationId: conv, pathId: "main" }, "1 + 1", "python");
    assert.equal(r.output, "2");
  }
  await assert.rejects(m.executeCode({ tenantId: "someone-else", conversationId: conv, pathId: "main" }, "1", "python"), PermissionDeniedError);
  await assert.rejects(m.hasActiveContext({ tenantId: "someone-else", conversationId: conv, pathId: "main" }), PermissionDeniedError);
  await m.terminateContext({ conversationId: conv, pathId: "main" });
});
