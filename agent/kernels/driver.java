// sandlot Java kernel driver. Run as: java --source 11 /dev/stdin, with
// this file on stdin (a sealed memfd: the source launcher needs a file it
// can seek). Cells run in one JShell whose snippets execute in this JVM
// ("local" engine), so state persists across cells.
// fd 1/2: user output. fd 3: commands, each a header line "id n nenv" and
// then length-prefixed fields ("<bytes>\n" and the bytes): the code, then
// nenv name and value pairs. fd 4: results, one JSON object per line:
// {"id", "results", "error"}. A run's output is flushed before its result.
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

import jdk.jshell.Diag;
import jdk.jshell.EvalException;
import jdk.jshell.ExpressionSnippet;
import jdk.jshell.JShell;
import jdk.jshell.Snippet;
import jdk.jshell.SnippetEvent;
import jdk.jshell.SourceCodeAnalysis;
import jdk.jshell.UnresolvedReferenceException;
import jdk.jshell.VarSnippet;

public class SandlotJavaKernel {
    static final int MAXTEXT = 1 << 20;

    // The imports jshell's own DEFAULT startup gives every session.
    static final String[] IMPORTS = {
        "java.io.*", "java.math.*", "java.net.*", "java.nio.file.*", "java.util.*",
        "java.util.concurrent.*", "java.util.function.*", "java.util.prefs.*",
        "java.util.regex.*", "java.util.stream.*",
    };

    // running is the id of the cell the agent may interrupt, null between
    // cells. The command pipe is read by the main thread only while it is
    // null and by the interrupt handler only while it is not, both under
    // LOCK, so the two never read it at once.
    static final Object LOCK = new Object();
    static String running;
    static InputStream ctlIn;

    public static void main(String[] args) throws Exception {
        InputStream ctl = new BufferedInputStream(new FileInputStream("/dev/fd/3"));
        ctlIn = ctl;
        OutputStream res = new FileOutputStream("/dev/fd/4");
        JShell sh = JShell.builder().executionEngine("local").build();
        onInterrupt(sh);
        for (String imp : IMPORTS) {
            sh.eval("import " + imp + ";");
        }
        // The sandbox's environment is also readable as system properties,
        // as on E2B, whose Java kernel gets its variables that way.
        for (Map.Entry<String, String> e : System.getenv().entrySet()) {
            if (System.getProperty(e.getKey()) == null) {
                System.setProperty(e.getKey(), e.getValue());
            }
        }
        while (true) {
            String head = line(ctl);
            if (head == null) {
                return;
            }
            if (head.startsWith("{\"interrupt\":")) {
                continue; // the tag of an interrupt whose cell ended first
            }
            String[] parts = head.split(" ");
            String id = parts[0];
            int nenv = Integer.parseInt(parts[2]);
            String code = field(ctl);
            Map<String, String> env = new LinkedHashMap<>();
            for (int i = 0; i < nenv; i++) {
                String k = field(ctl);
                env.put(k, field(ctl));
            }
            // envs are system properties for this run only; the old ones
            // come back after it.
            Map<String, String> old = new LinkedHashMap<>();
            for (Map.Entry<String, String> e : env.entrySet()) {
                old.put(e.getKey(), System.getProperty(e.getKey()));
                System.setProperty(e.getKey(), e.getValue());
            }
            StringBuilder out = new StringBuilder();
            synchronized (LOCK) {
                running = id;
            }
            try {
                runCell(sh, code, out);
            } catch (Throwable t) {
                out.setLength(0);
                out.append("\"results\":[],\"error\":").append(error(t.getClass().getName(), String.valueOf(t.getMessage()), t.toString()));
            }
            synchronized (LOCK) {
                running = null;
            }
            for (Map.Entry<String, String> e : old.entrySet()) {
                if (e.getValue() == null) {
                    System.clearProperty(e.getKey());
                } else {
                    System.setProperty(e.getKey(), e.getValue());
                }
            }
            System.out.flush();
            System.err.flush();
            res.write(("{\"id\":" + id + "," + out + "}\n").getBytes(StandardCharsets.UTF_8));
            res.flush();
        }
    }

