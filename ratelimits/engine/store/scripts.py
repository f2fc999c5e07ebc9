"""Loads the Lua files and assembles the one script every request runs.

The files are data: ``lua/*.lua`` at the top of the source tree, installed as the
``ratelimits.lua`` package data in a wheel. The decide script is the concatenation of
:data:`DECIDE_PARTS`; see ``lua/prelude.lua`` for the contract between the parts.
"""

from __future__ import annotations

import functools
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

DECIDE_PARTS = (
    "prelude.lua",
    "sliding_log.lua",
    "compact_log.lua",
    "sliding_counter.lua",
    "fixed_window.lua",
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
def decide_source() -> str:
    """The assembled source of the decide script."""
    folder = lua_dir()
    return "\n".join(folder.joinpath(name).read_text(encoding="utf-8") for name in DECIDE_PARTS)
