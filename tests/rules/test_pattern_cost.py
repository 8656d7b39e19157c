"""No line costs more than a line: every regular expression in ``probes`` takes time linear
in the line it reads.

A pattern whose unbounded repeat (``\\d+``, ``\\s*``, ``.*``) can start at every position of
a line, and fail only after reading to the repeat's end, costs the square of the line: an
8 KB ``CUDA out of memory. Tried to allocate 111…1`` froze the console for 10 s (security
review 2026-12-06, E1-E3b).  This test finds every compiled pattern of the project (module
and class attributes, the tuples, lists and dicts that hold them, and literal patterns given
to ``re.*`` inside functions), runs ``search`` with each on crafted lines, and fails on any
whose cost grows superlinearly (``tests/support/cost.py``).

The lines: long runs of one character class (digits, spaces, tabs, punctuation, hex …) and,
for every unbounded repeat in the pattern, the text the pattern reads before it (its keywords,
found by walking the parsed pattern) repeated, or followed by a long run.  They start at
:data:`N` characters (4N for the large size, up to 64N while a growth is too fast to judge):
a square already shows at these sizes, and there are hundreds of patterns times dozens of
lines.  ``test_line_cost.py`` runs the public entry points on lines up to 1 MiB.

Run as ``python -m tests.rules.test_pattern_cost`` for a survey that lists every offending shape.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import probes
from tests.support.cost import cached, described, superlinear

N = 512
"""Characters of a crafted line at the first, small size."""
RUNS = ("1", " ", "\t", "\u00a0", ".", "-", ":", ",", "/", "=", "_", "a", "A", "Z", "f",
        "0x1f ", "1.", "1 ", "1,", "1:", "1-", "a1", "a ", "a.", "a-", "a:", "1.0 ", "#", "|",
        "| ", "[", "]", "(", ")", "<", ">", "*", "+", "%", "'", '"', "`", "\\", "[1]", "]:",
        "x=1, ", "\x1b[0m", "\u00e9", "\uff11")
"""What a line is made of: runs of one character class, and short shapes repeated."""
KEYWORD_TAILS = ("1", " ", "a", ":")
"""After each keyword of a pattern: a long run of what its next repeat may read."""
END = "\x00 \x00"
"""Ends a crafted line with what no pattern wants, so an anchored ``$`` fails."""


# --- finding every pattern ---------------------------------------------------------------


def _modules() -> Iterator[tuple[str, Path]]:
    root = Path(probes.__file__).parent
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def _walk(obj: object, where: str, out: dict[tuple[str, int], tuple[str, re.Pattern[str]]],
          depth: int = 0) -> None:
    if isinstance(obj, re.Pattern):
        if isinstance(obj.pattern, str):
            out.setdefault((obj.pattern, obj.flags), (where, obj))
        return
    if depth > 3 or isinstance(obj, (str, bytes, int, float, type)) or callable(obj):
        return
    if isinstance(obj, dict):
        for key, value in obj.items():
            _walk(value, f"{where}[{key!r}]", out, depth + 1)
    elif isinstance(obj, (tuple, list, set, frozenset)):
        for i, value in enumerate(obj):
            _walk(value, f"{where}[{i}]", out, depth + 1)
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("probes"):
        for key, value in vars(obj).items():
            _walk(value, f"{where}.{key}", out, depth + 1)


def _inline(path: Path, module: str) -> Iterator[tuple[str, re.Pattern[str]]]:
    """Literal patterns given to ``re.search(r"…", …)`` and the like inside functions."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re"
                and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            continue
        flags = 0
        for arg in [*node.args[1:], *(k.value for k in node.keywords)]:
            for sub in ast.walk(arg):
                if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                        and sub.value.id == "re" and sub.attr.isupper()):
                    flags |= getattr(re, sub.attr)
        yield f"{module}:{node.lineno}", re.compile(node.args[0].value, flags)


def project_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """Every distinct compiled pattern of ``probes``, with where it was found."""
    out: dict[tuple[str, int], tuple[str, re.Pattern[str]]] = {}
    for module, path in _modules():
        mod = importlib.import_module(module)
        for name, value in vars(mod).items():
            if isinstance(value, type) and value.__module__ == module:
                for attr, member in vars(value).items():
                    _walk(member, f"{module}.{name}.{attr}", out)
            elif not isinstance(value, type(probes)):
                _walk(value, f"{module}.{name}", out)
        for where, pattern in _inline(path, module):
            out.setdefault((pattern.pattern, pattern.flags), (where, pattern))
    return sorted(out.values(), key=lambda p: p[0])


try:  # the pattern parser of the ``re`` module (``sre_parse`` before Python 3.11)
    import re._parser as sre_parse  # type: ignore[import-not-found]
    from re import _constants as sre
except ImportError:  # pragma: no cover
    import sre_constants as sre  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

_CATEGORY_CHAR = {sre.CATEGORY_DIGIT: "1", sre.CATEGORY_SPACE: " ", sre.CATEGORY_WORD: "a",
                  sre.CATEGORY_NOT_DIGIT: "a", sre.CATEGORY_NOT_SPACE: "a",
                  sre.CATEGORY_NOT_WORD: " "}
MAX_CUTS = 24
"""Keyword shapes per pattern (an alternation of many rules is also checked rule by rule)."""


def _char_of(items: list[tuple[object, object]]) -> str:
    """A character a ``[…]`` set (or a category) accepts."""
    if items and items[0][0] is sre.NEGATE:
        return "a" if not any(op is sre.LITERAL and av == ord("a") for op, av in items) else "b"
    for op, av in items:
        if op is sre.LITERAL:
            return chr(av)  # type: ignore[arg-type]
        if op is sre.RANGE:
            return chr(av[0])  # type: ignore[index]
        if op is sre.CATEGORY:
            return _CATEGORY_CHAR.get(av, "a")  # type: ignore[call-overload]
    return "a"