    // onInterrupt makes SIGINT stop the running snippet (the agent's
    // interrupt) instead of ending the JVM. sun.misc.Signal is reached by
    // reflection so that compiling this file prints no warning. The JVM
    // runs the handler on a thread of its own, some time after the signal:
    // a SIGINT the agent did not send, or one meant for a cell that ended,
    // can be handled while a later cell runs, which JShell would stop
    // without a word (no value, no error). So a SIGINT stops the cell only
    // when the agent's tag for that cell is next in the command pipe
    // (written before its signal); any other is dropped.
    static void onInterrupt(JShell sh) {
        try {
            Class<?> sig = Class.forName("sun.misc.Signal");
            Class<?> handler = Class.forName("sun.misc.SignalHandler");
            Object h = Proxy.newProxyInstance(handler.getClassLoader(), new Class<?>[] {handler}, (p, m, a) -> {
                if (m.getName().equals("handle")) {
                    synchronized (LOCK) {
                        if (running != null && takeTag(running)) {
                            sh.stop();
                        }
                    }
                }
                return null;
            });
            sig.getMethod("handle", sig, handler).invoke(null, sig.getConstructor(String.class).newInstance("INT"), h);
        } catch (ReflectiveOperationException e) {
            System.err.println("sandlot: no interrupt handler: " + e);
        }
    }

    static void runCell(JShell sh, String code, StringBuilder out) {
        SourceCodeAnalysis sca = sh.sourceCodeAnalysis();
        String rest = code;
        String value = null;
        String err = "null";
        while (true) {
            SourceCodeAnalysis.CompletionInfo ci = sca.analyzeCompletion(rest);
            if (ci.completeness() == SourceCodeAnalysis.Completeness.EMPTY) {
                break;
            }
            String src = ci.source();
            if (src == null || !ci.completeness().isComplete()) {
                src = rest; // incomplete: let the compiler say why
                rest = "";
            } else {
                rest = ci.remaining();
            }
            value = null;
            for (SnippetEvent ev : sh.eval(src)) {
                if (ev.causeSnippet() != null) {
                    continue;
                }
                Snippet s = ev.snippet();
                if (ev.status() == Snippet.Status.REJECTED) {
                    List<String> diags = sh.diagnostics(s).filter(Diag::isError)
                            .map(d -> d.getMessage(Locale.ROOT)).collect(Collectors.toList());
                    String first = diags.isEmpty() ? "the snippet was rejected" : diags.get(0);
                    err = error("CompilationException", first, s.source().strip() + "\n" + String.join("\n", diags));
                    break;
                }
                if (ev.exception() != null) {
                    err = exception(ev.exception());
                    break;
                }
                if (ev.value() != null && isExpression(s)) {
                    value = render(ev.value(), typeName(s));
                }
            }
            if (!err.equals("null") || rest.isEmpty()) {
                break;
            }
        }
        if (!err.equals("null")) {
            value = null;
        }
        out.append("\"results\":[");
        if (value != null) {
            out.append("{\"text\":").append(json(value)).append(",\"main\":true}");
        }
        out.append("],\"error\":").append(err);
    }

    static boolean isExpression(Snippet s) {
        return s.kind() == Snippet.Kind.EXPRESSION
                || (s.kind() == Snippet.Kind.VAR && s.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND);
    }

    static String typeName(Snippet s) {
        if (s instanceof VarSnippet) {
            return ((VarSnippet) s).typeName();
        }
        if (s instanceof ExpressionSnippet) {
            return ((ExpressionSnippet) s).typeName();
        }
        return "";
    }

