// Retries and the version check against a scripted local HTTP server:
// what the real daemon answers only under load or across releases.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { Sandlot, UnavailableError, InternalError, ResourceExhaustedError, VersionMismatchError, compatible } from "../dist/esm/index.js";

async function scripted(answers, version = "devel") {
  const seen = [];
  const srv = createServer((req, res) => {
    if (req.url === "/v1/version") {
      res.setHeader("Content-Type", "application/json");
      res.end(JSON.stringify({ version, schemaVersion: 1 }));
      return;
    }
    seen.push(req.url);
    const [status, body, headers = {}] = answers[Math.min(seen.length - 1, answers.length - 1)];
    res.writeHead(status, { "Content-Type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${srv.address().port}`;
  return { url, seen, close: () => new Promise((r) => srv.close(r)) };
}

const ok = [200, { success: true, stdout: "", stderr: "", results: [], exitCode: 0 }];
const busy = [503, { code: "unavailable", message: "The server cannot do this right now" }];
const tooMany = [429, { code: "resource_exhausted", message: "too many requests" }, { "Retry-After": "0" }];

test("503 and 429 are retried with backoff", async () => {
  const s = await scripted([busy, tooMany, ok]);
  try {
    const c = new Sandlot({ url: s.url, apiKey: "k", backoffMs: 5 });
    const r = await c.path("c").runCode({ language: "python", code: "1" });
    assert.equal(r.success, true);
    assert.equal(s.seen.length, 3);
  } finally {
    await s.close();
  }
});

test("retries end after maxRetries with the typed error", async () => {
  const s = await scripted([busy]);
  try {
    const c = new Sandlot({ url: s.url, apiKey: "k", backoffMs: 1, maxRetries: 2 });
    await assert.rejects(c.path("c").runCode({ language: "python", code: "1" }), UnavailableError);
    assert.equal(s.seen.length, 3);
  } finally {
    await s.close();
  }
});

test("nothing but 503 and 429 is retried", async () => {
  for (const answer of [[500, { code: "internal", message: "boom", requestId: "r1" }], [504, { code: "deadline_exceeded", message: "late" }], [400, { code: "invalid_argument", message: "bad" }]]) {
    const s = await scripted([answer, ok]);
    try {
      const c = new Sandlot({ url: s.url, apiKey: "k", backoffMs: 1 });
      await assert.rejects(c.path("c").runCode({ language: "python", code: "1" }), (e) => e.status === answer[0]);
      assert.equal(s.seen.length, 1, `${answer[0]} was retried`);
    } finally {
      await s.close();
    }
  }
});

test("a 429 keeps its Retry-After and category", async () => {
  const s = await scripted([[429, { code: "resource_exhausted", message: "slow down" }, { "Retry-After": "7" }]]);
  try {
    const c = new Sandlot({ url: s.url, apiKey: "k", maxRetries: 0 });
    await assert.rejects(c.path("c").runCode({ language: "python", code: "1" }), (e) => e instanceof ResourceExhaustedError && e.retryAfter === 7);
  } finally {
    await s.close();
  }
});

test("a daemon of another release is refused before the first call", async () => {
  const s = await scripted([ok], "v9.4.0");
  try {
    const c = new Sandlot({ url: s.url, apiKey: "k" });
    await assert.rejects(c.path("c").runCode({ language: "python", code: "1" }), VersionMismatchError);
    assert.equal(s.seen.length, 0, "the call was sent to a daemon of another release");
  } finally {
    await s.close();
  }
  assert.equal(compatible("v0.1.7", "0.1.0"), true);
  assert.equal(compatible("v0.2.0", "0.1.0"), false);
  assert.equal(compatible("devel", "0.1.0"), true);
  assert.equal(compatible("v0.1.0-12-gabcdef1", "0.1.0"), true);
});

test("an answer without a JSON body still maps by status", async () => {
  const srv = createServer((req, res) => {
    if (req.url === "/v1/version") return res.end(JSON.stringify({ version: "devel", schemaVersion: 1 }));
    res.writeHead(502);
    res.end("bad gateway");
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  try {
    const c = new Sandlot({ url: `http://127.0.0.1:${srv.address().port}`, apiKey: "k", maxRetries: 0 });
    await assert.rejects(c.version().then(() => c.path("c").runCode({ language: "python", code: "1" })), (e) => e instanceof UnavailableError || e instanceof InternalError);
  } finally {
    await new Promise((r) => srv.close(r));
  }
});
