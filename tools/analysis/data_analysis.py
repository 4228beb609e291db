def _sandlot_run(params):
    """Summary statistics per numeric column: count, mean, std (sample),
    min, quartiles (linear interpolation, as pandas) and max.

    params: {rows: [{col: value}] or [[header...], [values...]...]} or
    {path: "data.csv"}; columns?: [names] to restrict; engine?: auto
    (pandas when importable), pandas or python. Numbers in JSON rows are
    numeric, strings are not; in a CSV file a column is numeric when every
    non-empty cell parses as a number.
    """
    import csv
    import math

    if not isinstance(params, dict):
        raise ValueError("data_analysis: parameters must be an object")
    rows, path = params.get("rows"), params.get("path")
    want = params.get("columns")
    engine = params.get("engine", "auto")
    if engine not in ("auto", "pandas", "python"):
        raise ValueError("data_analysis: parameters.engine must be auto, pandas or python")
    if (rows is None) == (path is None):
        raise ValueError("data_analysis: give exactly one of parameters.rows (a list of objects) or parameters.path (a CSV file)")
    if rows is not None and not isinstance(rows, list):
        raise ValueError("data_analysis: parameters.rows must be a list")
    if path is not None and not isinstance(path, str):
        raise ValueError("data_analysis: parameters.path must be a string")
    if want is not None and (not isinstance(want, list) or not all(isinstance(c, str) for c in want)):
        raise ValueError("data_analysis: parameters.columns must be a list of column names")
    if rows and all(isinstance(r, list) for r in rows):
        header = [str(h) for h in rows[0]]
        rows = [dict(zip(header, r)) for r in rows[1:]]
    elif rows is not None and not all(isinstance(r, dict) for r in rows):
        raise ValueError("data_analysis: parameters.rows must be objects, or lists with a header row first")

    pd = None
    if engine != "python":
        try:
            import pandas as pd
        except ImportError:
            if engine == "pandas":
                raise ValueError("data_analysis: engine pandas requested but pandas is not installed") from None

    def pick(names):
        if want is None:
            return names
        unknown = [c for c in want if c not in names]
        if unknown:
            raise ValueError("data_analysis: unknown columns: %s" % ", ".join(unknown))
        return [c for c in names if c in want]

    stats = {}
    if pd is not None:
        used = "pandas"
        df = pd.DataFrame(rows) if rows is not None else pd.read_csv(path)
        names = pick([str(c) for c in df.columns])
        df.columns = [str(c) for c in df.columns]
        df = df[names]
        nrows = len(df)
        numeric = [c for c in names if c in set(df.select_dtypes(include="number").columns)]
        for c in numeric:
            s = df[c].dropna().astype(float)
            q = s.quantile([0.25, 0.5, 0.75]) if len(s) else None
            stats[c] = {
                "count": int(len(s)),
                "mean": float(s.mean()) if len(s) else None,
                "std": float(s.std()) if len(s) > 1 else None,
                "min": float(s.min()) if len(s) else None,
                "25%": float(q.iloc[0]) if len(s) else None,
                "50%": float(q.iloc[1]) if len(s) else None,
                "75%": float(q.iloc[2]) if len(s) else None,
                "max": float(s.max()) if len(s) else None,
            }
    else:
        used = "python"
        na = {"", "na", "nan", "n/a", "null", "none", "-nan", "#n/a"}
        if rows is None:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                recs = list(reader)
                names = list(reader.fieldnames or [])
            from_csv = True
        else:
            recs, names, seen = rows, [], set()
            for r in rows:
                for k in r:
                    if str(k) not in seen:
                        seen.add(str(k))
                        names.append(str(k))
            recs = [{str(k): v for k, v in r.items()} for r in rows]
            from_csv = False
        names = pick(names)
        nrows = len(recs)
        numeric = []
        for c in names:
            vals, ok = [], True
            for r in recs:
                v = r.get(c)
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    continue
                if from_csv:
                    if v.strip().lower() in na:
                        continue
                    try:
                        vals.append(float(v))
                    except ValueError:
                        ok = False
                        break
                elif isinstance(v, (int, float)) and not isinstance(v, bool):
                    vals.append(float(v))
                else:
                    ok = False
                    break
            if not ok or not vals:
                continue
            numeric.append(c)
            vals.sort()
            n = len(vals)
            mean = sum(vals) / n

            def quantile(p):
                pos = (n - 1) * p
                lo, hi = math.floor(pos), math.ceil(pos)
                return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)

            stats[c] = {
                "count": n,
                "mean": mean,
                "std": math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else None,
                "min": vals[0],
                "25%": quantile(0.25),
                "50%": quantile(0.5),
                "75%": quantile(0.75),
                "max": vals[-1],
            }

    keys = ["count", "mean", "std", "min", "25%", "50%", "75%", "max"]
    result = {"engine": used, "rowCount": nrows, "columns": names, "numericColumns": numeric, "stats": stats}
    table = [[c] + [stats[c][k] for k in keys] for c in numeric]

    def fmt(v):
        if v is None:
            return "-"
        if isinstance(v, int):
            return str(v)
        return "%.6g" % v

    cells = [["column"] + keys] + [[r[0]] + [fmt(v) for v in r[1:]] for r in table]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["%d rows, %d columns, %d numeric (engine %s)" % (nrows, len(names), len(numeric), used)]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in cells]
    return {"json": result, "columns": ["column"] + keys, "rows": table, "text": "\n".join(lines)}
