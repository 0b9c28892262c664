"""sysbench's --config-file: how the runner carries the password, and what cannot be carried.

The runner never puts the password in argv (any process could read it); it writes it to a
private `--config-file`. sysbench 1.0.20 reads that file line by line as `option=value`
and cuts a bare value at whitespace, so the value is quoted. Tried against sysbench 1.0.20
and MariaDB 10.11 (users created with each password, `sysbench ... cleanup` connecting):

- a double-quoted value keeps spaces (leading and trailing too), tabs, `#`, `=`, `;`, `'`,
  backslashes (taken literally: there are no escapes), carriage returns and non-ASCII text;
- a single-quoted value does the same and may hold `"`; there is no way to hold both quote
  kinds at once;
- a line is at most 255 bytes: `mysql-password="` + `"` leave 238 bytes of UTF-8 for the
  value; a longer line fails with "unexpected EOL";
- a newline ends the line; a NUL cannot be in an environment variable at all.

`uncarried` names the kind of character (never the value) for the admission check, so a
password sysbench cannot take fails at Pending rather than as "Access denied" in a Job.
"""

from __future__ import annotations

#: The option sysbench's MySQL driver reads the password from.
PASSWORD_OPTION = "mysql-password"
#: sysbench 1.0.20 reads config lines into a 256-byte buffer: 255 bytes with the newline cut.
MAX_LINE_BYTES = 255
#: The longest password (UTF-8 bytes) one double- or single-quoted line can carry.
MAX_PASSWORD_BYTES = MAX_LINE_BYTES - len(PASSWORD_OPTION) - len('=""')


def uncarried(value: str) -> str | None:
    """Why sysbench's config file cannot carry `value`, as the kind of problem; None if it can."""
    if "\x00" in value:
        return "a NUL character"
    if "\n" in value:
        return "a newline"
    if '"' in value and "'" in value:
        return "both a double quote and a single quote (sysbench's config file quotes with one)"
    size = len(value.encode("utf-8"))
    if size > MAX_PASSWORD_BYTES:
        return (
            f"{size} bytes of UTF-8, more than the {MAX_PASSWORD_BYTES} sysbench's config "
            f"file can carry on one line"
        )
    return None


def config_line(option: str, value: str) -> str:
    """`option="value"` (or single-quoted when the value has a `"`), with the newline.

    Raises ValueError naming the kind of problem (never the value) when it cannot be carried.
    """
    problem = uncarried(value)
    if problem is not None:
        raise ValueError(f"the value of {option} has {problem}")
    quote = "'" if '"' in value else '"'
    return f"{option}={quote}{value}{quote}\n"
