// Must not compile: run_code has no argument "lang" (the daemon answers 400 for it).
import { Sandlot } from "../src/index.js";

export const r = new Sandlot().path("c").runCode({ lang: "python", code: "1" });
