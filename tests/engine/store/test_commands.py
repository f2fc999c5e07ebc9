"""The decide call's bytes, and the recovery plan, without a server."""

from __future__ import annotations

import pytest
from redis.connection import PythonRespSerializer
from redis.exceptions import NoScriptError, OutOfMemoryError, ReadOnlyError, ResponseError

from ratelimits.engine.store import commands, scripts
from ratelimits.engine.store.commands import FUNCTION, SCRIPT

KEYS = ["rl:{ip:203.0.113.7}:items:log", "rl:{ip:203.0.113.7}:burst:log"]
ARGS = ["", "1", "sliding_log", "5", "60000", "1", "fixed_window", "100", "3600000", "0"]


def redis_py_packed(*args: object) -> bytes:
    """What redis-py itself sends for ``args``."""
    encode = lambda value: value if isinstance(value, bytes) else str(value).encode()  # noqa: E731
    return b"".join(PythonRespSerializer(6000, encode).pack(*args))


def call() -> commands.DecideCall:
    return commands.decide_call(KEYS, commands.bulk_strings(ARGS), len(ARGS))


@pytest.mark.parametrize(
    ("mode", "command", "target"),
    [(FUNCTION, "FCALL", scripts.function_name()), (SCRIPT, "EVALSHA", commands.script_sha())],
)
def test_a_call_is_the_command_redis_py_would_send(mode, command, target):
    expected = redis_py_packed(command, target, len(KEYS), *KEYS, *ARGS)
    assert commands.packed(mode, call()) == expected


def test_the_source_call_carries_the_whole_script():
    expected = redis_py_packed("EVAL", scripts.decide_source(), len(KEYS), *KEYS, *ARGS)
    assert commands.with_source(call()) == expected


def test_non_ascii_keys_are_counted_in_bytes():
    keys = ["rl:{user:zoë}:items:log"]
    packed = commands.packed(FUNCTION, commands.decide_call(keys, b"", 0))
    encoded = keys[0].encode()
    assert len(encoded) == len(keys[0]) + 1
    assert packed.endswith(b"$%d\r\n%b\r\n" % (len(encoded), encoded))


def play(plan: commands.Recovery, replies: list[object]) -> tuple[list[bytes], object]:
    """Run ``plan`` against ``replies``: what it sent, and what it returned."""
    sent = [next(plan)]
    try:
        for reply in replies:
            sent.append(plan.send(reply))
    except StopIteration as done:
        return sent, done.value
    raise AssertionError(f"the plan wanted more than {len(replies)} replies: {sent}")


def test_a_missing_function_is_loaded_then_called_again():
    plan = commands.recover(call(), FUNCTION, ResponseError("Function not found"))
    sent, result = play(plan, [b"ok", [1, 2]])
    assert sent == [commands.load_library(), commands.packed(FUNCTION, call())]
    assert result == ([1, 2], FUNCTION)


def test_a_library_another_worker_loaded_first_is_fine():
    plan = commands.recover(call(), FUNCTION, ResponseError("Function not found"))
    loaded_meanwhile = ResponseError("Library 'ratelimits_x' already exists")
    sent, result = play(plan, [loaded_meanwhile, [1, 2]])
    assert sent[1] == commands.packed(FUNCTION, call())
    assert result == ([1, 2], FUNCTION)


def test_a_function_flushed_again_before_the_retry_runs_the_source():
    plan = commands.recover(call(), FUNCTION, ResponseError("Function not found"))
    sent, result = play(plan, [b"ok", ResponseError("Function not found"), [1, 2]])
    assert sent[2] == commands.with_source(call())
    assert result == ([1, 2], FUNCTION)


def test_a_refused_load_switches_to_the_script():
    plan = commands.recover(call(), FUNCTION, ResponseError("Function not found"))
    refused = ResponseError("NOPERM this user has no permissions to run the 'function' command")
    sent, result = play(plan, [refused, [1, 2]])
    assert sent[1] == commands.with_source(call())
    assert result == ([1, 2], SCRIPT)


