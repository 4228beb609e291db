def _sandlot_run(params):
    """Progressive tax: each bracket taxes the part of the taxable income
    between the previous bracket's upTo and its own upTo at its rate.

    params: {income, brackets: [{upTo (null = no upper bound), rate}],
    deductions?: number | [number | {amount}]}. A rate above 1 is read as a
    percentage (20 = 20%).
    """
    import math

    def num(v, name):
        if isinstance(v, bool) or v is None:
            raise ValueError("tax_calculation: %s must be a number" % name)
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError("tax_calculation: %s must be a number, got %r" % (name, v)) from None
        if math.isnan(f) or math.isinf(f):
            raise ValueError("tax_calculation: %s must be finite" % name)
        return f

    if not isinstance(params, dict) or "income" not in params:
        raise ValueError("tax_calculation: parameters.income is required")
    income = num(params["income"], "parameters.income")
    brackets = params.get("brackets")
    if not isinstance(brackets, list) or not brackets:
        raise ValueError("tax_calculation: parameters.brackets must be a non-empty list of {upTo, rate}")
    ded = params.get("deductions", 0) or 0
    if isinstance(ded, list):
        deductions = 0.0
        for i, d in enumerate(ded):
            if isinstance(d, dict):
                d = d.get("amount")
            deductions += num(d, "parameters.deductions[%d]" % i)
    else:
        deductions = num(ded, "parameters.deductions")
    if deductions < 0:
        raise ValueError("tax_calculation: parameters.deductions must not be negative")
    taxable = max(0.0, income - deductions)

    lower, total, marginal, per = 0.0, 0.0, 0.0, []
    for i, b in enumerate(brackets):
        if not isinstance(b, dict) or "rate" not in b:
            raise ValueError("tax_calculation: brackets[%d] must be an object {upTo, rate}" % i)
        rate = num(b["rate"], "brackets[%d].rate" % i)
        if rate < 0:
            raise ValueError("tax_calculation: brackets[%d].rate must not be negative" % i)
        if rate > 1:
            rate = rate / 100.0
        up = b.get("upTo")
        if up is None:
            if i != len(brackets) - 1:
                raise ValueError("tax_calculation: only the last bracket may have upTo null (brackets[%d])" % i)
            upper = math.inf
        else:
            upper = num(up, "brackets[%d].upTo" % i)
            if upper <= lower:
                raise ValueError("tax_calculation: brackets must be in increasing order of upTo (brackets[%d])" % i)
        amount = max(0.0, min(taxable, upper) - lower)
        tax = amount * rate
        if taxable > lower:
            marginal = rate
        total += tax
        per.append({
            "from": lower,
            "upTo": None if upper == math.inf else upper,
            "rate": rate,
            "taxableAmount": round(amount, 2),
            "tax": round(tax, 2),
        })
        lower = upper
    if taxable > lower:
        raise ValueError("tax_calculation: income above %s is not covered; give the last bracket upTo null" % lower)

    total = round(total, 2)
    result = {
        "income": income,
        "deductions": round(deductions, 2),
        "taxableIncome": round(taxable, 2),
        "totalTax": total,
        "effectiveRate": round(total / income, 6) if income > 0 else 0.0,
        "marginalRate": marginal,
        "netIncome": round(income - total, 2),
        "perBracket": per,
    }
    columns = ["from", "upTo", "rate", "taxableAmount", "tax"]
    rows = [[p[c] for c in columns] for p in per]
    lines = ["Taxable income: %.2f (income %.2f - deductions %.2f)" % (taxable, income, deductions)]
    for p in per:
        top = "and above" if p["upTo"] is None else "to %.2f" % p["upTo"]
        lines.append("  %.2f %s at %.2f%%: %.2f on %.2f" % (p["from"], top, p["rate"] * 100, p["tax"], p["taxableAmount"]))
    lines.append("Total tax: %.2f (effective rate %.2f%%)" % (total, result["effectiveRate"] * 100))
    return {"json": result, "columns": columns, "rows": rows, "text": "\n".join(lines)}
