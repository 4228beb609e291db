// A small terminal, loaded the first time one is opened: a screen of
// cells fed by the shell's WebSocket (the same session as `sandlot
// shell`), with the VT100 sequences bash and its line editor use; keys
// and pastes go back as the shell's stdin; the screen follows the
// element's size. Colours and other attributes are dropped.

const SCROLLBACK = 1000;

class Screen {
  lines: string[][] = [];
  back: string[] = [];
  x = 0;
  y = 0;
  private state = 0; // 0 text, 1 ESC, 2 CSI, 3 OSC, 4 charset
  private params = "";
  constructor(public cols: number, public rows: number) {
    for (let i = 0; i < rows; i++) this.lines.push(this.blank());
  }
  private blank(): string[] { return new Array(this.cols).fill(" "); }

  resize(cols: number, rows: number): void {
    this.lines = this.lines.map((l) => (l.length >= cols ? l.slice(0, cols) : l.concat(new Array(cols - l.length).fill(" "))));
    this.cols = cols;
    while (this.lines.length > rows) {
      if (this.y > 0) { this.back.push(this.lines.shift()!.join("").trimEnd()); this.y--; } else this.lines.pop();
    }
    while (this.lines.length < rows) this.lines.push(this.blank());
    this.rows = rows;
    this.x = Math.min(this.x, cols - 1);
    this.y = Math.min(this.y, rows - 1);
  }

  private lf(): void {
    if (this.y < this.rows - 1) { this.y++; return; }
    this.back.push(this.lines.shift()!.join("").trimEnd());
    if (this.back.length > SCROLLBACK) this.back.shift();
    this.lines.push(this.blank());
  }

  write(s: string): void {
    for (const ch of s) {
      const c = ch.codePointAt(0)!;
      switch (this.state) {
        case 1:
          if (ch === "[") { this.state = 2; this.params = ""; }
          else if (ch === "]") { this.state = 3; }
          else if (ch === "(" || ch === ")") { this.state = 4; }
          else this.state = 0;
          continue;
        case 2:
          if (c >= 0x40 && c <= 0x7e) { this.csi(ch, this.params); this.state = 0; } else this.params += ch;
          continue;
        case 3:
          if (c === 7) this.state = 0;
          else if (ch === "\\" ) this.state = 0;
          continue;
        case 4:
          this.state = 0;
          continue;
      }
      if (c === 27) { this.state = 1; continue; }
      if (ch === "\r") { this.x = 0; continue; }
      if (ch === "\n") { this.lf(); continue; }
      if (c === 8) { this.x = Math.max(0, this.x - 1); continue; }
      if (ch === "\t") { this.x = Math.min(this.cols - 1, (Math.floor(this.x / 8) + 1) * 8); continue; }
      if (c < 32 || c === 127) continue;
      if (this.x >= this.cols) { this.x = 0; this.lf(); }
      this.lines[this.y][this.x++] = ch;
    }
  }

  private csi(f: string, p: string): void {
    const priv = p.startsWith("?");
    const ns = (priv ? p.slice(1) : p).split(";").map((v) => parseInt(v, 10));
    const n = (i: number, d = 1) => (isNaN(ns[i]) || ns[i] === 0 ? d : ns[i]);
    const line = this.lines[this.y];
    switch (f) {
      case "A": this.y = Math.max(0, this.y - n(0)); break;
      case "B": this.y = Math.min(this.rows - 1, this.y + n(0)); break;
      case "C": this.x = Math.min(this.cols - 1, this.x + n(0)); break;
      case "D": this.x = Math.max(0, this.x - n(0)); break;
      case "G": this.x = Math.min(this.cols - 1, n(0) - 1); break;
      case "d": this.y = Math.min(this.rows - 1, n(0) - 1); break;
      case "H": case "f": this.y = Math.min(this.rows - 1, n(0) - 1); this.x = Math.min(this.cols - 1, n(1) - 1); break;
      case "K": {
        const m = isNaN(ns[0]) ? 0 : ns[0];
        const [a, b] = m === 0 ? [this.x, this.cols] : m === 1 ? [0, this.x + 1] : [0, this.cols];
        for (let i = a; i < b; i++) line[i] = " ";
        break;
      }
      case "J": {
        const m = isNaN(ns[0]) ? 0 : ns[0];
        if (m === 0) { for (let i = this.x; i < this.cols; i++) line[i] = " "; for (let r = this.y + 1; r < this.rows; r++) this.lines[r] = this.blank(); }
        else if (m === 1) { for (let r = 0; r < this.y; r++) this.lines[r] = this.blank(); for (let i = 0; i <= this.x; i++) line[i] = " "; }
        else { for (let r = 0; r < this.rows; r++) this.lines[r] = this.blank(); }
        break;
      }
      case "P": line.splice(this.x, n(0)); while (line.length < this.cols) line.push(" "); break;
      case "@": line.splice(this.x, 0, ...new Array(n(0)).fill(" ")); line.length = this.cols; break;
      case "X": for (let i = this.x; i < Math.min(this.cols, this.x + n(0)); i++) line[i] = " "; break;
      case "L": for (let i = 0; i < n(0); i++) { this.lines.splice(this.y, 0, this.blank()); this.lines.pop(); } break;
      case "M": for (let i = 0; i < n(0); i++) { this.lines.splice(this.y, 1); this.lines.push(this.blank()); } break;
      default: break; // m (colours), h/l (modes), r (regions): not drawn
    }
  }
}

