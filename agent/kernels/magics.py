# sandlot python kernel: the IPython syntax a cell may use (!cmd, %magics).
# Part of the driver's extras (driver.py): compiled on first use, in the
# driver's globals, so startup does not pay for it.
import os
import sys


class UsageError(Exception):
    pass


class Magics:
    """The IPython syntax a cell may use here: !cmd, x = !cmd, %cd, %env,
    %pip, %pwd, %time, %matplotlib, %%time, %%bash and %%sh. Anything else
    is a UsageError naming what there is: this kernel is not IPython."""

    KNOWN = "!cmd, %cd, %env, %pip, %pwd, %time, %matplotlib, %%time, %%bash and %%sh"

    def __init__(self, ns, display):
        self.ns = ns

    def cell(self, code):
        """code rewritten as Python, or None when it uses no IPython syntax."""
        lines = code.split("\n")
        first = lines[0].strip()
        if first.startswith("%%"):
            name, _, arg = first[2:].partition(" ")
            body = "\n".join(lines[1:])
            return "__sandlot_magic__.cell_magic(%r, %r, %r)" % (name, arg.strip(), body)
        out, changed = [], False
        for ln in lines:
            s = ln.lstrip()
            ind = ln[: len(ln) - len(s)]
            if s.startswith("!"):
                ln, changed = ind + "__sandlot_magic__.sh(%r)" % s[1:], True
            elif s.startswith("%"):
                name, _, arg = s[1:].partition(" ")
                ln, changed = ind + "__sandlot_magic__.line(%r, %r)" % (name, arg.strip()), True
            else:
                name, eq, rest = s.partition("=")
                if eq and name.strip().isidentifier() and rest.lstrip().startswith("!"):
                    cmd = rest.lstrip()[1:]
                    ln, changed = ind + "%s = __sandlot_magic__.sh(%r, capture=True)" % (name.strip(), cmd), True
            out.append(ln)
        return "\n".join(out) if changed else None

    def sh(self, cmd, capture=False):
        import subprocess

        p = subprocess.run(cmd, shell=True, executable="/bin/bash", stdout=subprocess.PIPE if capture else None, text=capture)
        self.ns["_exit_code"] = p.returncode
        if capture:
            return p.stdout.splitlines()
        return None

    def line(self, name, arg):
        if name == "cd":
            os.chdir(os.path.expanduser(arg or "~"))
            print(os.getcwd())
            return None
        if name == "pwd":
            return os.getcwd()
        if name == "env":
            if not arg:
                return dict(os.environ)
            if "=" in arg or " " in arg.strip():
                k, _, v = arg.partition("=") if "=" in arg else arg.partition(" ")
                os.environ[k.strip()] = v.strip()
                print("env: %s=%s" % (k.strip(), v.strip()))
                return None
            return os.environ.get(arg)
        if name == "pip":
            self.sh("%s -m pip %s" % (sys.executable, arg))
            return None
        if name == "matplotlib":
            return None  # figures are always captured as images
        if name == "time":
            return self.timed(arg)
        raise UsageError("Line magic function `%%%s` not found (this python kernel is not IPython; it knows %s)." % (name, self.KNOWN))

    def cell_magic(self, name, arg, body):
        if name == "time":
            return self.timed(body)
        if name in ("bash", "sh"):
            self.sh(body)
            return None
        raise UsageError("Cell magic `%%%%%s` not found (this python kernel is not IPython; it knows %s)." % (name, self.KNOWN))

    def timed(self, code):
        import time

        alt = None
        try:
            _parse(code)
        except SyntaxError:
            alt = self.cell(code)
        tree = _parse(alt or code)
        last = _last_expression(tree)
        c0, w0 = time.process_time(), time.perf_counter()
        t0 = os.times()
        try:
            exec(compile(tree, "<timed>", "exec"), self.ns)
            v = eval(compile(last, "<timed>", "eval"), self.ns) if last is not None else None
        finally:
            t1, w1 = os.times(), time.perf_counter()
            u, s_ = t1.user - t0.user, t1.system - t0.system
            print("CPU times: user %s, sys: %s, total: %s\nWall time: %s" % (_dur(u), _dur(s_), _dur(u + s_), _dur(w1 - w0)))
        return v


def _dur(sec):
    if sec >= 1:
        return "%.2f s" % sec
    if sec >= 1e-3:
        return "%.2f ms" % (sec * 1e3)
    return "%.0f µs" % (sec * 1e6)
