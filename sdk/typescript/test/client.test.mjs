import { test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import {
  Sandlot, InvalidArgumentError, UnauthenticatedError, NotFoundError, SandlotError,
} from "../dist/esm/index.js";
import { client, conversation, awsKeyCode, awsRedacted, url, endAll } from "./helpers.js";

afterEach(endAll);

const mainText = (r) => r.results.find((x) => x.main)?.text;

test("state is kept across calls of one path", async () => {
  const p = client().path(conversation());
  const a = await p.runCode({ language: "python", code: "x = 41" });
  assert.equal(a.success, true, JSON.stringify(a));
  const b = await p.runCode({ language: "python", code: "x + 1" });
  assert.equal(mainText(b), "42");
  const untyped = await p.callTool("run_code", { language: "python", code: "x * 2" });
  assert.equal(mainText(untyped), "82");
  await assert.rejects(p.callTool("no_such_tool", {}), (e) => e.code === "not_found" && e.status === 404);
  assert.equal(b.sandboxId, a.sandboxId);
  assert.equal(b.conversationId, p.conversationId);
  assert.equal(b.pathId, "main");
});

test("a branch gets a fresh sandbox and the parent keeps its state", async () => {
  const main = client().path(conversation());
  await main.runCode({ language: "python", code: "secret_of_main = 7" });
  const branch = await main.branch("b1");
  const r = await branch.runCode({ language: "python", code: "secret_of_main" });
  assert.equal(r.success, false);
  assert.equal(r.error?.name, "NameError");
  const m = await main.runCode({ language: "python", code: "secret_of_main" });
  assert.equal(mainText(m), "7");
  assert.notEqual(r.sandboxId, m.sandboxId);
});

test("edit keeps the context; merge, delete and archive end it", async () => {
  const c = client();
  const conv = conversation();
  const main = c.path(conv);
  await main.runCode({ language: "python", code: "v = 1" });
  await main.edited();
  assert.equal(mainText(await main.runCode({ language: "python", code: "v" })), "1");
  for (const [name, end] of [["m", (p) => p.merge("main")], ["d", (p) => p.delete()], ["a", (p) => p.archive()]]) {
    const p = await main.branch(name);
    await p.runCode({ language: "python", code: "w = 2" });
    assert.notEqual(await p.activeContext(), null);
    await end(p);
    assert.equal(await p.activeContext(), null, `${name}: the context is still active`);
  }
});

test("streaming yields output before the final result", async () => {
  const p = client().path(conversation());
  const events = [];
  for await (const ev of p.runCodeStream({ language: "python", code: "import time\nfor i in range(3):\n    print('line', i, flush=True)\n    time.sleep(0.3)\n'done'" })) {
    events.push(ev);
  }
  const out = events.filter((e) => e.type === "stdout").map((e) => e.data).join("");
  assert.equal(out, "line 0\nline 1\nline 2\n");
  assert.ok(events.filter((e) => e.type === "stdout").length >= 2, "output came in one piece: " + JSON.stringify(events));
  const final = events.at(-1);
  assert.equal(final.type, "final");
  assert.equal(final.result.success, true);
  assert.equal(final.result.results.find((x) => x.main)?.text, "'done'");
});

test("bash streams and answers its exit code", async () => {
  const p = client().path(conversation());
  const r = await p.bash("echo hi; exit 3");
  assert.equal(r.exitCode, 3);
  assert.equal(r.stdout, "hi\n");
  assert.equal(r.success, false);
  const evs = [];
  for await (const ev of p.bashStream({ command: "echo one; sleep 0.2; echo two" })) evs.push(ev);
  assert.equal(evs.at(-1).type, "final");
  assert.equal(evs.filter((e) => e.type === "stdout").map((e) => e.data).join(""), "one\ntwo\n");
});

test("an aborted call stops the code and the path keeps its state", async () => {
  const p = client().path(conversation());
  await p.runCode({ language: "python", code: "kept = 'yes'" });
  const ac = new AbortController();
  const started = Date.now();
  const stream = p.runCodeStream({ language: "python", code: "import time\nprint('started', flush=True)\ntime.sleep(60)\nprint('not reached')" }, { signal: ac.signal });
  await assert.rejects(async () => {
    for await (const ev of stream) {
      if (ev.type === "stdout" && ev.data.includes("started")) ac.abort();
    }
  }, (e) => e.name === "AbortError");
  assert.ok(Date.now() - started < 50_000, "the abort did not end the call");
  // The kernel was interrupted, not killed: the variables are there.
  const r = await p.runCode({ language: "python", code: "kept" });
  assert.equal(mainText(r), "'yes'");
  // A call aborted before it was sent rejects at once.
  const done = new AbortController();
  done.abort();
  await assert.rejects(p.runCode({ language: "python", code: "1" }, { signal: done.signal }), (e) => e.name === "AbortError");
});

test("files round-trip through the path's sandbox", async () => {
  const p = client().path(conversation());
  const bytes = new Uint8Array(256 * 1024).map((_, i) => (i * 7) % 256);
  const info = await p.uploadFile("data/blob.bin", bytes);
  assert.equal(info.size, bytes.length);
  const back = await p.downloadFile("/home/user/data/blob.bin");
  assert.deepEqual(back, bytes);
  await p.uploadFile("notes.csv", "a,b\n1,2\n");
  const r = await p.runCode({ language: "python", code: "open('notes.csv').read().splitlines()[1]" });
  assert.equal(mainText(r), "'1,2'");
  const list = await p.listFiles("/home/user");
  assert.ok(list.entries.some((e) => e.name === "notes.csv"), JSON.stringify(list));
  const a = await p.runAnalysis({ analysisType: "data_analysis", parameters: { path: "notes.csv" } });
  assert.equal(a.success, true, JSON.stringify(a));
  assert.equal(a.parsedOutput.rowCount, 1);
});

test("guarded output arrives redacted: stdout, streams, files and declared secrets", async () => {
  const p = client().path(conversation());
  const r = await p.runCode({ language: "python", code: awsKeyCode });
  assert.ok(r.stdout.includes(awsRedacted), r.stdout);
  assert.ok(!r.stdout.includes("QWERTYUIOPASDFGH"), r.stdout);
  let streamed = "";
  for await (const ev of p.runCodeStream({ language: "python", code: awsKeyCode })) if (ev.type === "stdout") streamed += ev.data;
  assert.ok(streamed.includes(awsRedacted) && !streamed.includes("QWERTYUIOPASDFGH"), streamed);
  await p.runCode({ language: "python", code: "open('k.txt','w').write('AKIA' + 'QWERTYUIOPASDFGH')" });
  const file = await p.downloadText("k.txt");
  assert.ok(!file.includes("QWERTYUIOPASDFGH"), file);
  const secret = "tok-" + "9f8e7d6c5b4a";
  const s = await p.runCode({ language: "python", code: "import os\nprint(os.environ['API_TOKEN'])" }, { secrets: { API_TOKEN: secret } });
  assert.equal(s.stdout, "[REDACTED:SECRET]\n");
});

test("a limit arrives as a result a model can read", async () => {
  const p = client().path(conversation());
  const r = await p.runCode({ language: "python", code: "import time\ntime.sleep(5)", timeout: 1000 });
  assert.equal(r.success, false);
  assert.equal(r.timedOut, true);
  assert.equal(r.outputType, "error");
  // The daemon under test allows 3 contexts per conversation: a fourth
  // path's call is a result naming the limit, not an HTTP error.
  const c = client();
  const conv = conversation();
  for (const path of ["p1", "p2", "p3"]) {
    const ok = await c.path(conv, path).runCode({ language: "python", code: "1" });
    assert.equal(ok.success, true, JSON.stringify(ok));
  }
  const over = await c.path(conv, "p4").runCode({ language: "python", code: "1" });
  assert.equal(over.success, false);
  assert.equal(over.error?.name, "ContextLimitExceeded");
  assert.match(over.error?.value ?? "", /terminate one or wait/);
  await c.endConversation(conv);
});

test("errors map to their typed classes", async () => {
  const c = client();
  const p = c.path(conversation());
  await assert.rejects(p.runCode(/** @type {any} */ ({ language: "cobol", code: "x" })), (e) => {
    assert.ok(e instanceof InvalidArgumentError, String(e));
    assert.equal(e.code, "invalid_argument");
    assert.equal(e.status, 400);
    assert.match(e.message, /language/);
    return true;
  });
  await assert.rejects(c.context("no-such-context"), NotFoundError);
  const bad = new Sandlot({ apiKey: "e2b_" + "0".repeat(40) });
  await assert.rejects(bad.path(conversation()).runCode({ language: "python", code: "1" }), (e) => e instanceof UnauthenticatedError && e instanceof SandlotError);
});

test("the package's exports resolve by name, ESM and CommonJS, and the CommonJS build works", async () => {
  const require = createRequire(import.meta.url);
  // The package names itself (its exports map), as an application would.
  for (const entry of ["@sandlot/sdk", "@sandlot/sdk/ai", "@sandlot/sdk/openai-agents", "@sandlot/sdk/langchain", "@sandlot/sdk/openai"]) {
    const esm = await import(entry);
    const cjs = require(entry);
    assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).filter((k) => k !== "default").sort(), entry);
  }
  const cjs = require("@sandlot/sdk");
  const v = await new cjs.Sandlot().version();
  assert.equal(typeof v.version, "string");
  assert.ok(new cjs.NotFoundError("not_found", "x") instanceof cjs.SandlotError);
  assert.ok(url);
});
