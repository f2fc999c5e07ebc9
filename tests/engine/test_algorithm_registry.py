"""The Python registry of algorithms (ratelimits/engine/algorithms.py) and Lua's
(``ALGORITHMS`` in lua/prelude.lua, one entry per algorithm file) name the same
algorithms with the same flags, and everything keyed by algorithm covers them all."""

from __future__ import annotations

import re

from ratelimits.choices import AlgorithmChoice
from ratelimits.engine import algorithms
from ratelimits.engine.keys import names as keys
from ratelimits.engine.store.scripts import DECIDE_PARTS, lua_dir
from ratelimits.tools import memory

ENTRY = re.compile(r"^ALGORITHMS\.(\w+) = \{\n(.*?)^\}", re.MULTILINE | re.DOTALL)
FLAG = re.compile(r"^\s*(\w+) = true,", re.MULTILINE)


def lua_registry() -> dict[str, set[str]]:
    """Each entry Lua's algorithm files add to ``ALGORITHMS``, with its flags set true."""
    found: dict[str, set[str]] = {}
    for path in lua_dir().iterdir():
        if path.name.endswith(".lua"):
            for name, body in ENTRY.findall(path.read_text(encoding="utf-8")):
                found[name] = set(FLAG.findall(body))
    return found


def test_python_and_lua_register_the_same_algorithms():
    assert set(lua_registry()) == set(algorithms.NAMES)


def test_each_algorithm_has_the_flags_of_its_lua_entry():
    for name, flags in lua_registry().items():
        entry = algorithms.get(name)
        mirrored = {"bursts": entry.bursts, "released": entry.released, "calendar": entry.calendar}
        assert {flag for flag, on in mirrored.items() if on} == flags & set(mirrored), name


def test_each_algorithm_file_is_loaded():
    assert [f"{name}.lua" for name in algorithms.NAMES] == [
        part for part in DECIDE_PARTS if part[:-4] in algorithms.NAMES
    ]


def test_the_model_offers_every_algorithm_by_its_label():
    assert AlgorithmChoice.choices == algorithms.choices()
    assert AlgorithmChoice.TOKEN_BUCKET == "token_bucket"


def test_every_algorithm_has_a_key_suffix_of_its_own():
    suffixes = [a.suffix for a in algorithms.ALGORITHMS]
    assert len({*suffixes, keys.LOCK_SUFFIX}) == len(suffixes) + 1
    for algorithm in algorithms.ALGORITHMS:
        key = keys.build_key("rl", "ip:1.2.3.4", "p", algorithm.name)
        assert keys.parse_key(key, "rl").algorithm == algorithm.name


def test_every_algorithm_has_memory_and_work_figures():
    assert set(memory.FIGURES) == set(algorithms.NAMES)
    assert set(memory.WORK) == set(algorithms.NAMES)


def test_the_capacity_is_the_burst_only_for_an_algorithm_with_bursts():
    for algorithm in algorithms.ALGORITHMS:
        assert algorithm.capacity_slot == (4 if algorithm.bursts else 1)
        assert algorithms.capacity_slot(algorithm.name) == algorithm.capacity_slot
