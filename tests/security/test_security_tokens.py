"""producers.token: data tokens bound to task, user and expiry."""
from __future__ import annotations

import pytest

from plait.tokens import DataTokenError, mint_data_token, verify_data_token

SECRET = "data-secret-" + "d" * 32
TASK = "0193a1b2c3d4e5f60718293a4b5c6d7e"
EXP = 1_750_003_600


def _reason(token, task=TASK, user="alice", now=EXP - 1, secret=SECRET):
    with pytest.raises(DataTokenError) as err:
        verify_data_token(secret, token, task, user, now)
    return err.value.reason


def test_a_fresh_token_verifies():
    # given a token minted for TASK/alice, when verified before expiry, then no error
    token = mint_data_token(SECRET, TASK, "alice", EXP)
    verify_data_token(SECRET, token, TASK, "alice", EXP - 1)
    assert token.startswith(f"v1.{TASK}.{EXP}.") and SECRET not in token


def test_an_expired_token_is_refused_at_and_after_expiry():
    token = mint_data_token(SECRET, TASK, "alice", EXP)
    assert _reason(token, now=EXP) == "expired"
    assert _reason(token, now=EXP + 3600) == "expired"


def test_a_token_for_another_task_is_refused():
    # given a genuine token of another task, when presented for TASK, then wrong task
    other = mint_data_token(SECRET, "ffff" + TASK[4:], "alice", EXP)
    assert _reason(other) == "wrong task"


def test_a_token_for_another_user_is_refused():
    token = mint_data_token(SECRET, TASK, "alice", EXP)
    assert _reason(token, user="mallory") == "bad signature"


@pytest.mark.parametrize("tamper", [
    lambda t: t.replace(f".{EXP}.", f".{EXP + 86400}."),          # extend the expiry
    lambda t: t.replace(TASK, "ffff" + TASK[4:]),                 # move to another task
    lambda t: t[:-1] + ("0" if t[-1] != "0" else "1"),            # flip a MAC digit
])
def test_tampered_tokens_are_refused(tamper):
    token = tamper(mint_data_token(SECRET, TASK, "alice", EXP))
    assert _reason(token, task=token.split(".")[1]) == "bad signature"


def test_a_token_of_another_caller_secret_is_refused():
    token = mint_data_token("another-secret-" + "o" * 30, TASK, "alice", EXP)
    assert _reason(token) == "bad signature"


@pytest.mark.parametrize("token", ["", "garbage", f"v2.{TASK}.{EXP}.{'a' * 64}",
                                   f"v1.{TASK}.{EXP}.{'A' * 64}", f"v1.{TASK}.-1.{'a' * 64}",
                                   None])
def test_malformed_tokens_are_refused(token):
    assert _reason(token) == "malformed"


def test_task_ids_outside_the_safe_alphabet_cannot_be_minted():
    with pytest.raises(ValueError):
        mint_data_token(SECRET, "a.b", "alice", EXP)


def test_the_error_message_never_contains_the_token_or_secret():
    token = mint_data_token(SECRET, TASK, "alice", EXP)
    with pytest.raises(DataTokenError) as err:
        verify_data_token(SECRET, token, TASK, "bob", EXP - 1)
    assert token not in str(err.value) and SECRET not in str(err.value)


def test_a_refused_token_is_an_auth_error_of_the_one_tree():
    from plait.errors import AuthError, PlaitError

    with pytest.raises(DataTokenError) as err:
        verify_data_token(SECRET, "garbage", "t1", "alice", 0)
    assert isinstance(err.value, AuthError) and isinstance(err.value, PlaitError)
    assert isinstance(err.value, ValueError) and err.value.status == 401
