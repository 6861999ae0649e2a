"""report.html: report.md as one file a ticket can take, its plots inside (PNG as data: URIs), readable
in any browser and attachable where a ticket system takes one file (#36.5). Written beside report.md
from the same text: what one says the other says."""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import markdown

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f3f3f3; padding: 0 3px; }
img { max-width: 100%; }
"""


def _inline(run: Path, page: str) -> str:
    """Every <img src="NAME.png"> of the run's folder as a data: URI (names outside the folder stay links)."""

    def embed(match: re.Match) -> str:
        name = html.unescape(match.group(2))
        path = (run / name).resolve()
        if path.parent != run.resolve() or not path.is_file() or path.suffix != ".png":
            return match.group(0)
        data = base64.b64encode(path.read_bytes()).decode()
        return f"{match.group(1)}data:image/png;base64,{data}{match.group(3)}"

    return re.sub(r'(<img [^>]*src=")([^"]+)(")', embed, page)


def _links_of_this_report(page: str) -> str:
    """An href a scenario's text could have made (`[x](javascript:...)`) is kept only when it is http(s)
    or a file of the run's folder."""
    return re.sub(
        r'href="([^"]*)"',
        lambda m: m.group(0) if re.match(r"(https?://|[\w.-]+$)", html.unescape(m.group(1))) else 'href="#"',
        page,
    )


def write(run: Path, text: str) -> Path:
    """The report's markdown as a page. A scenario's own text (name, description, expected) is hostile
    input: raw HTML in it is escaped before the conversion (it shows as written), links are limited as
    above, and the controller serves results/ with a sandboxing Content-Security-Policy besides."""
    body = markdown.markdown(html.escape(text, quote=False), extensions=["tables"], output_format="html")
    body = _links_of_this_report(body)
    title = html.escape(text.splitlines()[0].lstrip("# ").strip() if text else run.name)
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{STYLE}</style></head><body>\n{_inline(run, body)}\n</body></html>\n"
    )
    out = run / "report.html"
    out.write_text(page)
    return out
