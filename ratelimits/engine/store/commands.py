"""The decide call as bytes on the wire, and what to send when a server lacks its code.

Nothing here does I/O: a client (sync in :mod:`ratelimits.engine.store.caller`, or an
async twin) sends the bytes and feeds the replies back. The call's body (keys, then
arguments) is built once per request from parts each policy prepared ahead
(:func:`bulk_strings`); only the command in front of it depends on how the server runs
the code (:data:`FUNCTION` or :data:`SCRIPT`), and on whether the call only looks: a look
is an ``FCALL_RO`` of the function registered ``no-writes``, which a server refusing
writes still runs. Redis 6.2 has no ``EVALSHA_RO``: there a look is the ``EVALSHA`` a
request sends.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from ratelimits.engine.store import errors, scripts

#: Redis 7+: the library is loaded once (``FUNCTION LOAD``), each request is an ``FCALL``
#: (a look an ``FCALL_RO``).
FUNCTION = "function"
#: Servers without Functions (Redis 6.2): ``EVALSHA`` of the cached script.
SCRIPT = "script"


def bulk(value: bytes) -> bytes:
    """One RESP bulk string."""
    return b"$%d\r\n%b\r\n" % (len(value), value)


def bulk_strings(values: Iterable[str]) -> bytes:
    """``values`` as consecutive RESP bulk strings (UTF-8)."""
    encoded = [value.encode() for value in values]
    return b"".join([b"$%d\r\n%b\r\n" % (len(value), value) for value in encoded])


@dataclass(slots=True)  # one per request: read-only by contract, not frozen (cheaper)
class DecideCall:
    """One decide call: ``body`` holds ``parts`` bulk strings, the ``keys`` keys first;
    ``read_only``: it only looks (its second argument is ``"0"``)."""

    keys: int
    parts: int
    body: bytes
    read_only: bool = False


def decide_call(
    keys: list[str], arguments: bytes, argument_count: int, *, read_only: bool = False
) -> DecideCall:
    """The call for ``keys`` with ``argument_count`` arguments already packed."""
    body = bulk_strings(keys) + arguments
    return DecideCall(len(keys), len(keys) + argument_count, body, read_only)


@functools.cache
def _header(mode: str, keys: int, parts: int, read_only: bool) -> bytes:
    if mode == FUNCTION and read_only:
        command, target = b"FCALL_RO", scripts.peek_function_name().encode()
    elif mode == FUNCTION:
        command, target = b"FCALL", scripts.function_name().encode()
    else:
        command, target = b"EVALSHA", script_sha().encode()
    return b"*%d\r\n%b%b%b" % (3 + parts, bulk(command), bulk(target), bulk(b"%d" % keys))


def packed(mode: str, call: DecideCall) -> bytes:
    """The bytes that send ``call`` to a server running the code as ``mode``."""
    return _header(mode, call.keys, call.parts, call.read_only) + call.body


def with_source(call: DecideCall) -> bytes:
    """``EVAL`` of the whole script: runs ``call`` on any server, with or without the
    code loaded, and leaves the script cached for ``EVALSHA``."""
    source = scripts.decide_source().encode()
    head = b"*%d\r\n%b%b%b" % (3 + call.parts, bulk(b"EVAL"), bulk(source), bulk(b"%d" % call.keys))
    return head + call.body


@functools.cache
def script_sha() -> str:
    """The SHA1 of the decide script, as ``EVALSHA`` names it."""
    return hashlib.sha1(scripts.decide_source().encode(), usedforsecurity=False).hexdigest()


@functools.cache
def load_library() -> bytes:
    """``FUNCTION LOAD`` of this release's library."""
    source = scripts.library_source().encode()
    return b"*3\r\n%b%b%b" % (bulk(b"FUNCTION"), bulk(b"LOAD"), bulk(source))


#: What a client sends into :func:`recover`: a reply, or the error Redis answered.
Reply = Any
#: :func:`recover`'s plan: yields commands to send, returns ``(reply, mode)``.
Recovery = Generator[bytes, Reply, tuple[Reply, str]]


def recover(call: DecideCall, mode: str, error: ResponseError) -> Recovery:
    """What to send after ``error`` answered ``call`` sent as ``mode``; returns the call's
    reply and the mode to use from now on. Raises ``error`` when it is not about the
    code being missing (a script error, a read-only replica, a cluster redirection).

    - The function is not there (``FUNCTION FLUSH``, a restart, a fresh server): load
      the library and call again; flushed again in between, run the source. A load the
      server refuses for now (full, busy, loading, a replica: see
      :mod:`ratelimits.engine.store.errors`) is raised: it does not mean the server has
      no Functions, and the next call loads it again. A look runs the source instead.
    - The server has no Functions (before Redis 7), or refuses to load or call them (an
      ACL's ``NOPERM``, a managed service): from now on the script, starting with its
      source. Refused that too, the ``NOPERM`` is raised: an outage for the breaker (see
      :mod:`ratelimits.engine.store.errors`).
    - The script is not cached (``SCRIPT FLUSH``, a restart): run the source, which
      caches it again.
    - A look's ``FCALL_RO`` refused by an ACL (one written before this release, with
      ``+fcall`` alone): the look as a request sends it, ``FCALL`` of the decide
      function, recovered as such. The mode stays :data:`FUNCTION`.
    """
    message = str(error)
    if mode == FUNCTION and call.read_only and _is_denied(error):
        return (yield from _as_request(call))
    if mode == FUNCTION and _is_missing_function(message):
        loaded = yield load_library()
        if isinstance(loaded, ResponseError) and errors.code_of(loaded) not in (None, "NOPERM"):
            if call.read_only:  # the source, which writes nothing, runs there
                return (yield from _run_source(call)), FUNCTION
            raise loaded  # refused for now; an ACL's NOPERM is for good: the script
        if isinstance(loaded, ResponseError) and "already exists" not in str(loaded):
            return (yield from _run_source(call)), SCRIPT
        reply = yield packed(FUNCTION, call)
        if isinstance(reply, ResponseError) and _is_missing_function(str(reply)):
            reply = yield with_source(call)
        return _checked(reply), FUNCTION
    if mode == FUNCTION and (_is_unknown_command(message) or _is_denied(error)):
        return (yield from _run_source(call)), SCRIPT
    if mode == SCRIPT and isinstance(error, NoScriptError):
        return (yield from _run_source(call)), SCRIPT
    raise error


def _as_request(look: DecideCall) -> Recovery:
    """``look`` sent as ``FCALL`` of the decide function, and its recovery."""
    call = dataclasses.replace(look, read_only=False)
    reply = yield packed(FUNCTION, call)
    if isinstance(reply, ResponseError):
        return (yield from recover(call, FUNCTION, reply))
    return reply, FUNCTION


def _run_source(call: DecideCall) -> Generator[bytes, Reply, Reply]:
    return _checked((yield with_source(call)))


def _checked(reply: Reply) -> Reply:
    if isinstance(reply, ResponseError):
        raise reply
    return reply


def _is_missing_function(message: str) -> bool:
    return message.startswith("Function not found")


def _is_denied(error: ResponseError) -> bool:
    """An ACL's refusal (``NOPERM``): of ``FCALL`` here, the script may still be let run."""
    return errors.is_denied(error)


def _is_unknown_command(message: str) -> bool:
    return message.lower().startswith("unknown command")
