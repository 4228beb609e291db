def _sandlot_emit(out, output_format):
    """Print an analysis result in output_format (json, csv or text).

    out is a dict: "json" (the object), "columns" and "rows" (the table
    form, for csv) and "text" (the human form).
    """
    import csv as _csv
    import json as _json
    import math as _math
    import sys as _sys

    def clean(v):
        # JSON has no NaN/Infinity; numpy scalars become Python numbers.
        if isinstance(v, dict):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        if hasattr(v, "item") and not isinstance(v, (str, bytes)):
            v = v.item()
        if isinstance(v, float) and (_math.isnan(v) or _math.isinf(v)):
            return None
        return v

    if output_format == "csv":
        w = _csv.writer(_sys.stdout, lineterminator="\n")
        w.writerow(out["columns"])
        for row in out["rows"]:
            w.writerow(["" if x is None else x for x in clean(row)])
    elif output_format == "text":
        print(out["text"])
    else:
        print(_json.dumps(clean(out["json"]), allow_nan=False, ensure_ascii=False))
