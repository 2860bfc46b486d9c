"""Rewrite Sphinx cross-reference roles (``:func:`x```, ``:class:`~a.B```, ...) in the sources.

    python tools/sphinx_roles.py            # rewrite them in place, in every .py file below
    python tools/sphinx_roles.py --check    # list them; exit 1 if any is left

mkdocstrings does not read Sphinx roles: the API page showed them raw. In a docstring under
``polars_hidden_rate/``, a role whose target the docs site renders (a ``::: identifier`` of a
docs/*.md page, or a public member with a docstring under one) becomes the mkdocstrings-python
cross-reference ``[`title`][identifier]``, a link; any other role (a private helper, polars, the
standard library, a comment, a test) becomes ``title`` in backticks. The title is the one Sphinx
shows: the last component after ``~``, no leading dot, or an explicit ``title <target>``.

Targets are resolved with griffe, as mkdocstrings resolves them, from the scope the role is
written in, so the rewrite can be run again after modules move: it touches only the roles left.
A line a link makes longer than ruff's ``line-length`` is broken at a space, at its indentation.
``--check`` needs only the standard library; the rewrite needs griffe (the ``docs`` extra).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import re
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import griffe

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "polars_hidden_rate"
SOURCES = ("polars_hidden_rate", "tests", "benchmarks", "tools")
# The Python domain's roles, with or without the `py:` domain.
# Not after a backtick: ``:func:`x``` in a docstring is an example written as code.
ROLE = re.compile(
    r"(?<!`):(?:py:)?(?P<kind>func|class|meth|mod|attr|data|exc|obj|const|type):`(?P<body>[^`]+)`"
)
_EXPLICIT_TITLE = re.compile(r"^(?P<title>.+?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
_PRIVATE = re.compile(r"^_[^_]")  # mkdocstrings' default member filter hides these


@dataclass(frozen=True)
class Role:
    """One role as written: where, and what it names."""

    path: Path
    line: int
    start: int
    end: int
    kind: str
    title: str
    target: str


def roles(path: Path, text: str) -> Iterator[Role]:
    """The roles in ``text`` (the contents of ``path``), in order."""
    for match in ROLE.finditer(text):
        body = " ".join(match["body"].split())  # a role may wrap onto the next line
        explicit = _EXPLICIT_TITLE.match(body)
        if explicit:
            title, target = explicit["title"], explicit["target"].replace(" ", "")
        else:
            target = body.replace(" ", "")
            title = target.lstrip(".")
            if title.startswith("~"):
                title = title[1:].rsplit(".", 1)[-1]
        line = text.count("\n", 0, match.start()) + 1
        yield Role(path, line, match.start(), match.end(), match["kind"], title, target)


def python_files(root: Path = ROOT) -> list[Path]:
    """The .py files the rewrite looks at."""
    return sorted(
        path
        for folder in SOURCES
        if (root / folder).is_dir()
        for path in (root / folder).rglob("*.py")
    )


def check(root: Path = ROOT) -> int:
    """Print every role left; 1 if there is one."""
    left = [role for path in python_files(root) for role in roles(path, path.read_text())]
    for role in left:
        print(f"{role.path.relative_to(root)}:{role.line}: :{role.kind}:`{role.target}`")
    return 1 if left else 0


# ---- the rewrite (griffe) ----------------------------------------------------------------


def _load(root: Path) -> griffe.Module:
    import griffe

    loader = griffe.GriffeLoader(search_paths=[root])
    package = loader.load(PACKAGE)
    loader.resolve_aliases(implicit=True, external=False)
    assert isinstance(package, griffe.Module)
    return package


def _final(obj: griffe.Object | griffe.Alias) -> griffe.Object | None:
    """What ``obj`` is once its aliases are followed; None when that lies outside the package."""
    import griffe

    try:
        return obj.final_target if isinstance(obj, griffe.Alias) else obj
    except (griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None


def _lookup(package: griffe.Module, path: str) -> griffe.Object | griffe.Alias | None:
    if path != PACKAGE and not path.startswith(PACKAGE + "."):
        return None
    found: griffe.Object | griffe.Alias = package
    for name in path.split(".")[1:]:
        members = found.members if _final(found) is not None else {}
        if name not in members:
            return None
        found = members[name]
    return found


def rendered(package: griffe.Module, docs: Path) -> dict[str, str]:
    """``{canonical path: identifier the site renders it under}``, from the ``:::`` directives
    of the docs pages and, below each, the public members mkdocstrings shows (those with a
    docstring, not inherited, not imported into a module)."""
    shown: dict[str, str] = {}

    def walk(obj: griffe.Object | griffe.Alias, identifier: str) -> None:
        target = _final(obj)
        if target is None:
            return
        shown.setdefault(target.path, identifier)
        if not (target.is_class or target.is_module):
            return
        for name, member in target.members.items():
            if _PRIVATE.match(name) or (target.is_module and member.is_alias):
                continue
            final = _final(member)
            if final is not None and final.docstring is not None:
                walk(member, f"{identifier}.{name}")

    for page in sorted(docs.rglob("*.md")):
        for match in re.finditer(r"^:::\s*(\S+)", page.read_text(), re.MULTILINE):
            obj = _lookup(package, match[1])
            if obj is not None:
                walk(obj, match[1])
    return shown


def _module_of(package: griffe.Module, root: Path, path: Path) -> griffe.Module | None:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[0] != PACKAGE:
        return None
    if parts[-1] == "__init__":
        parts.pop()
    module = _lookup(package, ".".join(parts))
    return module if module is not None and module.is_module else None  # type: ignore[return-value]


def _scope(module: griffe.Module, line: int) -> griffe.Object:
    """The innermost class or function of ``module`` whose lines hold ``line``."""
    scope: griffe.Object = module
    while True:
        inner = [
            member
            for member in scope.members.values()
            if not member.is_alias
            and (member.is_class or member.is_function)
            and member.lineno is not None
            and member.endlineno is not None
            and member.lineno <= line <= member.endlineno
        ]
        if not inner:
            return scope
        scope = inner[0]  # type: ignore[assignment]


def resolve(package: griffe.Module, scope: griffe.Object, role: Role) -> griffe.Object | None:
    """The object of the package ``role`` names, seen from ``scope``; None when outside it."""
    import griffe

    target = role.target.lstrip("~")
    candidates: list[str] = []
    if target.startswith("."):
        module = scope.module
        candidates += [module.path + target]
        if module.parent is not None:
            candidates += [module.parent.path + target]
    else:
        head, _, rest = target.partition(".")
        with contextlib.suppress(griffe.NameResolutionError):
            candidates.append(scope.resolve(head) + (f".{rest}" if rest else ""))
        candidates += [f"{PACKAGE}.{target}", target]
    for candidate in candidates:
        found = _lookup(package, candidate)
        final = None if found is None else _final(found)
        if final is None:
            continue
        # `polars_hidden_rate.avatarize` is the module as griffe sees it, the function as a
        # :func: role means it.
        name = candidate.rsplit(".", 1)[-1]
        if final.is_module and role.kind != "mod" and name in final.members:
            final = _final(final.members[name]) or final
        return final
    return None


def _docstring_lines(text: str) -> set[int]:
    """The lines of the string statements in ``text``: docstrings, the ones mkdocstrings reads."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


