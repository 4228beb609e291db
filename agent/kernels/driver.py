# sandlot python kernel driver. Run as: python3 -S -u -c <the boot program>.
# Its program is driver_site.py, driver_hooks.py and this file, joined in
# that order with a newline between them (pythonSource in pydriver.go;
# compile_driver.py compiles the same join), so this file's last line
# starts it.
# fd 1/2: user output (pipes, so subprocess output lands there too)
# fd 3: commands, one JSON object per line: {"id", "code", "env", "ipython"};
#   {"interrupt":ID} follows a cell the agent is about to send SIGINT
#   (tagged()), and is skipped when it is read as the next line
# fd 4: results, one JSON object per line: {"id", "results", "error"}
# All of a run's output is written before its result line, so the agent
# drains fd 1/2 after reading the result. Keep imports light: startup time
# is on the first call's path (_ast, for one, is imported by the first cell
# that is not a single expression, and ast never; json, signal and warnings
# are not imported at all, as they bring re and enum: the C modules under
# them serve). The kernel runs with -S: _site() sets up site-packages as
# site does, but runs the import lines of .pth files only when a module
# outside the standard library is first imported. _SANDLOT_EXTRAS, set
# before this file by the agent, is the source of the chart reader, the
# magics and the IPython mode (ipython.py): compiled by _extras() on first
# use, not at every start.
import _frozen_importlib
import _signal
import builtins
import os
import sys

try:
    # The json package's C accelerators, without the package (it imports
    # re at once, ~10 ms of a cold kernel's start on a loaded machine).
    from _json import encode_basestring_ascii as _json_str
    from _json import make_encoder as _json_encoder
    from _json import make_scanner as _json_scanner
except ImportError:  # an interpreter without them: the package
    _json_scanner = None


class _JSONOptions:
    # What _json's scanner reads of a json.JSONDecoder: its defaults.
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


def _not_json(o):
    raise TypeError("Object of type %s is not JSON serializable" % type(o).__name__)


def _json_codec():
    # (loads, dumps) for the command and result lines: json.loads and
    # json.dumps with their defaults (ASCII out, NaN allowed, cycles
    # refused), from the C accelerators when there are any.
    try:
        scan = _json_scanner(_JSONOptions())
        # make_encoder(markers, default, encoder, indent, key_separator,
        # item_separator, sort_keys, skipkeys, allow_nan)
        encode = _json_encoder({}, _not_json, _json_str, None, ": ", ", ", False, False, True)
        if "".join(encode({"a": [1, None]}, 0)) != '{"a": [1, null]}' or scan('{"a": 1}', 0) != ({"a": 1}, 8):
            raise ValueError("unexpected _json")
    except Exception:  # none, or an interpreter whose _json differs: the package
        import json

        return json.loads, json.dumps

    def loads(b):
        s = b.decode("utf-8").strip()
        try:
            v, end = scan(s, 0)
        except StopIteration:
            end = -1
        if end != len(s):
            raise ValueError("a command line is not one JSON value")
        return v

    def dumps(v):
        return "".join(encode(v, 0))

    return loads, dumps


