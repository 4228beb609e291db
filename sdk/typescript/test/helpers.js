// Shared by the suites: the daemon under test is SANDLOT_URL with the key
// SANDLOT_API_KEY (go test ./e2e/sdk starts `sandlot serve` and sets both).
import { randomUUID } from "node:crypto";
import { Sandlot } from "../dist/esm/index.js";

export const url = process.env.SANDLOT_URL;
export const key = process.env.SANDLOT_API_KEY;
if (!url || !key) throw new Error("SANDLOT_URL and SANDLOT_API_KEY must name a running sandlot serve (go test ./e2e/sdk sets them)");

export const client = () => new Sandlot();

// Every conversation a test makes is ended after it (endAll, afterEach),
// so the suites stay under the tenant's context limit.
const made = [];
export const conversation = (prefix = "ts") => {
  const c = `${prefix}-${randomUUID()}`;
  made.push(c);
  return c;
};
export async function endAll() {
  const c = new Sandlot();
  while (made.length) await c.endConversation(made.pop());
}

// An AWS access key id the real guard finds, assembled inside the sandbox
// so that it never travels in a request.
export const awsKeyCode = 'print("AKIA" + "QWERTYUIOPASDFGH")';
export const awsRedacted = "[REDACTED:AWS_ACCESS_KEY]";
