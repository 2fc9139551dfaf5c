"""An answer rendered a block at a time looks as if it had been rendered whole.

However the deltas cut the text, ``MarkdownStream`` gives back the same lines as
rendering the finished answer at once — a code fence with blank lines inside, a
loose list, a list item continued after a blank line all stay one block — and it
gives each block back as soon as the next one begins, not at the end.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.clients.tui.markdown import MarkdownStream, render_markdown

ANSI = re.compile(r"\x1b\[[0-9;]*m")
DOC = ("# Release notes\n\nThis is **bold** and `code`,\nover two lines.\n\n"
       "```python\ndef f():\n\n    return 1\n```\n\n"
       "1. one\n2. two\n\n3. three, in the same list\n\n"
       "Intro:\n- x\n\n  x continued\n- y\n\n> quoted\n\n"
       "| a | b |\n|---|---|\n| 1 | 2 |\n\nThe end.")


def streamed(pieces: list[str], width: int = 60) -> str:
    stream = MarkdownStream(width)
    return "".join(stream.feed(piece) for piece in pieces) + stream.finish()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(DOC)), max_size=12))
def test_any_cut_of_the_answer_renders_as_the_whole(cuts):
    bounds = sorted({0, len(DOC), *cuts})
    pieces = [DOC[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    assert streamed(pieces) == render_markdown(DOC, 60) + "\n"


def test_a_block_is_written_once_the_next_begins_and_a_fence_waits_for_its_end():
    stream = MarkdownStream(60)
    assert stream.feed("# Title\n\nfirst para") == ""  # the heading's block may go on
    out = ANSI.sub("", stream.feed("graph\n"))  # a new block began: the heading is done
    assert out.strip() == "Title" and stream.pending == "first paragraph\n"
    out = ANSI.sub("", stream.feed("\n```\ncode one\n\n"))  # a fence began
    assert out.strip() == "first paragraph" and stream.pending == "```\ncode one\n\n"
    assert stream.feed("code two\n") == ""  # a blank line inside a fence ends nothing
    assert stream.feed("```\n\n") == ""  # the fence ended; the block may go on
    code = ANSI.sub("", stream.feed("after\n"))
    assert "code one" in code and "code two" in code and "after" not in code
    assert code.startswith("\n")  # one blank line between blocks
    assert stream.pending == "after\n"
    assert ANSI.sub("", stream.finish()).strip() == "after"
    assert stream.finish() == "" and stream.pending == ""


def test_rendered_lines_carry_no_markup_and_no_padding():
    out = render_markdown("Some **bold** words.\n\n- item", 40)
    assert "\x1b[1mbold" in out and "**" not in out
    assert all(not line.endswith(" ") for line in out.split("\n")), repr(out)
    assert not out.startswith("\n") and not out.endswith("\n")
