"""The run layer under the command line: the CLI parses, calls a run, formats and exits."""

from __future__ import annotations

import ast
from pathlib import Path

import polars_hidden_rate.cli as cli

# The command line's package imports: the run layer and its own parser, signals and formats.
MOST_CLI_IMPORTS = 5


def package_imports(source: str) -> set[str]:
    """The modules of the package that ``source`` imports, anywhere in it (a function's
    import counts too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "polars_hidden_rate":  # `from polars_hidden_rate import runs`
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
    return {name for name in found if name.split(".")[0] == "polars_hidden_rate"}


def test_the_command_line_imports_at_most_five_package_modules() -> None:
    imported = package_imports(Path(cli.__file__).read_text("utf-8"))
    assert len(imported) <= MOST_CLI_IMPORTS, sorted(imported)
    assert "polars_hidden_rate.runs" in imported


def test_the_count_sees_a_function_s_import() -> None:
    source = "def f():\n    from polars_hidden_rate.demo.cohort import cohort\n"
    assert package_imports(source) == {"polars_hidden_rate.demo.cohort"}
