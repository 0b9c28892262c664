"""Kubernetes quantities as numbers: "250m" cores, "1234567n" cores, "123Ki" bytes."""

from __future__ import annotations

import math
import re

from tidb_bench_operator.domain.api.common import QUANTITY

# The suffixes of apimachinery's resource.Quantity (pkg/api/resource/suffix.go): binary
# powers of 1024, decimal powers of 10; the resource metrics API writes CPU in n (nanocores)
# and memory in Ki (https://github.com/kubernetes-sigs/metrics-server/blob/master/FAQ.md).
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_SPLIT = re.compile(r"([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)")


def parse_quantity(text: object) -> float | None:
    """A quantity ("250m", "2", "1.5", "4Gi", "1e3"; YAML's bare 2) as a finite number, else
    None."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text) if math.isfinite(text) else None
    if not isinstance(text, str) or len(text) > 64 or not re.fullmatch(QUANTITY, text):
        return None
    match = _SPLIT.fullmatch(text)
    if match is None:
        return None
    number, suffix = float(match.group(1)), match.group(2)
    if suffix in _BINARY:
        value = number * 1024.0 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value = number * 10.0 ** _DECIMAL[suffix]
    else:  # an exponent, e.g. "1e3"
        try:
            value = number * 10.0 ** float(suffix[1:])
        except OverflowError:
            return None
    return value if math.isfinite(value) else None
