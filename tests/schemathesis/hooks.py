"""Schemathesis hooks for Leasehold's API run (tests/run).

A page cursor (`after`) is sealed by the server: no generator can make a
valid one, so a schema-valid `after` made up by the fuzzer is rightly
refused (400). Cases that give one are kept for negative testing only,
where a refusal is what is expected; every other field is held to the
document both ways.
"""

import schemathesis


@schemathesis.hook
def filter_case(ctx, case):
    mode = getattr(getattr(getattr(case, "meta", None), "generation", None), "mode", None)
    positive = mode is None or getattr(mode, "is_positive", False)
    if positive and case.query and "after" in case.query:
        return False
    return True
