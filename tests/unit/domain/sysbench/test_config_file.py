"""sysbench's --config-file: what the password line carries, and what it cannot."""

from __future__ import annotations

import pytest

from tidb_bench_operator.domain.sysbench.config_file import (
    MAX_PASSWORD_BYTES,
    config_line,
    uncarried,
)


def test_the_longest_password_is_what_sysbench_1_0_20_read_on_one_line() -> None:
    # Tried on sysbench 1.0.20: 238 characters quoted connect, 239 give "unexpected EOL".
    assert MAX_PASSWORD_BYTES == 238
    assert uncarried("x" * 238) is None
    assert uncarried("ä" * 119) is None  # 238 bytes of UTF-8
    assert uncarried("ä" * 120) == (
        "240 bytes of UTF-8, more than the 238 sysbench's config file can carry on one line"
    )


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("a b", 'mysql-password="a b"\n'),
        (" a ", 'mysql-password=" a "\n'),
        ("a'b", 'mysql-password="a\'b"\n'),
        ('a"b', "mysql-password='a\"b'\n"),
        ("a\\b#=;", 'mysql-password="a\\b#=;"\n'),
        ("", 'mysql-password=""\n'),
    ],
)
def test_values_are_quoted_with_the_quote_they_do_not_hold(value: str, line: str) -> None:
    assert config_line("mysql-password", value) == line


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("a\nb", "a newline"),
        ("a\x00b", "a NUL character"),
        ("a\"b'c", "both a double quote and a single quote"),
    ],
)
def test_what_cannot_be_carried_is_named_by_kind_never_by_value(value: str, kind: str) -> None:
    problem = uncarried(value)
    assert problem is not None and problem.startswith(kind)
    with pytest.raises(ValueError, match=kind) as info:
        config_line("mysql-password", value)
    assert value not in str(info.value)
