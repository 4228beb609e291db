// A context's page: its state, the editor with Run Code and Run Analysis
// (run directly, as forced tool calls), the streamed output, the calls
// made from this page and the context's audit trail, its files and a
// terminal (loaded when first opened).
import { ApiError, call, json, key, lines, pathBase } from "./api";
import { clear, duration, guarded, h } from "./dom";
import { filesSection } from "./files";
import { contexts, Ctx, now, onChange } from "./live";
import { desktopSection } from "./desktop";
import { networkSection } from "./network";
import { final, Output } from "./output";

const LANGS = ["python", "javascript", "typescript", "bash", "sh", "r", "java"];
const ANALYSES = ["custom", "data_analysis", "tax_calculation", "compliance_check"];

export function contextPage(root: HTMLElement, conv: string, path: string): () => void {
  const base = pathBase(conv, path);
  const status = h("p", { class: "muted", role: "status" }, "Opening…");
  const lang = h("select", { id: "lang" }, ...LANGS.map((l) => h("option", { value: l }, l)));
  const code = h("textarea", { id: "code", rows: "12", spellcheck: "false", autocapitalize: "off" });
  code.value = 'print("hello from sandlot")';
  const atype = h("select", { id: "atype" }, ...ANALYSES.map((a) => h("option", { value: a }, a)));
  const aformat = h("select", { id: "aformat" }, ...["json", "text", "csv"].map((f) => h("option", { value: f }, f)));
  const params = h("textarea", { id: "params", rows: "4", spellcheck: "false" });
  params.value = "{}";
  const runCode = h("button", { type: "button" }, "Run Code");
  const runAnalysis = h("button", { type: "button", class: "secondary" }, "Run Analysis");
  const clearBtn = h("button", { type: "button", class: "secondary" }, "Clear output");
  const outEl = h("section", { id: "output", class: "output", role: "region", "aria-label": "Output", "aria-live": "polite", tabindex: "0" });
  const out = new Output(outEl);
  const calls = h("tbody");
  const auditBody = h("tbody");
  const termBox = h("div");
  const termBtn = h("button", { type: "button", class: "secondary" }, "Open terminal");
  const files = filesSection(base);
  const net = networkSection();
  const desk = desktopSection(conv, path);

  root.append(
    h("p", null, h("a", { href: "#/" }, "← Contexts")),
    h("h1", null, "Conversation ", h("code", null, conv), " · path ", h("code", null, path)),
    status,
    desk.el,
    h("div", { class: "grid" },
      h("div", { class: "card" },
        h("h2", null, "Editor"),
        h("div", { class: "row" }, h("div", null, h("label", { for: "lang" }, "Language"), lang)),
        h("label", { for: "code" }, "Code"), code,
        h("fieldset", null, h("legend", null, "Run Analysis parameters"),
          h("div", { class: "row" },
            h("div", null, h("label", { for: "atype" }, "Analysis type"), atype),
            h("div", null, h("label", { for: "aformat" }, "Output format"), aformat)),
          h("label", { for: "params" }, "Parameters (JSON)"), params,
          h("p", { class: "muted" }, "custom runs the code above with these parameters as params; the others run their built-in program.")),
        h("div", { class: "row" }, runCode, runAnalysis, clearBtn),
        h("p", { class: "muted" }, "Ctrl+Enter runs the code.")),
      h("div", { class: "card" },
        h("h2", { "aria-hidden": "true" }, "Output"), outEl)),
    h("section", { class: "card", "aria-labelledby": "calls-title" },
      h("h2", { id: "calls-title" }, "Calls on this path (audit trail)"),
      h("div", { class: "scroll" }, h("table", { "aria-label": "Calls" },
        h("thead", null, h("tr", null, ...["Time", "Tool", "Called", "Result", "Duration"].map((c) => h("th", { scope: "col" }, c)))), calls)),
      h("h2", null, "Audit trail of this context"),
      h("div", { class: "scroll" }, h("table", { "aria-label": "Audit trail of this context" },
        h("thead", null, h("tr", null, ...["Time", "Kind", "Detail"].map((c) => h("th", { scope: "col" }, c)))), auditBody))),
    net.el,
    files.el,
    h("section", { class: "card", "aria-labelledby": "term-title" },
      h("h2", { id: "term-title" }, "Terminal"), termBtn, termBox));

  let ctxId = "";
  const showState = () => {
    const c: Ctx | undefined = [...contexts.values()].find((c) => c.conversationId === conv && c.pathId === path && (!ctxId || c.id === ctxId));
    if (c) {
      ctxId = c.id;
      status.textContent = "Context " + c.id + " · " + c.status + " · template " + (c.template || "–") + " · " +
        c.executionCount + " executions · TTL left " + duration(Date.parse(c.expiresAt) - now());
      net.show(c.network, true);
      desk.show(c.template);
    } else if (ctxId) {
      status.textContent = "Context " + ctxId + " has ended; the next call starts a new one.";
      ctxId = "";
    }
  };
  net.show(undefined, false);
  const off = onChange(showState);
  const tick = setInterval(showState, 1000);

  // The context's calls (tool.call events of this path, whoever made
  // them: the page, an agent, MCP) and its other audit events.
  const loadAudit = async () => {
    try {
      const res = await json("/v1/audit?limit=1000");
      const evs = res.events || [];
      clear(calls);
      const mine = evs.filter((e: any) => e.kind === "tool.call" && e.detail?.conversation === conv && e.detail?.path === path);
      if (!mine.length) calls.append(h("tr", null, h("td", { colspan: "5", class: "muted" }, "No call on this path yet.")));
      for (const e of mine) {
        const d = e.detail || {};
        calls.append(h("tr", null, h("td", null, new Date(e.at).toLocaleTimeString()), h("td", null, d.tool || "–"),
          h("td", null, d.forced === "true" ? "direct (forceTool)" : "model"), h("td", null, d.code ? "error: " + d.code : "ok"),
          h("td", null, (d.durationMs ?? "?") + " ms")));
      }
      clear(auditBody);
      const others = ctxId ? evs.filter((e: any) => e.kind !== "tool.call" && (e.contextId === ctxId || e.detail?.context === ctxId)) : [];
      if (!others.length) auditBody.append(h("tr", null, h("td", { colspan: "3", class: "muted" }, "No other audit event for this context yet.")));
      for (const e of others) {
        auditBody.append(h("tr", null, h("td", null, new Date(e.at).toLocaleTimeString()), h("td", null, e.kind),
          h("td", { class: "wrap" }, guarded(Object.entries(e.detail || {}).map(([k, v]) => k + "=" + v).join(" ")))));
      }
    } catch { /* an audit-less store */ }
  };

  const run = async (tool: "run_code" | "run_analysis") => {
    let args: any;
    if (tool === "run_code") {
      args = { language: lang.value, code: code.value };
    } else {
      let p: any;
      try { p = JSON.parse(params.value || "{}"); } catch (e) { out.error("Parameters are not JSON", String(e)); return; }
      args = { analysisType: atype.value, parameters: p, outputFormat: aformat.value };
      if (atype.value === "custom") {
        args.code = code.value;
        args.language = lang.value === "javascript" ? "javascript" : "python";
      }
    }
    runCode.disabled = runAnalysis.disabled = true;
    const started = performance.now();
    out.start(tool + (tool === "run_code" ? " (" + lang.value + ")" : " (" + atype.value + ")"));
    let outcome = "…";
    try {
      const res = await call("/v1/tools/" + tool, { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/x-ndjson" },
        body: JSON.stringify({ conversationId: conv, pathId: path, args }) });
      await lines(res, (line) => {
        if (!line) return;
        const ev = JSON.parse(line);
        if (ev.type === "stdout" || ev.type === "stderr") out.text(ev.type, ev.data || "");
        else if (ev.type === "result") out.result(ev.result);
        else if (ev.type === "error") { out.error("Error (" + ev.code + ")", ev.message || ""); outcome = "error"; }
        else if (ev.type === "final") {
          final(out, tool, ev.result);
          outcome = ev.result.success ? "success" : "failed";
          if (ev.result.contextId) ctxId = ev.result.contextId;
        }
      });
    } catch (e) {
      out.error("Error" + (e instanceof ApiError ? " (" + e.status + " " + e.code + ")" : ""), e instanceof Error ? e.message : String(e));
      outcome = "error";
    } finally {
      runCode.disabled = runAnalysis.disabled = false;
    }
    out.meta(tool + " " + outcome + " · " + Math.round(performance.now() - started) + " ms in the browser");
    showState();
    loadAudit();
    setTimeout(loadAudit, 1500); // the trail is written in batches
  };
  runCode.addEventListener("click", () => run("run_code"));
  runAnalysis.addEventListener("click", () => run("run_analysis"));
  clearBtn.addEventListener("click", () => clear(outEl));
  code.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); run("run_code"); }
  });

  let term: { close(): void } | null = null;
  termBtn.addEventListener("click", async () => {
    if (term) { term.close(); term = null; clear(termBox); termBtn.textContent = "Open terminal"; return; }
    termBtn.disabled = true;
    try {
      const { openTerminal } = await import("./terminal");
      const proto = location.protocol === "https:" ? "wss:" : "ws:";
      term = openTerminal(termBox, proto + "//" + location.host + base + "/shell", key());
      termBtn.textContent = "Close terminal";
    } finally {
      termBtn.disabled = false;
    }
  });

  // Opening the page opens the context, creating it when there is none
  // (any call on the path does; listing its home is the cheapest).
  (async () => {
    try {
      await json(base + "/files/list?path=" + encodeURIComponent("/home/user"));
      const list = await json("/v1/contexts?conversationId=" + encodeURIComponent(conv) + "&pathId=" + encodeURIComponent(path) + "&status=active");
      if (list.contexts?.length) {
        ctxId = list.contexts[0].id;
        net.show(list.contexts[0].network, true);
        desk.show(list.contexts[0].template);
      }
      showState();
      if (!contexts.has(ctxId)) status.textContent = "Context " + ctxId + " · ready";
      loadAudit();
      files.load();
    } catch (e) {
      status.textContent = "Could not open the context: " + (e instanceof Error ? e.message : String(e));
    }
  })();
  code.focus();
  return () => { off(); clearInterval(tick); term?.close(); };
}
