# The python kernel's import hooks, part of the driver's program (see
# driver_site.py for how the parts are joined): PIL's Image.show and save
# displayed, matplotlib quiet and its box plots recorded, subprocess's
# children started with site.

class ImportHook:
    """Patches modules when they are first imported: PIL.Image, so that
    Image.show() and Image.save(path) display the image (a png result), as
    they do on E2B; matplotlib's Axes, so that box plots keep their
    statistics for the chart."""

    def __init__(self, display):
        self.display = display

    def find_spec(self, name, path=None, target=None):
        if name == "matplotlib":
            _quiet_matplotlib()
            return None
        if name == "matplotlib.axes._axes":
            return _patched(name, path, _record_boxplots)
        if name == "subprocess":
            return _patched(name, path, _site_in_children)
        if name != "PIL.Image":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load, display = spec.loader.exec_module, self.display

        def exec_module(module):
            load(module)
            save = module.Image.save

            def show(img, *args, **kwargs):
                display(img)

            def save_and_show(img, fp, *args, **kwargs):
                if isinstance(fp, (str, os.PathLike)):
                    display(img)
                return save(img, fp, *args, **kwargs)

            module.Image.show = show
            module.Image.save = save_and_show

        spec.loader.exec_module = exec_module
        return spec


def _quiet_matplotlib():
    # The Agg backend's warnings on show(), silenced when matplotlib is
    # first imported: filterwarnings compiles its patterns with re, which
    # a kernel that never plots should not import at start.
    import warnings

    warnings.filterwarnings("ignore", message=".*non-interactive.*")
    warnings.filterwarnings("ignore", message=".*FigureCanvasAgg.*")


def _patched(name, path, patch):
    # The module's own spec, with patch(module) run after it loads.
    import importlib.machinery

    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return spec
    load = spec.loader.exec_module

    def exec_module(module):
        load(module)
        try:
            patch(module)
        except Exception:
            pass  # a matplotlib we do not know: no box charts, nothing else lost

    spec.loader.exec_module = exec_module
    return spec


def _site_in_children(module):
    # The kernel runs with -S (_site); the pythons multiprocessing starts
    # (spawn, forkserver) take the kernel's flags from here, and must start
    # as python does, with site.
    flags = module._args_from_interpreter_flags

    def args():
        return [a for a in flags() if a != "-S"]

    module._args_from_interpreter_flags = args


def _record_boxplots(module):
    # A box plot's artists are plain lines and patches; the statistics they
    # were drawn from (quartiles, whiskers, outliers) are kept on the axes
    # so its chart can report them.
    bxp = module.Axes.bxp

    def record(ax, bxpstats, *args, **kwargs):
        out = bxp(ax, bxpstats, *args, **kwargs)
        horizontal = kwargs.get("orientation") == "horizontal" or kwargs.get("vert") is False
        ax.__dict__.setdefault("_sandlot_boxes", []).append((list(bxpstats), horizontal))
        return out

    module.Axes.bxp = record