    // render is a value as the cell's text result: a String or char
    // without jshell's quotes and escapes (as IJava shows them), null as
    // no result, anything else as jshell prints it.
    static String render(String v, String type) {
        boolean str = type.equals("String") || type.equals("java.lang.String");
        boolean chr = type.equals("char") || type.equals("Character") || type.equals("java.lang.Character");
        if ((str && v.length() >= 2 && v.startsWith("\"") && v.endsWith("\""))
                || (chr && v.length() >= 2 && v.startsWith("'") && v.endsWith("'"))) {
            return unescape(v.substring(1, v.length() - 1));
        }
        if (v.equals("null")) {
            return null;
        }
        return v;
    }

    static String unescape(String s) {
        StringBuilder b = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c != '\\' || i + 1 == s.length()) {
                b.append(c);
                continue;
            }
            char n = s.charAt(++i);
            switch (n) {
                case 'n': b.append('\n'); break;
                case 't': b.append('\t'); break;
                case 'r': b.append('\r'); break;
                case 'b': b.append('\b'); break;
                case 'f': b.append('\f'); break;
                case '0': b.append('\0'); break;
                case 'u':
                    if (i + 4 < s.length()) {
                        try {
                            b.append((char) Integer.parseInt(s.substring(i + 1, i + 5), 16));
                            i += 4;
                            break;
                        } catch (NumberFormatException e) {
                            // not an escape: keep it as it is
                        }
                    }
                    b.append("\\u");
                    break;
                default: b.append(n);
            }
        }
        return b.toString();
    }

    static String exception(Exception e) {
        String name;
        String msg;
        if (e instanceof EvalException) {
            name = ((EvalException) e).getExceptionClassName();
            msg = e.getMessage();
        } else if (e instanceof UnresolvedReferenceException) {
            UnresolvedReferenceException u = (UnresolvedReferenceException) e;
            name = "UnresolvedReferenceException";
            msg = "attempted to use " + u.getSnippet().source().strip() + ", which cannot be used until its unresolved references are declared";
        } else {
            name = e.getClass().getName();
            msg = e.getMessage();
        }
        StringBuilder tb = new StringBuilder(name);
        if (msg != null) {
            tb.append(": ").append(msg);
        }
        for (StackTraceElement el : e.getStackTrace()) {
            tb.append("\n\tat ").append(el);
        }
        return error(name, msg == null ? "" : msg, tb.toString());
    }

    static String error(String name, String value, String traceback) {
        return "{\"name\":" + json(name) + ",\"value\":" + json(value) + ",\"traceback\":" + json(traceback) + "}";
    }

    static String json(String s) {
        if (s.length() > MAXTEXT) {
            s = s.substring(0, MAXTEXT) + "...";
        }
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    if (c < 0x20 || Character.isSurrogate(c) && !validSurrogate(s, i)) {
                        b.append(String.format("\\u%04x", (int) (Character.isSurrogate(c) ? 0xfffd : c)));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }

    static boolean validSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        }
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }

    // line reads up to a newline; null at end of input.
    // takeTag reads the interrupt tag of cell id from the command pipe when
    // it is next there, without waiting. Precondition: LOCK is held and a
    // cell runs.
    static boolean takeTag(String id) {
        byte[] want = ("{\"interrupt\":" + id + "}\n").getBytes(StandardCharsets.UTF_8);
        try {
            if (ctlIn.available() < want.length) {
                return false;
            }
            ctlIn.mark(want.length);
            if (Arrays.equals(ctlIn.readNBytes(want.length), want)) {
                return true;
            }
            ctlIn.reset();
        } catch (IOException e) {
            // no tag
        }
        return false;
    }

    static String line(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        int c;
        while ((c = in.read()) != -1 && c != '\n') {
            b.write(c);
        }
        if (c == -1 && b.size() == 0) {
            return null;
        }
        return b.toString(StandardCharsets.UTF_8);
    }

    static String field(InputStream in) throws IOException {
        String n = line(in);
        if (n == null) {
            throw new IOException("sandlot: truncated command");
        }
        byte[] b = in.readNBytes(Integer.parseInt(n.trim()));
        return new String(b, StandardCharsets.UTF_8);
    }
}
