def _sandlot_run(params):
    """Evaluate rules against one record.

    params: {record: {...}, rules: [{id, field (dotted path), op, value,
    severity?}]}. ops: eq, ne, gt, gte, lt, lte, in, not_in, regex,
    required. A missing field fails every op. gt/gte/lt/lte compare numbers
    with numbers and strings with strings (ISO dates compare correctly).
    """
    import re

    ops = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in", "regex", "required")
    missing = object()

    if not isinstance(params, dict):
        raise ValueError("compliance_check: parameters must be an object")
    record = params.get("record")
    if not isinstance(record, dict):
        raise ValueError("compliance_check: parameters.record must be an object")
    rules = params.get("rules")
    if not isinstance(rules, list) or not rules:
        raise ValueError("compliance_check: parameters.rules must be a non-empty list")

    def get(path):
        cur = record
        for part in str(path).split("."):
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
                cur = cur[int(part)]
            else:
                return missing
        return cur

    def is_num(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    def compare(op, a, b):
        if not ((is_num(a) and is_num(b)) or (isinstance(a, str) and isinstance(b, str))):
            return None
        return {"gt": a > b, "gte": a >= b, "lt": a < b, "lte": a <= b}[op]

    results = []
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict):
            raise ValueError("compliance_check: rules[%d] must be an object" % i)
        rid = str(rule.get("id") or "rule%d" % (i + 1))
        field = rule.get("field")
        op = rule.get("op")
        if not isinstance(field, str) or not field:
            raise ValueError("compliance_check: rules[%d].field must be a non-empty string" % i)
        if op not in ops:
            raise ValueError("compliance_check: rules[%d].op must be one of %s" % (i, ", ".join(ops)))
        value = rule.get("value")
        if op in ("in", "not_in") and not isinstance(value, list):
            raise ValueError("compliance_check: rules[%d].value must be a list for op %s" % (i, op))
        if op == "regex":
            if not isinstance(value, str):
                raise ValueError("compliance_check: rules[%d].value must be a regular expression string" % i)
            try:
                pattern = re.compile(value)
            except re.error as e:
                raise ValueError("compliance_check: rules[%d].value is not a valid regex: %s" % (i, e)) from None
        actual = get(field)
        if op == "required":
            passed = actual is not missing and actual is not None and actual != "" and actual != [] and actual != {}
            message = "present" if passed else "%s is missing or empty" % field
        elif actual is missing:
            passed, message = False, "%s is missing" % field
        elif op == "eq":
            passed = actual == value
            message = "%s = %r, expected %r" % (field, actual, value)
        elif op == "ne":
            passed = actual != value
            message = "%s = %r, expected anything but %r" % (field, actual, value)
        elif op in ("gt", "gte", "lt", "lte"):
            c = compare(op, actual, value)
            if c is None:
                passed, message = False, "%s = %r cannot be compared with %r" % (field, actual, value)
            else:
                sym = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[op]
                passed, message = c, "%s = %r, expected %s %r" % (field, actual, sym, value)
        elif op == "in":
            passed = actual in value
            message = "%s = %r, expected one of %r" % (field, actual, value)
        elif op == "not_in":
            passed = actual not in value
            message = "%s = %r, expected none of %r" % (field, actual, value)
        else:  # regex
            passed = pattern.search(str(actual)) is not None
            message = "%s = %r, expected to match %r" % (field, actual, value)
        r = {
            "id": rid,
            "field": field,
            "op": op,
            "expected": value,
            "actual": None if actual is missing else actual,
            "passed": bool(passed),
            "message": message,
        }
        if "severity" in rule:
            r["severity"] = rule["severity"]
        results.append(r)

    npass = sum(1 for r in results if r["passed"])
    summary = {
        "total": len(results),
        "passed": npass,
        "failed": len(results) - npass,
        "compliant": npass == len(results),
        "passRate": round(npass / len(results), 6),
    }
    columns = ["id", "field", "op", "passed", "message"]
    rows = [[r["id"], r["field"], r["op"], "pass" if r["passed"] else "fail", r["message"]] for r in results]
    lines = ["%s %s: %s" % ("PASS" if r["passed"] else "FAIL", r["id"], r["message"]) for r in results]
    lines.append("%d of %d rules passed%s" % (npass, len(results), "" if summary["compliant"] else "; NOT compliant"))
    return {"json": {"compliant": summary["compliant"], "summary": summary, "results": results},
            "columns": columns, "rows": rows, "text": "\n".join(lines)}
