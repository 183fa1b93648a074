"""Markdown for transcripts, rendered safely: raw HTML is escaped, then the output is sanitised.

Transcripts come from students and agents, so opening a report must not make the staff member's
browser fetch anything: an image is shown as a link to it (``[image: alt]``), never loaded.
"""

from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

_LINK_SCHEMES = {"http", "https", "mailto"}


def _image_as_link(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env).strip()
    label = escapeHtml(f"[image: {alt}]" if alt else "[image]")
    if urlsplit(src).scheme.lower() not in _LINK_SCHEMES | {""}:
        return label  # data: and the like: nothing to follow
    if env.get("link_depth"):
        return f"{label} ({escapeHtml(src)})"  # already inside a link, which cannot hold another
    return f'<a href="{escapeHtml(src)}" title="{escapeHtml(src)}">{label}</a>'


def _link_open(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    env["link_depth"] = env.get("link_depth", 0) + 1
    return self.renderToken(tokens, idx, options, env)


def _link_close(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    env["link_depth"] = env.get("link_depth", 0) - 1
    return self.renderToken(tokens, idx, options, env)


_MD = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
_MD.add_render_rule("image", _image_as_link)
_MD.add_render_rule("link_open", _link_open)
_MD.add_render_rule("link_close", _link_close)

# Nothing that loads a resource survives, whatever reaches the sanitiser.
_TAGS = nh3.ALLOWED_TAGS - {"img"}


@lru_cache(maxsize=4096)
def render_markdown(text: str) -> str:
    """HTML that shows what the text says, runs nothing (no scripts, handlers or javascript: links)
    and loads nothing (images become links). Cached by text: a report is read many times while its
    messages stay the same, and parsing plus sanitising is most of what its page costs."""
    return nh3.clean(
        _MD.render(text or "", {}), tags=_TAGS, url_schemes=_LINK_SCHEMES, link_rel="noopener noreferrer nofollow"
    )