@pytest.mark.parametrize(
    "refusal",
    [
        OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        ResponseError("BUSY Redis is busy running a script. You can only call SCRIPT KILL"),
        ReadOnlyError("You can't write against a read only replica."),
    ],
)
def test_a_load_refused_for_now_is_raised_not_taken_for_a_server_without_functions(refusal):
    """A full, busy or replica server refuses FUNCTION LOAD as it refuses the call: it has
    Functions, and must not be called by EVALSHA for good after it recovers."""
    plan = commands.recover(call(), FUNCTION, ResponseError("Function not found"))
    assert next(plan) == commands.load_library()
    with pytest.raises(type(refusal)):
        plan.send(refusal)


def test_a_server_without_functions_switches_to_the_script():
    unknown = ResponseError("unknown command `FCALL`, with args beginning with: ")
    sent, result = play(commands.recover(call(), FUNCTION, unknown), [[1, 2]])
    assert sent == [commands.with_source(call())]
    assert result == ([1, 2], SCRIPT)


def test_a_flushed_script_runs_the_source():
    plan = commands.recover(call(), SCRIPT, NoScriptError("No matching script."))
    sent, result = play(plan, [[1, 2]])
    assert sent == [commands.with_source(call())]
    assert result == ([1, 2], SCRIPT)


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        (FUNCTION, ReadOnlyError("You can't write against a read only replica.")),
        (FUNCTION, ResponseError("ratelimits: unknown algorithm x")),
        (SCRIPT, ResponseError("Function not found")),  # not what a script call says
    ],
)
def test_other_errors_are_raised(mode, error):
    with pytest.raises(type(error)):
        next(commands.recover(call(), mode, error))


def test_an_error_from_the_source_call_is_raised():
    plan = commands.recover(call(), SCRIPT, NoScriptError("No matching script."))
    next(plan)
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        plan.send(ResponseError("WRONGTYPE Operation against a key holding the wrong kind"))


def look() -> commands.DecideCall:
    args = ["", "0", *ARGS[2:]]
    return commands.decide_call(KEYS, commands.bulk_strings(args), len(args), read_only=True)


def test_a_look_is_an_fcall_ro_of_the_peek_function_or_the_script():
    args = ["", "0", *ARGS[2:]]
    peek = redis_py_packed("FCALL_RO", scripts.peek_function_name(), len(KEYS), *KEYS, *args)
    assert commands.packed(FUNCTION, look()) == peek
    by_sha = redis_py_packed("EVALSHA", commands.script_sha(), len(KEYS), *KEYS, *args)
    assert commands.packed(SCRIPT, look()) == by_sha  # no EVALSHA_RO on Redis 6.2


def test_the_library_registers_the_peek_function_no_writes():
    source = scripts.library_source()
    assert f"function_name='{scripts.peek_function_name()}'" in source
    assert "flags={'no-writes'}" in source


def test_a_look_refused_fcall_ro_by_an_acl_is_sent_as_a_request_would_be():
    denied = ResponseError("NOPERM this user has no permissions to run the 'fcall_ro' command")
    as_fcall = commands.DecideCall(look().keys, look().parts, look().body)
    sent, result = play(commands.recover(look(), FUNCTION, denied), [[1, 2]])
    assert sent == [commands.packed(FUNCTION, as_fcall)]
    assert result == ([1, 2], FUNCTION)
    # Missing there too, recovered as a request's call.
    plan = commands.recover(look(), FUNCTION, denied)
    sent, result = play(plan, [ResponseError("Function not found"), b"ok", [1, 2]])
    assert sent[1:] == [commands.load_library(), commands.packed(FUNCTION, as_fcall)]


@pytest.mark.parametrize(
    "refusal",
    [
        OutOfMemoryError("command not allowed when used memory > 'maxmemory'."),
        ReadOnlyError("You can't write against a read only replica."),
    ],
)
def test_a_look_whose_load_is_refused_for_now_runs_the_source(refusal):
    plan = commands.recover(look(), FUNCTION, ResponseError("Function not found"))
    sent, result = play(plan, [refusal, [1, 2]])
    assert sent[1] == commands.with_source(look())
    assert result == ([1, 2], FUNCTION)
