// A context's files: browse, upload (file input or drop), download, and
// edit small text files.
import { ApiError, call, json } from "./api";
import { bytes, clear, h } from "./dom";

const HOME = "/home/user";
const EDIT_MAX = 256 << 10;

export function filesSection(base: string): { el: HTMLElement; load: () => Promise<void> } {
  let dir = HOME;
  const where = h("p", { class: "muted", role: "status" });
  const msg = h("p", { class: "error", role: "alert" });
  const tbody = h("tbody");
  const input = h("input", { id: "upload", type: "file", multiple: true });
  const drop = h("div", { class: "drop", role: "region", "aria-label": "Drop files here to upload" }, "Drop files here to upload them into the folder shown");
  const editor = h("div");
  const up = h("button", { type: "button", class: "secondary" }, "Up one folder");
  const refresh = h("button", { type: "button", class: "secondary" }, "Refresh files");

  const fail = (what: string, e: unknown) => { msg.textContent = what + ": " + (e instanceof ApiError ? e.message : String(e)); };
  const fileURL = (p: string) => base + "/files?path=" + encodeURIComponent(p);

  const load = async () => {
    msg.textContent = "";
    try {
      const res = await json(base + "/files/list?path=" + encodeURIComponent(dir));
      where.textContent = "Folder " + dir;
      clear(tbody);
      const entries = (res.entries || []).sort((a: any, b: any) => (a.type === "dir" ? 0 : 1) - (b.type === "dir" ? 0 : 1) || a.name.localeCompare(b.name));
      if (!entries.length) tbody.append(h("tr", null, h("td", { colspan: "4", class: "muted" }, "Empty folder.")));
      for (const f of entries) {
        const actions = f.type === "dir"
          ? h("button", { type: "button", class: "secondary", "aria-label": "Open folder " + f.name, onclick: () => { dir = f.path; load(); } }, "Open")
          : [h("button", { type: "button", class: "secondary", "aria-label": "Download " + f.name, onclick: () => download(f.path, f.name) }, "Download"), " ",
             f.size <= EDIT_MAX ? h("button", { type: "button", class: "secondary", "aria-label": "Edit " + f.name, onclick: () => edit(f.path) }, "Edit") : null];
        tbody.append(h("tr", null, h("td", { class: "wrap" }, f.type === "dir" ? f.name + "/" : f.name), h("td", null, f.type === "dir" ? "–" : bytes(f.size) || "0 B"),
          h("td", null, f.modTime ? new Date(f.modTime).toLocaleString() : "–"), h("td", null, actions)));
      }
    } catch (e) { fail("list " + dir, e); }
  };

  const upload = async (files: FileList | File[]) => {
    for (const f of Array.from(files)) {
      try {
        await call(fileURL(dir.replace(/\/$/, "") + "/" + f.name), { method: "PUT", body: f, headers: { "Content-Type": "application/octet-stream" } });
        where.textContent = "Uploaded " + f.name;
      } catch (e) { fail("upload " + f.name, e); }
    }
    load();
  };

  const download = async (p: string, name: string) => {
    try {
      const res = await call(fileURL(p));
      const url = URL.createObjectURL(await res.blob());
      const a = h("a", { href: url, download: name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) { fail("download " + name, e); }
  };

  const edit = async (p: string) => {
    try {
      const text = await (await call(fileURL(p))).text();
      const area = h("textarea", { id: "filetext", rows: "10", spellcheck: "false" });
      area.value = text;
      const save = h("button", { type: "button" }, "Save file");
      const close = h("button", { type: "button", class: "secondary" }, "Close editor");
      save.addEventListener("click", async () => {
        try {
          await call(fileURL(p), { method: "PUT", body: area.value, headers: { "Content-Type": "application/octet-stream" } });
          where.textContent = "Saved " + p;
          load();
        } catch (e) { fail("save " + p, e); }
      });
      close.addEventListener("click", () => clear(editor));
      clear(editor);
      editor.append(h("label", { for: "filetext" }, "File contents: " + p), area, h("div", { class: "row" }, save, close));
      area.focus();
    } catch (e) { fail("open " + p, e); }
  };

  input.addEventListener("change", () => { if (input.files) upload(input.files); input.value = ""; });
  drop.addEventListener("dragover", (ev) => { ev.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (ev) => {
    ev.preventDefault();
    drop.classList.remove("over");
    if (ev.dataTransfer?.files.length) upload(ev.dataTransfer.files);
  });
  up.addEventListener("click", () => { if (dir !== "/") { dir = dir.replace(/\/[^/]*\/?$/, "") || "/"; load(); } });
  refresh.addEventListener("click", load);
  const el = h("section", { class: "card", "aria-labelledby": "files-title" },
    h("h2", { id: "files-title" }, "Files"), where, msg,
    h("div", { class: "row" }, up, refresh, h("div", null, h("label", { for: "upload" }, "Upload files"), input)),
    drop,
    h("div", { class: "scroll" }, h("table", { "aria-label": "Files" },
      h("thead", null, h("tr", null, ...["Name", "Size", "Modified", "Actions"].map((c) => h("th", { scope: "col" }, c)))), tbody)),
    editor);
  return { el, load };
}
