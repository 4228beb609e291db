# The python kernel's IPython mode, one of the driver's extras (driver.py):
# compiled on first use, in the driver's globals.
#
# A cell asked to run "ipython" goes through IPython's InteractiveShell
# (run_cell), the shell E2B's code interpreter runs, over the same
# namespace as the plain kernel's cells: every magic, !cmd, get_ipython(),
# ? help, IPython's display() and display hooks. What leaves the shell is
# caught where the plain kernel's results go: the display hook and the
# display publisher add results, the traceback printer records the error,
# and figures are read after the cell as in the plain mode. IPython is
# imported on the first such cell, or when the kernel starts with
# SANDLOT_IPYTHON=1 (a prestart that keeps the import off the first cell).

_IPY_MIME = (
    ("text/plain", "text"),
    ("text/html", "html"),
    ("text/markdown", "markdown"),
    ("image/svg+xml", "svg"),
    ("image/png", "png"),
    ("image/jpeg", "jpeg"),
    ("text/latex", "latex"),
    ("application/json", "json"),
    ("application/javascript", "javascript"),
)


def _ipython_shell(main, state, frame_data, maxtext):
    """Returns run(code) -> (results, error) over an InteractiveShell whose
    user namespace is main's."""
    import base64

    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    def result_of(data, main_result, obj=None):
        r = {"main": True} if main_result else {}
        for mime, key in _IPY_MIME:
            x = data.get(mime)
            if x is None:
                continue
            if isinstance(x, (bytes, bytearray)):
                x = base64.b64encode(x).decode()
            elif key != "json" and not isinstance(x, str):
                x = str(x)
            if key == "text" and len(x) > maxtext:
                x = x[:maxtext] + "..."
            r[key] = x
        pd = sys.modules.get("pandas")
        if obj is not None and pd is not None and isinstance(obj, pd.DataFrame):
            r["data"] = frame_data(obj)
        return r

    def add(r):
        if state["results"] is not None:
            state["results"].append(r)

    class Hook(DisplayHook):
        # The value of a cell's last expression: a main result, not an
        # "Out[n]:" line on stdout.
        def __call__(self, result=None):
            self._sandlot_obj = result
            try:
                return super().__call__(result)
            finally:
                self._sandlot_obj = None

        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            add(result_of(format_dict, True, getattr(self, "_sandlot_obj", None)))

        def finish_displayhook(self):
            pass

    class Publisher(DisplayPublisher):
        # display(x), IPython.display objects, and anything else that
        # publishes a mime bundle: one result each.
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
            add(result_of(data, False))

        def clear_output(self, wait=False):
            pass

    class Shell(InteractiveShell):
        # A cell's error is recorded, not printed: E2B's {name, value,
        # traceback}.
        def _showtraceback(self, etype, evalue, stb):
            try:
                value = str(evalue)
            except BaseException:
                value = "<str failed>"
            state["error"] = {"name": getattr(etype, "__name__", str(etype)), "value": value, "traceback": "\n".join(stb)}

        def show_usage_error(self, exc):
            state["error"] = {"name": "UsageError", "value": str(exc), "traceback": "UsageError: %s" % exc}

    cfg = Config()
    cfg.HistoryManager.enabled = False  # no sqlite file in the user's home
    cfg.InteractiveShell.colors = "NoColor"
    sh = Shell.instance(
        config=cfg,
        user_module=main,
        user_ns=main.__dict__,
        displayhook_class=Hook,
        display_pub_class=Publisher,
    )

    def matplotlib_magic(line):
        # Figures are always captured (PNG and chart) after the cell, as in
        # the plain mode; an inline backend would take them first.
        return None

    sh.register_magic_function(matplotlib_magic, "line", "matplotlib")
    # !cmd on the kernel's own stdout and stderr, as a terminal IPython
    # runs it: the piped default reads a pty, which merges the streams and
    # ends lines with \r\n.
    sh.system = sh.system_raw

    def run(code):
        state["error"] = None
        state["running"] = True
        try:
            if state["pending"]:  # an interrupt that came before the cell ran
                state["interrupted"]()
            r = sh.run_cell(code, store_history=True)
        except KeyboardInterrupt as e:  # between the cell's own handlers
            r = None
            state["error"] = {"name": "KeyboardInterrupt", "value": str(e), "traceback": ""}
        finally:
            state["running"] = False
        err = state["error"]
        if err is None and r is not None and not r.success:
            e = r.error_in_exec or r.error_before_exec
            if e is not None:
                err = {"name": type(e).__name__, "value": str(e), "traceback": ""}
        return err

    return run
