# The python kernel's site set-up, part of the driver's program (driver.py,
# which runs last: the agent joins driver_site.py, driver_hooks.py and
# driver.py, in that order, and compile_driver.py compiles the same join).
# Its names are the driver's globals; the driver's imports (os, sys,
# _frozen_importlib) are in place before anything here is called.

def _site():
    # What python's start does without -S (site.main(): the venv, the user
    # and system site-packages, the path lines of their .pth files, help()
    # and exit(), sitecustomize), except that the import lines of the .pth
    # files (a setuptools shim, namespace-package stubs, a CA bundle hook)
    # wait for the first import of a module outside the standard library.
    # Those lines imported 22 modules at every start (~0.7 MiB and ~8 ms of
    # a kernel's start here) that a kernel running only the standard library
    # never uses. Each later runs as site runs it: site's globals, the
    # locals site had for it (sitedir, fullname, n, ...), and sitedir in its
    # caller's frame; an error skips the rest of its file.
    import site

    pending = []

    def later(line):
        pending.append(dict(sys._getframe(1).f_locals))  # site.addpackage's

    deferred = hasattr(sys, "stdlib_module_names")  # 3.10+; before, the lines run now
    cwd = sys.path[0] if sys.path and sys.path[0] == "" else None
    if cwd is not None:
        del sys.path[0]  # python adds the -c program's "" after site runs
    if deferred:
        site.exec = later
    try:
        site.main()
    finally:
        site.__dict__.pop("exec", None)
        if cwd is not None:
            sys.path.insert(0, cwd)
    if pending:
        sys.meta_path.insert(0, _PthLines(pending))


class _PthLines:
    """Runs the deferred .pth import lines (_site) when a module outside the
    standard library (or distutils, which one of them shims) is first
    looked for, before any other finder looks for it. The lines may put a
    finder in front of this one (setuptools' shim does) or import the very
    module being looked for: the finders in front are asked first, and a
    module a line imported is handed over as it is, not run again."""

    def __init__(self, pending):
        self.pending = pending

    def find_spec(self, name, path=None, target=None):
        if self.pending is None:
            return None
        top = name.partition(".")[0]
        if top in sys.stdlib_module_names and top != "distutils":
            return None
        pending, self.pending = self.pending, None
        skip = None
        for i, names in enumerate(pending):
            if names.get("fullname") == skip:
                continue
            try:
                ok = _pth_line(names.get("sitedir"), names)
            except BaseException:
                self.pending = pending[i + 1 :] or None  # interrupted: the rest wait for the next import
                raise
            if not ok:
                skip = names.get("fullname")
        module = sys.modules.pop(name, None)
        if module is not None:
            return _frozen_importlib.ModuleSpec(name, _Imported(module), is_package=hasattr(module, "__path__"))
        mp = sys.meta_path
        for finder in mp[: mp.index(self)] if self in mp else ():
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                return spec
        return None


class _Imported:
    """The loader of a module a .pth line imported while its own import was
    being looked for: the module as it is, with its own spec."""

    def __init__(self, module):
        self.module = module
        self.spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__ = self.spec


def _pth_line(sitedir, names):
    # One .pth import line, run as site runs it (site's globals and the
    # locals it had; sitedir is in the caller's frame too). False when it
    # failed, reported on stderr as site reports it.
    import site

    try:
        exec(names["line"], vars(site), dict(names))
        return True
    except Exception as e:
        import traceback

        n = names.get("n", 0) + (1 if sys.version_info < (3, 13) else 0)  # site counts from 1 since 3.13
        sys.stderr.write("Error processing line %d of %s:\n\n" % (n, names.get("fullname")))
        for record in traceback.format_exception(type(e), e, e.__traceback__.tb_next):
            for line in record.splitlines():
                sys.stderr.write("  " + line + "\n")
        sys.stderr.write("\nRemainder of file ignored\n")
        return False
