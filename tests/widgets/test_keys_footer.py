"""``KeysFooter`` draws what Textual's ``Footer`` draws, restyling each key once.

The footer is composed again at every focus change; Textual's keys were restyled twice more
each as they mounted (``compact`` set, then bound back).  Here an app with two focusable
widgets (different bindings, a compact key group, a disabled key) is driven through focus
changes with either footer, plain and compact: every key's classes, ``compact``, region,
style and rendered text, and the screen's lines, are equal.  Negative control: a footer
that hands every key its ``compact``, the command palette's too, differs.  And the keys
bound to the footer are not restyled after they mount when it is composed again (Textual's:
at least twice each).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.css.stylesheet import Stylesheet
from textual.widget import Widget
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey

from widgets.footer import KeysFooter

GROUP = Binding.Group("move", compact=True)


class Pane(Static, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "noop", "Alpha"),
        Binding("left", "noop_left", "Left", group=GROUP),
        Binding("right", "noop_right", "Right", group=GROUP),
    ]


class Other(Static, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("b", "noop", "Beta", tooltip="the other pane"),
        Binding("x", "missing", "Disabled"),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return None if action == "missing" else True


class FooterApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit")]

    def __init__(self, footer: type[Footer], compact: bool) -> None:
        super().__init__()
        self.footer_type, self.compact = footer, compact

    def compose(self) -> ComposeResult:
        yield Pane("one", id="one")
        yield Other("two", id="two")
        yield self.footer_type(compact=self.compact)


def keys_of(app: App[Any]) -> list[tuple[Any, ...]]:
    footer = app.screen.query_one(Footer)
    out = []
    for w in footer.query(Widget):
        text = w.render() if isinstance(w, FooterKey) else None
        out.append((type(w).__name__, sorted(w.classes), getattr(w, "compact", None),
                    w.region, str(w.rich_style),
                    (text.plain, [(s.start, s.end, str(s.style)) for s in text.spans])
                    if text is not None else None))
    return out


def screen_lines(app: App[Any]) -> list[str]:
    return [str(list(line)) for line in app.screen._compositor.render_strips()]


async def walk(footer: type[Footer], compact: bool) -> list[Any]:
    app = FooterApp(footer, compact)
    seen: list[Any] = []
    async with app.run_test(size=(100, 8)) as pilot:
        for target in ("#one", "#two", "#one", "#two"):
            app.query_one(target, Widget).focus()
            await pilot.pause(0.05)
            await pilot.pause(0.05)
            seen.append((keys_of(app), screen_lines(app)))
    return seen


@pytest.mark.parametrize("compact", [False, True])
async def test_the_footer_draws_as_textuals(compact: bool) -> None:
    ours = await walk(KeysFooter, compact)
    assert any(len(keys) > 3 for keys, _ in ours)
    assert ours == await walk(Footer, compact)


class WrongFooter(Footer):
    """Negative control: every key takes the footer's ``compact``, the command palette's
    too (Textual leaves that one compact)."""

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.set_reactive(FooterKey.compact, self.compact)
                widget.set_class(self.compact, "-compact", update=False)
            yield widget


async def test_a_footer_that_makes_every_key_alike_differs() -> None:
    assert await walk(WrongFooter, False) != await walk(Footer, False)


async def test_no_bound_key_is_restyled_after_it_mounts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    counts: dict[str, int] = {}
    update = Stylesheet.update_nodes

    def counted(self: Stylesheet, nodes: Any, animate: bool = False) -> None:
        nodes = list(nodes)
        for n in nodes:
            if isinstance(n, FooterKey):
                counts["FooterKey"] = counts.get("FooterKey", 0) + 1
                if "-command-palette" in n.classes:
                    counts["palette"] = counts.get("palette", 0) + 1
        update(self, nodes, animate)

    monkeypatch.setattr(Stylesheet, "update_nodes", counted)
    restyles = {}
    for footer in (KeysFooter, Footer):
        app = FooterApp(footer, False)
        async with app.run_test(size=(100, 8)) as pilot:
            await pilot.pause(0.05)
            counts.clear()
            app.query_one("#two", Widget).focus()
            await pilot.pause(0.1)
            # the command palette's key is not bound to the footer: left as Textual has it
            restyles[footer.__name__] = counts.get("FooterKey", 0) - counts.get("palette", 0)
            bound = len(app.screen.query(FooterKey)) - len(app.screen.query(".-command-palette"))
    assert bound >= 3
    assert restyles["KeysFooter"] == 0
    assert restyles["Footer"] >= 2 * bound
