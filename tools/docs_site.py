"""The docs site's mkdocs hook: its scripts served from the site, and a check of every page.

mkdocs.yml names this file under ``hooks:``. After a build it

- copies the npm packages that ``make docs`` installs into tools/site_assets/node_modules
  (pinned, with their hashes, by tools/site_assets/package-lock.json) into the site, each where
  mkdocs.yml loads it from: MathJax into ``assets/mathjax/`` (``extra_javascript``), the
  iframe-worker shim that lets search run from disk (material's ``offline`` plugin would fetch
  it from a CDN) as ``assets/javascripts/iframe-worker-shim.js`` (``extra.polyfills``);
- reads every HTML and CSS file of the site and logs a warning, which fails the strict build,
  for each of: a remote asset (a ``src``, a non-link ``href``, a CSS ``url()`` or ``@import``
  on another host: offline, the page would miss it), a raw Sphinx role (mkdocstrings does not
  read them; tools/sphinx_roles.py rewrites them), a visible ``\\|`` (a pipe escaped in a
  table cell's code), and a link to a directory (opened from disk, a directory listing).

Plain links in the text (``<a href="https://...">``) are fine: nothing is fetched until a
reader follows them. ``python tools/docs_site.py SITE`` checks a built site without mkdocs.
Standard library only at import, so the tests load it in any venv.
"""

from __future__ import annotations

import logging
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

NODE_MODULES = Path(__file__).resolve().parent / "site_assets" / "node_modules"
MATHJAX_SITE = "assets/mathjax"
SHIM_SITE = "assets/javascripts/iframe-worker-shim.js"
# {script a page loads: {path in the site: path in node_modules}}, each copied when loaded. Of
# MathJax, the one combined component the site loads and what it loads on demand from beside
# it: TeX extensions (autoload), the CHTML fonts, the menu and its accessibility tools.
VENDORED: dict[str, dict[str, str]] = {
    f"{MATHJAX_SITE}/tex-mml-chtml.js": {
        f"{MATHJAX_SITE}/{name}": f"mathjax/es5/{name}"
        for name in ("tex-mml-chtml.js", "input", "output/chtml", "ui", "a11y", "sre", "adaptors")
    },
    SHIM_SITE: {SHIM_SITE: "iframe-worker/shim/index.js"},
}

_log = logging.getLogger("mkdocs.hooks.docs_site")  # under `mkdocs`: strict counts it

_REMOTE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
_CSS_REMOTE = re.compile(
    r"""url\(\s*['"]?\s*(?P<url>(?:https?:)?//[^'")\s]+)|@import\s+['"](?P<imported>(?:https?:)?//[^'"]+)""",
    re.IGNORECASE,
)
_ROLE = re.compile(
    r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const|ref|doc|term):(?=`|<code)"
)
_LINK_TAGS = {"a", "area"}
_FETCHING_ATTRIBUTES = {"src", "srcset", "data", "poster", "href", "xlink:href"}
_UNCHECKED_TEXT = {"pre", "script", "style", "textarea"}


class _Page(HTMLParser):
    """Collects a page's remote assets, directory links and the markup of its visible text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.remote: list[str] = []
        self.directory_links: list[str] = []
        self.text: list[str] = []
        self._skipping: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "style":
                self.remote += [f"<{tag} style> {url}" for url in css_remote(value)]
            elif name in _FETCHING_ATTRIBUTES and not (name == "href" and tag in _LINK_TAGS):
                urls = [part.split()[0] for part in value.split(",") if part.strip()]
                if name != "srcset":
                    urls = [value]
                self.remote += [f"<{tag} {name}={url}>" for url in urls if _REMOTE.match(url)]
            if name == "href" and tag in _LINK_TAGS and _is_directory_link(value):
                self.directory_links.append(value)
        if tag in _UNCHECKED_TEXT:
            self._skipping.append(tag)
        elif not self._skipping:
            # Keep the code spans' edges: a raw role renders as `:func:<code>name</code>`.
            self.text.append("<code>" if tag == "code" else "")

    def handle_endtag(self, tag: str) -> None:
        if self._skipping and self._skipping[-1] == tag:
            self._skipping.pop()

    def handle_data(self, data: str) -> None:
        if self._skipping and self._skipping[-1] == "style":
            self.remote += [f"<style> {url}" for url in css_remote(data)]
        elif not self._skipping:
            self.text.append(data)


def _is_directory_link(href: str) -> bool:
    if _REMOTE.match(href) or re.match(r"^(?:#|mailto:|data:|javascript:)", href):
        return False
    path = href.split("#", 1)[0].split("?", 1)[0]
    return path == "." or path.endswith("/")


def css_remote(css: str) -> list[str]:
    """The URLs on another host that ``css`` loads."""
    return [match["url"] or match["imported"] for match in _CSS_REMOTE.finditer(css)]


def html_problems(html: str) -> list[str]:
    """What is wrong with one built HTML page, one line each; empty when nothing is."""
    page = _Page()
    page.feed(html)
    page.close()
    text = "".join(page.text)
    problems = [f"remote asset {asset}" for asset in page.remote]
    problems += [
        f"raw Sphinx role {match[0]!r} in {_around(text, match.start())!r}"
        for match in _ROLE.finditer(text)
    ]
    problems += [
        f"raw markup '\\|' in {_around(text, match.start())!r}"
        for match in re.finditer(r"\\\|", text)
    ]
    problems += [
        f"link to a directory {href!r} (use_directory_urls)" for href in page.directory_links
    ]
    return problems


def _around(text: str, index: int) -> str:
    return " ".join(text[max(0, index - 30) : index + 50].replace("<code>", "").split())


def site_problems(site: Path) -> list[str]:
    """Every problem of the built site in ``site``, each prefixed with its file."""
    problems: list[str] = []
    for path in sorted(site.rglob("*")):
        if path.suffix not in {".html", ".css"} or MATHJAX_SITE in path.as_posix():
            continue
        text = path.read_text(errors="replace")
        found = html_problems(text) if path.suffix == ".html" else css_remote(text)
        problems += [f"{path.relative_to(site)}: {problem}" for problem in found]
    return problems


def copy_vendored(site: Path, loaded: list[str], node_modules: Path = NODE_MODULES) -> None:
    """Copy into ``site`` the vendored files of each script in ``loaded``."""
    for script, files in VENDORED.items():
        if script not in loaded:
            continue
        for target, source in files.items():
            if not (node_modules / source).exists():
                from mkdocs.exceptions import PluginError

                msg = f"{node_modules / source} is missing: run `make docs` (npm ci)"
                raise PluginError(msg)
            destination = site / target
            destination.parent.mkdir(parents=True, exist_ok=True)
            if (node_modules / source).is_dir():
                shutil.copytree(node_modules / source, destination, dirs_exist_ok=True)
            else:
                shutil.copy2(node_modules / source, destination)


def on_post_build(config: Any, **kwargs: Any) -> None:
    """mkdocs' event after the build: the vendored scripts in, then every page checked."""
    site = Path(config["site_dir"])
    loaded = [str(script) for script in config["extra_javascript"]]
    copy_vendored(site, loaded + [str(script) for script in config["extra"].get("polyfills", [])])
    for problem in site_problems(site):
        _log.warning(problem)


def main(argv: list[str] | None = None) -> int:
    """Check the built site named on the command line; 1 if anything is wrong."""
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python tools/docs_site.py SITE_DIR", file=sys.stderr)
        return 2
    problems = site_problems(Path(arguments[0]))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
