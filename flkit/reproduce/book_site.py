"""What a built book must hold (:mod:`.book`): every page, every image a page shows, every local
file and anchor a page links to, on each notebook page as many figures as its notebook has PNG
outputs, no formula or Markdown table left as its source, and no solution or hidden-test region
of an exercise (the book shows the exercises as the student release does). Sphinx only warns on
most of these, and not at all on source the Markdown parser did not take for math or a table
(JupyterLab renders ``$$...$$`` inside a paragraph and the tables of a cell's Markdown output;
MyST, unless told, leaves the dollars and the pipes in the text); a published book must not lose
them."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..course.student_version import INSTRUCTOR_MARKERS

__all__ = ["Page", "read_page", "check_site"]

# Sphinx's own folders: assets and copies of the sources, not pages
_NOT_PAGES = ("_static", "_sources", "_images", "_downloads")
# elements whose text is code or rendered math, where a dollar sign is no formula left behind
_NOT_PROSE = ("script", "style", "code", "pre", "kbd", "samp", "math", "svg")
_VOID = ("img", "br", "hr", "input", "link", "meta", "source", "wbr")
# a Markdown table's delimiter row left in the text, its dashes as typed or as the typographic
# dashes the HTML builder makes of them ("|---|" becomes "|—|")
_TABLE_ROW = re.compile(r"\|\s*:?[-\u2013\u2014]+:?\s*\|")
# nbgrader's delimiters of what only the instructor version holds, whatever comment marks them
# (in a page's prose the "###" may be gone)
ANSWER_MARKERS = tuple(m.lstrip("# ") for m in INSTRUCTOR_MARKERS)
#: where Sphinx puts the images of a page (notebook outputs included)
IMAGES_DIR = "_images"


class Page(HTMLParser):
    """The ids, image sources and link targets of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.images: list[str] = []
        self.links: list[str] = []  # <a href>, <link href>, <script src>
        self.dollars: list[str] = []  # prose around a "$" left in the text: a formula not rendered
        self.tables: list[str] = []  # prose around a table's delimiter row: a table not rendered
        self.answers: list[str] = []  # an exercise's solution or hidden tests, in code or prose
        self._skip: list[str] = []  # the open elements whose text is not prose (code, math)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if self._skip or tag in _NOT_PROSE or "math" in classes:
            if tag not in _VOID:
                self._skip.append(tag)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        if tag == "img" and a.get("src"):
            self.images.append(a["src"])
        elif tag in ("a", "link") and a.get("href"):
            self.links.append(a["href"])
        elif tag == "script" and a.get("src"):
            self.links.append(a["src"])

    def handle_endtag(self, tag):
        if self._skip and self._skip[-1] == tag:
            self._skip.pop()

    def handle_data(self, data):
        self.answers += [m for m in ANSWER_MARKERS if m in data]
        if self._skip:
            return
        if "$" in data:
            at = data.index("$")
            self.dollars.append(" ".join(data[max(0, at - 30) : at + 30].split()))
        if m := _TABLE_ROW.search(data):
            at = m.start()
            self.tables.append(" ".join(data[max(0, at - 30) : at + 30].split()))


def read_page(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def _local(url: str) -> tuple[str, str] | None:
    """(path, fragment) of a link inside the site; None for a URL elsewhere."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc:
        return None
    return unquote(parts.path), unquote(parts.fragment)


def check_site(html: Path, pages: list[str], figures: dict[str, int] | None = None) -> list[str]:
    """Problems of the site in ``html`` as readable lines (empty: none). ``pages``: the document
    names that must each have a page; ``figures``: the least number of images under
    ``_images/`` that a page must show, by document name."""
    html = Path(html)
    problems = [f"page {d}.html is missing" for d in pages if not (html / f"{d}.html").is_file()]
    parsed: dict[Path, Page] = {}

    def page_at(path: Path) -> Page:
        if path not in parsed:
            parsed[path] = read_page(path)
        return parsed[path]

    for path in sorted(html.rglob("*.html")):
        rel = path.relative_to(html)
        if rel.parts[0] in _NOT_PAGES:
            continue
        page = page_at(path)
        problems += [f"{rel}: a formula is not rendered: ...{t}..." for t in page.dollars]
        problems += [f"{rel}: a Markdown table is not rendered: ...{t}..." for t in page.tables]
        problems += [
            f"{rel}: shows an exercise's {m!r} region" for m in dict.fromkeys(page.answers)
        ]
        for src in page.images:
            local = _local(src)
            if local and not (path.parent / local[0]).is_file():
                problems.append(f"{rel}: image {src} is missing")
        for href in page.links:
            local = _local(href)
            if local is None:
                continue
            target, fragment = local
            file = (path.parent / target).resolve() if target else path
            if target and not file.exists():
                problems.append(f"{rel}: link {href} points to a missing file")
            elif fragment and file.suffix == ".html" and fragment not in page_at(file).ids:
                problems.append(f"{rel}: link {href} points to a missing anchor")
    for doc, least in (figures or {}).items():
        path = html / f"{doc}.html"
        if not path.is_file():
            continue
        shown = [s for s in page_at(path).images if IMAGES_DIR in Path(s).parts]
        if len(shown) < least:
            problems.append(
                f"{doc}.html shows {len(shown)} figure(s); its notebook has {least} PNG output(s)"
            )
    return problems