class _Cuts:
    """Walk a parsed pattern with the shortest text it reads, noting that text (a "cut")
    wherever an unbounded repeat starts, with a character the repeat reads: a hostile line
    repeats the cut, or follows it with a long run of that character.  The walk's own text
    (first branches taken) is an example of a whole match, ``marks`` where its unbounded
    repeats are."""

    def __init__(self) -> None:
        self.found: dict[str, str] = {}
        self.marks: list[tuple[int, str]] = []

    def walk(self, items: object, text: str) -> str:
        for op, av in items:  # type: ignore[attr-defined]
            if op is sre.LITERAL:
                text += chr(av)
            elif op is sre.NOT_LITERAL:
                text += "a" if av != ord("a") else "b"
            elif op is sre.IN:
                text += _char_of(av)
            elif op is sre.ANY:
                text += "a"
            elif op is sre.CATEGORY:
                text += _CATEGORY_CHAR.get(av, "a")
            elif op is sre.BRANCH:
                ends = [self.walk(alt, text) for alt in av[1]]  # every branch's cuts
                text = ends[0]
            elif op is sre.SUBPATTERN:
                text = self.walk(av[3], text)
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
                low, high, item = av
                once = self.walk(item, text)[len(text):] or "a"
                if high is sre.MAXREPEAT:
                    self.marks.append((len(text), once[0]))
                    if text.strip():
                        self.found.setdefault(text, once[0])
                text += once * min(low, 64)
        return text


def keyword_cuts(pattern: re.Pattern[str]) -> dict[str, str]:
    """Text the pattern reads before each unbounded repeat → a character the repeat reads."""
    cuts = _Cuts()
    end = cuts.walk(sre_parse.parse(pattern.pattern, pattern.flags), "")
    if end.strip():
        cuts.found.setdefault(end, "a")
    return dict(list(cuts.found.items())[:MAX_CUTS])


def _alternatives(parsed: object) -> list[object]:
    """A pattern's top-level alternatives (each rule of a ``a|b|c`` pattern on its own)."""
    items = list(parsed)  # type: ignore[call-overload]
    while len(items) == 1 and items[0][0] is sre.SUBPATTERN:
        items = list(items[0][1][3])
    if len(items) == 1 and items[0][0] is sre.BRANCH:
        return list(items[0][1][1])
    return [items]


def inflated(pattern: re.Pattern[str], run: str) -> list[str]:
    """Whole-match examples of each alternative of ``pattern``, with one unbounded repeat that
    reads ``run[0]`` made ``run`` long (``File "a", line 1111…`` for ``line (\\d+)``): what
    reaches the code after a match, ``int()`` among it."""
    out = []
    for alternative in _alternatives(sre_parse.parse(pattern.pattern, pattern.flags)):
        cuts = _Cuts()
        text = cuts.walk(alternative, "")
        out += [text[:at] + run + text[at:] for at, char in cuts.marks if char == run[0]]
    return out


def crafted(pattern: re.Pattern[str]) -> Iterator[tuple[str, Callable[[int], str]]]:
    """(name, line of about n characters) for every hostile shape of one pattern."""
    def run(unit: str, head: str = "") -> Callable[[int], str]:
        return lambda n: head + (unit * (n // len(unit) + 1))[:n] + END

    for unit in RUNS:
        yield f"{unit!r}*n", run(unit)
    for cut, char in keyword_cuts(pattern).items():
        for tail in dict.fromkeys((char, *KEYWORD_TAILS)):
            yield f"{cut!r}+{tail!r}*n", run(tail, cut)
        for sep in ("", " ", " 1, "):
            yield f"({cut!r}+{sep!r})*k", run(cut + sep)


# --- measuring -------------------------------------------------------------------------


def offenders(pattern: re.Pattern[str]) -> list[str]:
    """Every crafted line on which ``pattern.search`` grows superlinearly, with its costs."""
    out = []
    for shape, make in crafted(pattern):
        line = cached(make)
        grew = superlinear(lambda k, line=line: pattern.search(line(k)), N)  # type: ignore[misc]
        if grew is not None:
            out.append(f"{shape}: {described(grew)}")
    return out


PATTERNS = project_patterns()


def test_every_pattern_is_found() -> None:
    """The walk finds the patterns the review named, so an empty list cannot pass."""
    names = {where.rsplit(".", 1)[-1] for where, _ in PATTERNS}
    assert {"_UNALLOC", "_OLD_ALLOC", "_OLD_RESERVED", "_MEM", "_SPEED", "_TOKENS_AFTER",
            "_SAMPLES_AFTER"} <= names
    assert any(where.startswith("probes.rules.logrules.lines._PREFIXES[")
               for where, _ in PATTERNS)
    assert len(PATTERNS) > 300


def test_no_pattern_costs_more_than_a_line() -> None:
    found = {}
    for where, pattern in PATTERNS:
        bad = offenders(pattern)
        if bad:
            found[where] = f"{pattern.pattern[:120]!r}\n      " + "\n      ".join(bad[:4])
    assert found == {}, "superlinear patterns:\n" + "\n".join(
        f"  {where}: {text}" for where, text in found.items())


if __name__ == "__main__":  # a survey: every offending shape of every pattern, as found
    for where, pattern in PATTERNS:
        bad = offenders(pattern)
        if bad:
            print(where, repr(pattern.pattern[:140]), *bad, sep="\n    ", flush=True)
    print(len(PATTERNS), "patterns")