def _sandlot_main():
    os.set_inheritable(3, False)
    os.set_inheritable(4, False)
    rin = open(3, "rb")
    loads, dumps = _json_codec()

    main = type(sys)("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    ns = main.__dict__
    driver_file = sys._getframe().f_code.co_filename
    state = {"running": False, "pending": False, "id": None, "results": None, "error": None}
    FLAGS = 0x2000  # ast.PyCF_ALLOW_TOP_LEVEL_AWAIT (3.8+), without importing ast
    CO_COROUTINE = 0x80
    MAXTEXT = 1 << 20
    TAG = b'{"interrupt":'  # an interrupt's tag: TAG, the run's id, "}\n" (interruptTag)

    def on_sigint(signum, frame):
        # Only user code is interrupted; a late signal must not break the
        # loop. One that comes before the cell's code runs (while it is
        # read, decoded, compiled) is kept, and taken as the code starts if
        # the agent tagged it for this cell (interrupted()).
        if state["running"]:
            raise KeyboardInterrupt
        state["pending"] = True

    _signal.signal(_signal.SIGINT, on_sigint)

    plain = (int, float, str, bool, bytes, list, tuple, dict, set, complex, type(None))

    def rich(v, main_result):
        if type(v) in plain:  # fast path: no rich reprs to look for
            text = repr(v)
            if len(text) > MAXTEXT:
                text = text[:MAXTEXT] + "..."
            return {"text": text, "main": True} if main_result else {"text": text}
        try:
            text = repr(v)
        except BaseException as e:  # a broken __repr__ is the user's problem
            text = "<repr failed: %s>" % type(e).__name__
        if len(text) > MAXTEXT:
            text = text[:MAXTEXT] + "..."
        r = {"text": text}
        if main_result:
            r["main"] = True
        if isinstance(v, type):
            return r
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(v, pd.DataFrame):
            r["data"] = frame_data(v)
        for attr, key in (
            ("_repr_html_", "html"),
            ("_repr_markdown_", "markdown"),
            ("_repr_svg_", "svg"),
            ("_repr_png_", "png"),
            ("_repr_jpeg_", "jpeg"),
            ("_repr_latex_", "latex"),
            ("_repr_json_", "json"),
        ):
            try:
                m = getattr(v, attr, None)
                if m is None or not callable(m):
                    continue
                x = m()
                if x is None:
                    continue
                if isinstance(x, tuple):
                    x = x[0]
                if isinstance(x, (bytes, bytearray)):
                    import base64

                    x = base64.b64encode(x).decode()
                elif key == "json":
                    x = x  # any JSON value
                elif not isinstance(x, str):
                    x = str(x)
                r[key] = x
            except BaseException:
                pass
        return r

    def frame_data(df):
        # E2B's e2b/data: the columns as lists, timestamps in ISO form,
        # anything else JSON cannot hold as its str.
        try:
            d = df.to_dict(orient="list")
            for k, col in d.items():
                d[k] = [x.isoformat() if hasattr(x, "isoformat") else x for x in col]
            import json

            return json.loads(json.dumps(d, default=str))
        except BaseException:
            return None

    def display(*objs, **kwargs):
        for o in objs:
            if state["results"] is not None:
                state["results"].append(rich(o, False))

    builtins.display = display
    sys.meta_path.insert(0, ImportHook(display))
    _site()  # after the hook: its .pth lines go first, and sitecustomize's imports are patched

    def magics():
        # The first cell that is not Python makes the magics (and the name
        # its rewritten code calls).
        m = state.get("magic")
        if m is None:
            _extras()
            m = state["magic"] = builtins.__sandlot_magic__ = Magics(ns, display)
        return m

    def figures(results):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            nums = plt.get_fignums()
            if not nums:
                return
            import base64
            import io

            _extras()
            for n in nums:
                fig = plt.figure(n)
                buf = io.BytesIO()
                fig.savefig(buf, format="png", bbox_inches="tight")
                r = {"png": base64.b64encode(buf.getvalue()).decode(), "text": repr(fig)}
                chart = _chart_json(fig)  # after savefig: the tick labels are drawn
                if chart is not None:
                    r["chart"] = chart
                results.append(r)
            plt.close("all")
        except BaseException as e:
            sys.stderr.write("sandlot: could not capture figures: %r\n" % (e,))

    cells = {}

    def error_of(e):
        import linecache
        import traceback

        # linecache holds the cells the kernel keeps, no more: a cell that
        # is no longer kept leaves it at the next error.
        cache = linecache.cache
        for fname in [k for k in cache if k.startswith("<cell-") and k not in cells]:
            del cache[fname]
        for fname, code in cells.items():
            if fname not in cache:
                cache[fname] = (len(code), None, code.splitlines(True), fname)

        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == driver_file:
            tb = tb.tb_next
        try:
            lines = traceback.format_exception(type(e), e, tb)
        except BaseException:
            lines = [repr(e)]
        try:
            value = str(e)
        except BaseException:
            value = "<str failed>"
        return {"name": type(e).__name__, "value": value, "traceback": "".join(lines)}

    def execute(co):
        state["running"] = True
        try:
            if state["pending"]:
                interrupted()
            v = eval(co, ns)
            if co.co_flags & CO_COROUTINE:
                import asyncio

                v = asyncio.get_event_loop_policy().get_event_loop().run_until_complete(v)
        finally:
            state["running"] = False
        return v

    def interrupted():
        # Called while running, with an interrupt kept: it ends the cell if
        # it was the agent's for this cell; else (meant for an earlier cell,
        # or not sent by the agent) it is dropped.
        state["pending"] = False
        if tagged():
            raise KeyboardInterrupt

    def tagged():
        # Whether the agent tagged an interrupt for this cell: it writes the
        # tag after the cell and before the signal, so it is in the pipe by
        # now, and nothing else follows the cell before its result. Read
        # without blocking: no tag, no wait.
        try:
            # Inside the try: an interrupt raised as this call returns
            # must not leave the pipe non-blocking (readline would read
            # its b"" as the end).
            os.set_blocking(3, False)
            head = rin.peek(1)[: len(TAG)]
            if not head or TAG[: len(head)] != head:
                return False
            line = rin.readline()  # whole: the tag is written at once
        finally:
            os.set_blocking(3, True)
        return line == b"%s%d}\n" % (TAG, state["id"])

    state["interrupted"] = interrupted

    def dedent(code):
        # As IPython does with a cell: drop leading blank lines, then the
        # first line's indentation from every line that starts with it.
        if not code or code[0] not in " \t\r\n":
            return code
        lines = code.splitlines(True)
        while lines and not lines[0].strip():
            lines.pop(0)
        if not lines:
            return ""
        first = lines[0]
        ind = first[: len(first) - len(first.lstrip(" \t"))]
        if ind:
            n = len(ind)
            lines = [ln[n:] if ln.startswith(ind) else ln for ln in lines]
        return "".join(lines)

    def run(req, count):
        env = req.get("env")
        saved = None
        if env:
            # For this run only: restored after it, as E2B does.
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
        try:
            return run_code(req, count)
        finally:
            if saved:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v

    ipy = {"run": None, "missing": False}

    def ipython():
        if ipy["run"] is None:
            _extras()
            ipy["run"] = _ipython_shell(main, state, frame_data, MAXTEXT)
        return ipy["run"]

    def has_ipython():
        # An image without IPython (a custom template) still runs its
        # cells: in the plain kernel, said once on stderr.
        if ipy["run"] is not None:
            return True
        if ipy["missing"]:
            return False
        try:
            ipython()
            return True
        except ImportError as e:
            ipy["missing"] = True
            sys.stderr.write("sandlot: IPython is not installed in this sandbox (%s; Debian: python3-ipython): cells run in the plain python kernel\n" % e)
            return False

    def run_ipython(req):
        results = []
        state["results"] = results
        try:
            err = ipython()(req.get("code", ""))
        except BaseException as e:
            err = error_of(e)
        state["results"] = None
        figures(results)
        return {"id": req.get("id"), "results": results, "error": err}

    def run_code(req, count):
        if req.get("ipython") and has_ipython():
            return run_ipython(req)
        code = dedent(req.get("code", ""))
        fname = "<cell-%d>" % count
        cells[fname] = code  # for tracebacks; linecache is filled on error
        if len(cells) > 1000:
            del cells[next(iter(cells))]
        compiled = []
        results = []
        state["results"] = results
        err = None
        try:
            try:
                co = compile(code, fname, "eval", FLAGS)
            except SyntaxError:
                co = None
            if co is not None:
                compiled.append(co)
                v = execute(co)
                if v is not None:
                    ns["_"] = v
                    results.append(rich(v, True))
            else:
                try:
                    tree = _parse(code, fname)
                except SyntaxError:
                    # Not Python: perhaps IPython syntax (!cmd, %magic),
                    # which valid code never pays for.
                    alt = magics().cell(code)
                    if alt is None:
                        raise
                    code = cells[fname] = alt
                    tree = _parse(code, fname)
                last = _last_expression(tree)
                compiled.append(compile(tree, fname, "exec", FLAGS))
                execute(compiled[-1])
                if last is not None:
                    compiled.append(compile(last, fname, "eval", FLAGS))
                    v = execute(compiled[-1])
                    if v is not None:
                        ns["_"] = v
                        results.append(rich(v, True))
        except BaseException as e:
            err = error_of(e)
        if not _defines(compiled):
            # Only code this cell defines (functions, classes, lambdas,
            # comprehensions) can show in a later cell's traceback.
            cells.pop(fname, None)
        state["results"] = None
        figures(results)
        return {"id": req.get("id"), "results": results, "error": err}

    if os.environ.pop("SANDLOT_IPYTHON", "") == "preload":
        try:
            ipython()  # a prestart: the first cell does not pay the import
        except BaseException:
            pass  # the first IPython cell says why

    count = 0
    while True:
        try:
            line = rin.readline()
            if not line:
                return
            if line.startswith(TAG):
                continue  # an interrupt's tag the cell before did not take
            count += 1
            req = loads(line)
            state["id"] = req.get("id")
            resp = run(req, count)
            out = (dumps(resp) + "\n").encode()
        except KeyboardInterrupt:
            continue
        except BaseException as e:
            out = (dumps({"id": None, "error": {"name": type(e).__name__, "value": str(e), "traceback": ""}}) + "\n").encode()
        view = memoryview(out)
        while view:
            n = os.write(4, view)
            view = view[n:]


def _parse(code, fname="<unknown>"):
    # ast.parse(code, fname, "exec"), without the ast module: its import
    # (enum, contextlib and the unparser's classes) held ~1.3 MiB of every
    # kernel that ran a cell other than a single expression. _ast (its node
    # types, ~0.2 MiB) is imported by the first such cell too, not at start.
    import _ast

    return compile(code, fname, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)


def _defines(codes):
    # Whether any of these code objects holds another (a function, class,
    # lambda or comprehension defined in it).
    for co in codes:
        for c in co.co_consts:
            if type(c) is type(co):
                return True
    return False


def _last_expression(tree):
    # The module tree's last statement, taken off it, as an Expression to
    # evaluate for the cell's result; None when it is not an expression.
    import _ast

    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        return _ast.Expression(tree.body.pop().value)
    return None


def _extras():
    # Runs the extras (charts.py, magics.py, ipython.py) in the driver's
    # globals, once.
    # They keep the driver's file name, so tracebacks hide their frames too.
    g = globals()
    if "_chart_json" not in g:
        exec(compile(_SANDLOT_EXTRAS, sys._getframe().f_code.co_filename, "exec"), g)


_sandlot_main()
