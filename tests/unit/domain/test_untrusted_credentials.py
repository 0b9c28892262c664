"""domain.untrusted.hide_credentials: a user or password from a Secret never reaches a text."""

from __future__ import annotations

from tidb_bench_operator.domain.untrusted import hide_credentials

PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"


def test_the_quoted_account_is_hidden_and_other_words_are_kept() -> None:
    text = "Access denied for user 'sbtest'@'10.0.0.5' (using password: YES); table 'sbtest1'"
    assert hide_credentials(text, "sbtest") == (
        "Access denied for user '<user>'@'10.0.0.5' (using password: YES); table 'sbtest1'"
    )


def test_a_user_the_server_cut_short_is_hidden_too() -> None:
    user = "tok-" + "a" * 200
    text = f"Access denied for user '{user[:80]}'@'10.0.0.5'"
    assert hide_credentials(text, user) == "Access denied for user '<user>'@'10.0.0.5'"


def test_a_whole_pem_as_user_is_hidden() -> None:
    text = f"Access denied for user '{PEM}'@'h'"
    assert "PRIVATE KEY" not in hide_credentials(text, PEM)


def test_a_password_is_hidden_wherever_it_occurs_but_a_short_one_is_left() -> None:
    assert hide_credentials("x s3cret-pw y", "", "s3cret-pw") == "x <password> y"
    assert hide_credentials("a b c", "", "b") == "a b c"
