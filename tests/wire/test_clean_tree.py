"""``clean_tree`` returns what the walk (``clean_json``) returns, or raises what it raises.

``clean_tree`` skips the walk over a parsed line when orjson's writing of it (the block
texts set aside) shows nothing to clean (issue 38 item 5: a hello's topology text made
every hello walk whole).  Checked here against the walk over the agent's own hellos and
fabric reports (the shipped simulator), spoiled at random where a host could spoil them:
hostile strings (ESC, C1, bidi, zero width, DEL, tab, newline, CR, lone surrogates) in keys
and values at every depth, the block keys at the top, one level down and deeper, with other
types, and nesting around ``MAX_DEPTH``.  Equal means the same ``repr`` (value, type, sign,
key order) or the same exception.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from probes.wire import sanitize
from probes.wire.protocol import _BLOCK_KEYS, _loads
from probes.wire.sanitize import MAX_DEPTH, TooDeep, clean_json, clean_tree

HOSTILE = ["\x1b]52;c;aGk=\x07", "\x1b[2J", "\x9b31m", "\u202eevil", "a\u200bb", "\x7f",
           "tab\there", "two\nlines", "cr\r\n", "\ud800", "\udfff x", "\ufeff", "\u2028",
           "nul\x00"]
HARMLESS = ["plain", "", "caf\u00e9", "\u4e2d\u6587", 'quote"d', "back\\slash", "a/b",
            "{[nested]}", "\\n literally", "0"]


def _agent_lines() -> list[bytes]:
    out = subprocess.run(
        [sys.executable, "-m", "probes.agent", "--simulate", "healthy", "--fast",
         "--count", "2", "--wire", "2"], capture_output=True, timeout=60, check=True).stdout
    return [ln for ln in out.splitlines() if ln.startswith(b"{")]


@pytest.fixture(scope="module")
def agent_objects() -> list[Any]:
    lines = _agent_lines()
    assert any(b'"type":"hello"' in ln for ln in lines)
    return [json.loads(ln) for ln in lines]


def _paths(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(obj, dict):
        for k, v in obj.items():
            found += _paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            found += _paths(v, (*path, i))
    return found


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        obj = obj[step]
    return obj


def _nest(levels: int, leaf: Any) -> Any:
    for k in range(levels):
        leaf = [leaf] if k % 2 else {"d": leaf}
    return leaf


def _spoil(obj: Any, rng: random.Random) -> Any:
    obj = copy.deepcopy(obj)
    for _ in range(rng.choice((1, 1, 2, 4))):
        path = rng.choice(_paths(obj))
        node = _at(obj, path)
        text = rng.choice(HOSTILE + HARMLESS)
        what = rng.random()
        if isinstance(node, dict):
            if what < 0.3:
                node[rng.choice(HOSTILE + HARMLESS)] = rng.choice((text, 1, [text]))
            elif what < 0.55:
                node[rng.choice(sorted(_BLOCK_KEYS))] = rng.choice(
                    (text, "GPU0\tX\nGPU1\r\n" + text, 7, [text], {"k": text}, None))
            elif what < 0.7:
                node["deep"] = _nest(rng.choice((MAX_DEPTH - 3, MAX_DEPTH - 1, MAX_DEPTH,
                                                 MAX_DEPTH + 1, MAX_DEPTH + 2)),
                                     rng.choice(("leaf", 3, [], {}, None)))
            elif node:
                node[rng.choice(list(node))] = text
        elif isinstance(node, list):
            if node and what < 0.7:
                node[rng.randrange(len(node))] = text
            else:
                node.append(rng.choice((text, 2.5, -0.0, True, None)))
    return obj


def _wire(obj: Any) -> Any:
    """The object as the console parses the agent's ASCII JSON line."""
    return _loads(json.dumps(obj, ensure_ascii=True).encode())[0]


def _result(fn: Callable[..., Any], obj: Any, depth: int) -> str:
    try:
        return repr(fn(obj, _BLOCK_KEYS, depth))
    except TooDeep as exc:
        return f"TooDeep: {exc}"


def _differences(objs: list[Any], fn: Callable[..., Any], seed: int,
                 n: int) -> tuple[int, int]:
    rng = random.Random(seed)
    differ = spoiled = 0
    for k in range(n):
        base = objs[k % len(objs)]
        obj = base if k % 5 == 0 else _spoil(base, rng)
        spoiled += obj is not base
        for depth, tree in ((0, obj), (1, obj.get("columns", obj))):
            parsed = _wire(tree)
            want = _result(clean_json, copy.deepcopy(parsed), depth)
            differ += _result(fn, parsed, depth) != want
    return differ, spoiled


def test_clean_tree_is_the_walk_on_the_agents_lines_spoiled_at_random(
        agent_objects: list[Any]) -> None:
    differ, spoiled = _differences(agent_objects, clean_tree, 38, 600)
    assert spoiled > 400
    assert differ == 0


def test_negative_control_a_skip_that_trusts_the_tree_is_caught(
        agent_objects: list[Any]) -> None:
    def trusting(value: Any, block_keys: frozenset[str], depth: int) -> Any:
        return value  # what a skip without the dump's check would return

    differ, _ = _differences(agent_objects, trusting, 38, 600)
    assert differ > 50


def _depth_cases(hello: Any) -> list[tuple[Any, int]]:
    return [({**hello, "deep": _nest(levels, leaf)}, depth)
            for levels in range(MAX_DEPTH - 4, MAX_DEPTH + 4)
            for leaf in ("leaf", 3, None, [], {}, {"k": "v"})
            for depth in (0, 1)]


def _depth_differences(hello: Any, fn: Callable[..., Any]) -> tuple[int, int]:
    differ = raised = 0
    for obj, depth in _depth_cases(hello):
        parsed = _wire(obj)
        want = _result(clean_json, copy.deepcopy(parsed), depth)
        raised += want.startswith("TooDeep")
        differ += _result(fn, parsed, depth) != want
    return differ, raised


def test_clean_tree_refuses_what_the_walk_refuses_at_the_depth_limit(
        agent_objects: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    hello = next(o for o in agent_objects if o.get("type") == "hello")
    differ, raised = _depth_differences(hello, clean_tree)
    assert raised > 20 and differ == 0
    # negative control: without the depth check the deep ones are let through
    monkeypatch.setattr(sanitize, "_shallow_enough", lambda *a: True)
    differ, _ = _depth_differences(hello, clean_tree)
    assert differ > 20


def test_the_agents_hello_skips_the_walk(agent_objects: list[Any],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    hello = next(o for o in agent_objects if o.get("type") == "hello")
    assert "\n" in hello["topo_text"]  # why a hello "may need cleaning" at all
    walked: list[int] = []
    monkeypatch.setattr(sanitize, "clean_json", lambda *a: walked.append(1))
    got = clean_tree(_wire(hello), _BLOCK_KEYS)
    assert walked == [] and got == hello
    clean_tree(_wire({**hello, "host": "\x1b[2J"}), _BLOCK_KEYS)
    assert walked == [1]  # a hostile string anywhere: the walk
