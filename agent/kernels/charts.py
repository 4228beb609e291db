# The python kernel's chart reader, one of the driver's extras (driver.py):
# compiled on first use, in the driver's globals.
import json

# Charts: what a matplotlib figure shows, as E2B's code interpreter reports
# it in a result's "chart": line, scatter, bar, pie, box_and_whisker (from
# the statistics recorded when the box plot was drawn), and a
# superchart of several axes. Only what the figure itself holds is read
# (its artists and axes); a chart that cannot be read, or whose JSON would
# pass _CHART_MAX bytes, is left out and the PNG stays.
_CHART_MAX = 1 << 20


def _chart_json(fig):
    try:
        c = _chart_of_figure(fig)
        if c is None:
            return None
        doc = json.loads(json.dumps(c, allow_nan=False, default=str))
        if len(json.dumps(doc)) > _CHART_MAX:
            return None
        return doc
    except BaseException:
        return None


def _chart_of_figure(fig):
    axes = [a for a in fig.get_axes() if a.get_visible() and a.has_data()]
    charts = [c for c in (_chart_of_axes(a) for a in axes) if c is not None]
    if not charts:
        return None
    if len(axes) == 1:
        return charts[0]
    sup = getattr(fig, "_suptitle", None)
    return {"type": "superchart", "title": (sup.get_text() or None) if sup is not None else None, "elements": charts}


def _unit(label):
    # "Time (s)" and "Size [MB]" name their unit; E2B reports it apart.
    import re

    m = re.search(r"[\(\[]([^\)\]]+)[\)\]]\s*$", label or "")
    return m.group(1).strip() if m else None


def _num(v):
    import math

    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    if not math.isfinite(f):
        return None
    return f  # a float, 2.0 too, as E2B's charts have them (the Python SDK reads 2 as an int)


def _scale(axis, ax_scale):
    conv = axis.get_converter() if hasattr(axis, "get_converter") else getattr(axis, "converter", None)
    name = type(conv).__name__ if conv is not None else ""
    if "Date" in name:
        return "datetime"
    if "StrCategory" in name:
        return "categorical"
    return ax_scale


def _value(v, scale):
    if scale == "datetime":
        try:
            from matplotlib import dates

            return dates.num2date(float(v)).isoformat()
        except Exception:
            return str(v)
    return _num(v)


def _axis_info(ax, c):
    c["x_label"] = ax.get_xlabel() or None
    c["y_label"] = ax.get_ylabel() or None
    c["x_unit"] = _unit(ax.get_xlabel())
    c["y_unit"] = _unit(ax.get_ylabel())
    return c


def _ticks(ax, c):
    xs = _scale(ax.xaxis, ax.get_xscale())
    ys = _scale(ax.yaxis, ax.get_yscale())
    c["x_scale"], c["y_scale"] = xs, ys
    c["x_ticks"] = [_value(t, xs) for t in ax.get_xticks()]
    c["x_tick_labels"] = [t.get_text() for t in ax.get_xticklabels()]
    c["y_ticks"] = [_value(t, ys) for t in ax.get_yticks()]
    c["y_tick_labels"] = [t.get_text() for t in ax.get_yticklabels()]
    return xs, ys


def _chart_of_axes(ax):
    from matplotlib import collections, container, lines, patches

    base = {"title": ax.get_title() or None}
    boxes = ax.__dict__.get("_sandlot_boxes")
    if boxes:
        return _box_chart(ax, boxes, _axis_info(ax, dict(base, type="box_and_whisker")))
    bars = [b for b in ax.containers if isinstance(b, container.BarContainer)]
    wedges = [p for p in ax.patches if isinstance(p, patches.Wedge)]
    if bars:
        return _bar_chart(ax, bars, _axis_info(ax, dict(base, type="bar")))
    if wedges:
        return _pie_chart(wedges, dict(base, type="pie"))
    scatter = [s for s in ax.collections if isinstance(s, collections.PathCollection)]
    plotted = [l for l in ax.get_lines() if isinstance(l, lines.Line2D) and len(l.get_xdata()) > 0]
    if scatter and not plotted:
        c = _axis_info(ax, dict(base, type="scatter"))
        xs, ys = _ticks(ax, c)
        c["elements"] = [
            {"label": s.get_label(), "points": [[_value(x, xs), _value(y, ys)] for x, y in s.get_offsets()]} for s in scatter
        ]
        return c
    if plotted:
        c = _axis_info(ax, dict(base, type="line"))
        xs, ys = _ticks(ax, c)
        c["elements"] = [
            {"label": l.get_label(), "points": [[_value(x, xs), _value(y, ys)] for x, y in l.get_xydata()]} for l in plotted
        ]
        return c
    # Data E2B's extractor does not read (patches, images, text): a chart of
    # type unknown, with the title, as E2B reports it.
    return dict(base, type="unknown", elements=[])


def _bar_chart(ax, bars, c):
    horizontal = any(getattr(b, "orientation", None) == "horizontal" for b in bars)
    axis = ax.yaxis if horizontal else ax.xaxis
    ticks = list(axis.get_ticklocs())
    names = [t.get_text() for t in axis.get_ticklabels()]
    elements = []
    for b in bars:
        group = b.get_label()
        if group.startswith("_"):
            group = ""
        for r in b.patches:
            if horizontal:
                center, value = r.get_y() + r.get_height() / 2, r.get_width()
            else:
                center, value = r.get_x() + r.get_width() / 2, r.get_height()
            label = ""
            if ticks and len(names) == len(ticks):
                i = min(range(len(ticks)), key=lambda k: abs(ticks[k] - center))
                label = names[i]
            elements.append({"label": label, "value": _num(value), "group": group})
    c["elements"] = elements
    return c


def _box_chart(ax, boxes, c):
    elements = []
    for stats, horizontal in boxes:
        axis = ax.yaxis if horizontal else ax.xaxis
        names = [t.get_text() for t in axis.get_ticklabels()]
        for i, st in enumerate(stats):
            label = st.get("label")
            if label is None:
                label = names[i] if i < len(names) else str(i + 1)
            elements.append(
                {
                    "label": str(label),
                    "min": _num(st["whislo"]),
                    "first_quartile": _num(st["q1"]),
                    "median": _num(st["med"]),
                    "third_quartile": _num(st["q3"]),
                    "max": _num(st["whishi"]),
                    "outliers": [_num(v) for v in st.get("fliers", [])],
                }
            )
    c["elements"] = elements
    return c


def _pie_chart(wedges, c):
    c["elements"] = [{"label": w.get_label(), "angle": _num(_angle(w.theta2 - w.theta1)), "radius": _num(w.r)} for w in wedges]
    return c


def _angle(deg):
    # Wedge angles are float32 in matplotlib (323.99999141693115 for 90 %
    # of a pie, whose second wedge ends near 450, where a float32 step is
    # 3e-5): a thousandth of a degree is what they hold. E2B's figures are
    # whole for these pies.
    return round(abs(float(deg)), 3)