_BLOCK_START = re.compile(r"^\s*(?:[-*+] |\d+\. |>>>|\.\.\.|-{3,}|={3,}|\||\"\"\"|\'\'\')")


_UNBREAKABLE = re.compile(r"(`+).+?\1|\[[^\]]*\]\[[^\]]*\]")  # code spans and links


def _cut(line: str, limit: int) -> tuple[str, str] | None:
    """``line`` cut at its last space within ``limit`` outside code spans and links."""
    inside = {
        index for span in _UNBREAKABLE.finditer(line) for index in range(span.start(), span.end())
    }
    indent = len(line) - len(line.lstrip())
    spaces = [
        index
        for index, char in enumerate(line)
        if char == " " and index > indent and index not in inside
    ]
    # A link longer than the limit goes alone on its line (ruff lets a one-word line be long).
    within = [index for index in spaces if index <= limit]
    cut = within[-1] if within else min(spaces, default=None)
    if cut is None or not line[cut:].strip():
        return None
    return line[:cut].rstrip(), line[cut:].strip()


def _same_paragraph(lines: list[str], in_docstring: list[bool], index: int) -> bool:
    """Whether ``lines[index + 1]`` goes on the paragraph of ``lines[index]`` in a docstring."""
    if index + 1 >= len(lines) or not (in_docstring[index] and in_docstring[index + 1]):
        return False
    line, following = lines[index], lines[index + 1]
    after = lines[index + 2] if index + 2 < len(lines) else ""
    return (
        bool(following.strip())
        and not line.rstrip().endswith(('"""', "'''"))
        and len(following) - len(following.lstrip()) == len(line) - len(line.lstrip())
        and not _BLOCK_START.match(following)
        and not re.match(r"^\s*-{3,}\s*$", after)  # `following` is a numpy section header
    )


