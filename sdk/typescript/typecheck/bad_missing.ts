// Must not compile: bash's command is required.
import { Sandlot } from "../src/index.js";

export const r = new Sandlot().path("c").call("bash", { cwd: "/tmp" });
