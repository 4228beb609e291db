// Must not compile: "cobol" is not one of run_code's languages.
import type { paths } from "../src/openapi.js";

type RunCodeBody = paths["/v1/tools/run_code"]["post"]["requestBody"]["content"]["application/json"];
export const body: RunCodeBody = { args: { language: "cobol", code: "1" } };
