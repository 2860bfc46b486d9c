"""The docs site as a reader opens it: no raw Sphinx role, no asset from another host.

tools/docs_site.py (the mkdocs hook) checks every built page and fails the strict build;
these tests show that each check catches what it names, that the sources hold no Sphinx
role (tools/sphinx_roles.py), and that a strict build of a page with one fails.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def role(kind: str, body: str) -> str:
    """A Sphinx role, written in pieces so that tools/sphinx_roles.py does not read it here."""
    return ":" + kind + ":`" + body + "`"


FUNC_ROLE = ":func" + ":"


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


docs_site = _tool("docs_site")


@pytest.mark.parametrize(
    "tag",
    [
        '<script src="https://unpkg.com/mathjax@3/es5/tex-mml-chtml.js"></script>',
        '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">',
        '<link rel="preconnect" href="https://fonts.gstatic.com" crossorigin>',
        '<img src="//cdn.example.org/k.png" alt="">',
        '<img srcset="a.png 1x, https://cdn.example.org/k@2x.png 2x" alt="">',
        "<div style=\"background: url('https://cdn.example.org/bg.png')\"></div>",
        "<style>@import 'https://fonts.googleapis.com/css?family=Roboto';</style>",
        '<iframe src="HTTPS://example.org/report.html"></iframe>',
    ],
)
def test_a_remote_asset_is_a_problem(tag: str) -> None:
    problems = docs_site.html_problems(f"<html><body>{tag}</body></html>")
    assert len(problems) == 1
    assert problems[0].startswith("remote asset")


def test_local_assets_and_plain_links_are_not() -> None:
    html = (
        '<svg xmlns="http://www.w3.org/2000/svg"></svg>'
        '<script src="assets/mathjax/tex-mml-chtml.js"></script>'
        '<link rel="stylesheet" href="stylesheets/extra.css">'
        '<img src="generated/local_cloaking.png" alt="">'
        '<p>Made with <a href="https://squidfunk.github.io/mkdocs-material/">Material</a></p>'
        '<a href="cli.html#exit-codes">exit codes</a> <a href="#top">top</a>'
    )
    assert docs_site.html_problems(html) == []


def test_a_raw_sphinx_role_is_a_problem_outside_code_blocks() -> None:
    rendered = f"<p>Forward to {FUNC_ROLE}<code>polars_hidden_rate.hidden_rate</code>.</p>"
    (problem,) = docs_site.html_problems(rendered)
    assert "raw Sphinx role" in problem
    assert "polars_hidden_rate.hidden_rate" in problem
    assert docs_site.html_problems(f"<p>{FUNC_ROLE}`x`</p>") != []
    # In a code block it is an example, shown on purpose.
    assert docs_site.html_problems(f"<pre><code>{FUNC_ROLE}`x`</code></pre>") == []


def test_an_escaped_pipe_and_a_directory_link_are_problems() -> None:
    (pipe,) = docs_site.html_problems("<td><code>--format text\\|json</code></td>")
    assert "'\\|'" in pipe
    (directory,) = docs_site.html_problems('<a href="../cli/">Command line</a>')
    assert "link to a directory '../cli/'" in directory


def test_site_problems_name_the_file_and_read_css(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text('<script src="https://cdn.example.org/a.js"></script>')
    (tmp_path / "extra.css").write_text("body { background: url(https://cdn.example.org/b.png) }")
    (tmp_path / "fine.html").write_text("<p>nothing fetched</p>")
    assert docs_site.site_problems(tmp_path) == [
        "extra.css: https://cdn.example.org/b.png",
        "index.html: remote asset <script src=https://cdn.example.org/a.js>",
    ]


def test_the_sources_hold_no_sphinx_role() -> None:
    checked = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "sphinx_roles.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout == ""


def test_sphinx_roles_finds_every_form() -> None:
    sphinx_roles = _tool("sphinx_roles")
    wrapped = "SAMPLE\n    _ROWS"  # a role may wrap onto the next line
    text = "".join(
        [
            role("func", "~polars_hidden_rate.hidden_rate"),
            ", ",
            role("py:class", ".passes.Imputer"),
            ",\n",
            role("meth", "the fit <Projection.fit>"),
            " and ",
            role("data", wrapped),
            " but not ``",
            role("func", "example"),  # ``:func:`example``` is code, not a role
            "``",
        ]
    )
    found = [(role.title, role.target) for role in sphinx_roles.roles(Path("x.py"), text)]
    assert found == [
        ("hidden_rate", "~polars_hidden_rate.hidden_rate"),
        ("passes.Imputer", ".passes.Imputer"),
        ("the fit", "Projection.fit"),
        ("SAMPLE_ROWS", "SAMPLE_ROWS"),
    ]


def _mkdocs() -> str:
    pytest.importorskip("mkdocs", reason="the docs extra builds the site")
    found = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("no mkdocs script beside this interpreter")
    return found


def _build(project: Path, page: str) -> subprocess.CompletedProcess[str]:
    (project / "docs").mkdir()
    (project / "docs" / "index.md").write_text(page)
    (project / "mkdocs.yml").write_text(
        "site_name: t\nstrict: true\nuse_directory_urls: false\n"
        "theme:\n  name: material\n  font: false\n"
        f"hooks:\n  - {ROOT / 'tools' / 'docs_site.py'}\n"
    )
    return subprocess.run(
        [_mkdocs(), "build", "--strict"],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": ""},
    )


def test_the_strict_build_fails_on_a_raw_role_and_a_remote_asset(tmp_path: Path) -> None:
    page = (
        f"# Page\n\nSee {FUNC_ROLE}`hidden_rate`.\n\n"
        '<img src="https://cdn.example.org/k.png" alt="k">\n'
    )
    built = _build(tmp_path, page)
    output = built.stdout + built.stderr
    assert built.returncode != 0
    assert "index.html: raw Sphinx role ':func:' in 'Page See :func:hidden_rate.'" in output
    assert "index.html: remote asset <img src=https://cdn.example.org/k.png>" in output
    assert "Aborted with 2 warnings in strict mode" in output


def test_the_strict_build_passes_a_clean_page(tmp_path: Path) -> None:
    built = _build(tmp_path, "# Page\n\nSee `hidden_rate` and [the site](https://example.org).\n")
    assert built.returncode == 0, built.stderr