export interface Terminal { close(): void }

export function openTerminal(box: HTMLElement, url: string, key: string): Terminal {
  const pre = document.createElement("pre");
  pre.className = "term";
  pre.tabIndex = 0;
  pre.setAttribute("role", "textbox");
  pre.setAttribute("aria-label", "Terminal");
  pre.setAttribute("aria-multiline", "true");
  const status = document.createElement("p");
  status.className = "muted";
  status.setAttribute("role", "status");
  status.textContent = "Connecting…";
  box.append(pre, status);

  const probe = document.createElement("span");
  probe.textContent = "MMMMMMMMMM";
  probe.style.visibility = "hidden";
  pre.append(probe);
  const cw = probe.getBoundingClientRect().width / 10 || 8;
  const lh = probe.getBoundingClientRect().height || 16;
  probe.remove();
  const size = () => ({
    cols: Math.max(20, Math.min(1000, Math.floor((pre.clientWidth - 12) / cw))),
    rows: Math.max(5, Math.min(1000, Math.floor((pre.clientHeight - 8) / lh))),
  });
  let sz = size();
  const screen = new Screen(sz.cols, sz.rows);

  let drawing = false;
  const draw = () => {
    if (drawing) return;
    drawing = true;
    requestAnimationFrame(() => {
      drawing = false;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      const before = screen.back.concat(screen.lines.slice(0, screen.y).map((l) => l.join("").trimEnd()));
      const cur = screen.lines[screen.y];
      const after = screen.lines.slice(screen.y + 1).map((l) => l.join("").trimEnd());
      pre.textContent = "";
      const cursor = document.createElement("span");
      cursor.className = "cursor";
      cursor.textContent = cur[screen.x] ?? " ";
      pre.append((before.length ? before.join("\n") + "\n" : "") + cur.slice(0, screen.x).join(""), cursor,
        cur.slice(screen.x + 1).join("").trimEnd() + (after.length ? "\n" + after.join("\n").replace(/\n+$/, "") : ""));
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    });
  };

  const ws = new WebSocket(url + "?cols=" + sz.cols + "&rows=" + sz.rows, ["sandlot-shell", "sandlot-key." + key]);
  const send = (msg: object) => { if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(msg) + "\n"); };
  let buf = "";
  ws.onopen = () => { status.textContent = "Connected: bash in the context. Click or tab into the terminal to type; Shift+Tab leaves it."; pre.focus(); };
  ws.onmessage = (ev) => {
    buf += typeof ev.data === "string" ? ev.data : "";
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (!line) continue;
      const o = JSON.parse(line);
      if (o.type === "data") screen.write(o.data || "");
      else if (o.type === "exit") { screen.write("\r\n[the shell exited with " + o.exitCode + "]\r\n"); status.textContent = "The shell ended."; }
      else if (o.type === "error") { screen.write("\r\n[error: " + (o.message || o.code) + "]\r\n"); status.textContent = "The session failed."; }
      draw();
    }
  };
  ws.onclose = () => { status.textContent = "Disconnected."; };
  ws.onerror = () => { status.textContent = "The terminal could not connect."; };

  const keys: Record<string, string> = {
    Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b", ArrowUp: "\x1b[A", ArrowDown: "\x1b[B",
    ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D", Home: "\x1b[H", End: "\x1b[F", Delete: "\x1b[3~",
    PageUp: "\x1b[5~", PageDown: "\x1b[6~",
  };
  pre.addEventListener("keydown", (ev) => {
    let data = "";
    if (ev.ctrlKey && !ev.altKey && ev.key.length === 1) {
      const c = ev.key.toUpperCase().charCodeAt(0);
      if (c >= 64 && c <= 95) data = String.fromCharCode(c - 64);
    } else if (keys[ev.key]) {
      // Tab leaves the terminal with Shift held, so the keyboard is never trapped.
      if (ev.key === "Tab" && ev.shiftKey) return;
      data = keys[ev.key];
    } else if (ev.key.length === 1 && !ev.metaKey) {
      data = (ev.altKey ? "\x1b" : "") + ev.key;
    }
    if (data) { ev.preventDefault(); send({ stdin: data }); }
  });
  pre.addEventListener("paste", (ev) => {
    const text = ev.clipboardData?.getData("text") || "";
    if (text) { ev.preventDefault(); send({ stdin: text }); }
  });
  const onResize = () => {
    const n = size();
    if (n.cols === sz.cols && n.rows === sz.rows) return;
    sz = n;
    screen.resize(n.cols, n.rows);
    send({ resize: n });
    draw();
  };
  let timer = 0;
  const resized = () => { clearTimeout(timer); timer = window.setTimeout(onResize, 100); };
  window.addEventListener("resize", resized);
  draw();
  return {
    close() {
      window.removeEventListener("resize", resized);
      ws.close();
    },
  };
}
