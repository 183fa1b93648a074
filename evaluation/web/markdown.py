"""Markdown for transcripts, rendered safely: raw HTML is escaped, then the output is sanitised."""

import nh3
from markdown_it import MarkdownIt

_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")


def render_markdown(text: str) -> str:
    """HTML that shows what the text says and runs nothing (no scripts, handlers or javascript: links)."""
    return nh3.clean(
        _MD.render(text or ""), url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer nofollow"
    )
