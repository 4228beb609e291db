// Compiles: the arguments match the tools' schemas (go test ./e2e/sdk runs tsc --noEmit on it).
import type { paths } from "../src/openapi.js";
import { Sandlot } from "../src/index.js";

type RunCodeBody = paths["/v1/tools/run_code"]["post"]["requestBody"]["content"]["application/json"];
export const body: RunCodeBody = { conversationId: "c", args: { language: "python", code: "1 + 1", timeout: 5000 } };

export async function calls(c: Sandlot) {
  const p = c.path("c");
  const r = await p.runCode({ language: "javascript", code: "1", env: { A: "b" } });
  const n: number = r.exitCode;
  await p.call("bash", { command: "ls", cwd: "/tmp" });
  await p.call("read_file", { path: "a.txt", offset: 1 });
  await p.runAnalysis({ analysisType: "tax_calculation", parameters: { income: 1 } });
  return n;
}