def _reflow(lines: list[str], in_docstring: list[bool], dirty: list[bool], limit: int) -> None:
    """Bring the ``dirty`` lines within ``limit``: the words past it go to the start of the
    next line of their paragraph, or onto a new line at their indentation."""
    index = 0
    while index < len(lines):
        cut = _cut(lines[index], limit) if dirty[index] and len(lines[index]) > limit else None
        if cut is not None:
            head, overflow = cut
            indent = lines[index][: len(lines[index]) - len(lines[index].lstrip())]
            if _same_paragraph(lines, in_docstring, index):
                lines[index + 1] = f"{indent}{overflow} {lines[index + 1].lstrip()}"
                dirty[index + 1] = True
            else:
                lines.insert(index + 1, indent + overflow)
                in_docstring.insert(index + 1, in_docstring[index])
                dirty.insert(index + 1, True)
            lines[index] = head
        index += 1


def rewrite(
    text: str, path: Path, package: griffe.Module, shown: dict[str, str], root: Path, limit: int
) -> str:
    """``text`` with its roles rewritten (see the module docstring)."""
    module = _module_of(package, root, path)
    docstrings = _docstring_lines(text)
    pieces: list[str] = []
    long_lines: set[int] = set()
    done = 0
    for role in roles(path, text):
        replacement = f"`{role.title}`"
        if module is not None and role.line in docstrings:
            found = resolve(package, _scope(module, role.line), role)
            if found is not None and found.path in shown:
                replacement = f"[`{role.title}`][{shown[found.path]}]"
        pieces += [text[done : role.start], replacement]
        done = role.end
        long_lines.add("".join(pieces).count("\n"))
    pieces.append(text[done:])
    new = "".join(pieces)
    lines = new.split("\n")
    docstrings = _docstring_lines(new)
    in_docstring = [number + 1 in docstrings for number in range(len(lines))]
    dirty = [index in long_lines for index in range(len(lines))]
    _reflow(lines, in_docstring, dirty, limit)
    return "\n".join(lines)


def rewrite_all(root: Path = ROOT) -> int:
    with (root / "pyproject.toml").open("rb") as handle:
        limit = int(tomllib.load(handle)["tool"]["ruff"]["line-length"])
    package = _load(root)
    shown = rendered(package, root / "docs")
    for path in python_files(root):
        text = path.read_text()
        new = rewrite(text, path, package, shown, root, limit)
        if new != text:
            path.write_text(new)
            print(f"rewrote {path.relative_to(root)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list the roles left; exit 1 if any")
    args = parser.parse_args(argv)
    return check() if args.check else rewrite_all()


if __name__ == "__main__":
    sys.exit(main())
