"""Two directives whose content is generated from the code at build time, so the reference cannot drift from it.

``.. banditkit-cli::``       every ``banditkit`` command's ``--help`` (walks :func:`banditkit.cli.build_parser`'s
                             sub-parsers, nested ones such as ``data fetch`` included), one section per command.
``.. banditkit-env-ids::``   a table of the Gymnasium ids ``import banditkit`` registers
                             (:data:`banditkit.environments.ENV_IDS`) and the class each one makes.

One autodoc filter: a NamedTuple field whose docstring is Python's generated "Alias for field number N" is left
out (the states' fields are described in their module's docstring).

And one source rewrite: in the Markdown pages, a link to a repository file outside ``docs/`` (the benchmark tables
that ``docs/usage.md`` cites as ``../benchmarks/results/x.md``) becomes a download link to that file, since the site
holds only ``docs/``.  A link to a file that does not exist is left alone, so MyST still fails the build on it.
"""

from __future__ import annotations

import argparse
import os
import re

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's sub-parsers by name (none for a leaf command)."""
    for action in parser._actions:  # argparse keeps sub-parsers in a private action; there is no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]):
    """``(command words, parser)`` for ``parser`` and, depth first, every sub-parser below it."""
    yield path, parser
    for name, child in _subcommands(parser).items():
        yield from _walk(child, (*path, name))


def _section(title: str, ids: str) -> nodes.section:
    sec = nodes.section(ids=[nodes.make_id(ids)])
    sec += nodes.title(text=title)
    return sec


class CLIHelp(Directive):
    """``banditkit --help`` and each sub-command's ``--help``, as literal blocks under one section each."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from banditkit.cli import build_parser

        os.environ["COLUMNS"] = "100"  # argparse wraps help at $COLUMNS; fix it so the page does not vary
        out: list[nodes.Node] = []
        for path, parser in _walk(build_parser(), ("banditkit",)):
            title = " ".join(path)
            sec = _section(title, "cli-" + "-".join(path[1:]) if len(path) > 1 else "cli-banditkit")
            text = parser.format_help()
            sec += nodes.literal_block(text, text, language="none")
            out.append(sec)
        return out


class EnvIds(Directive):
    """A two-column table: Gymnasium id, the environment class it makes."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from banditkit.environments import ENV_IDS

        table = nodes.table()
        group = nodes.tgroup(cols=2)
        table += group
        group += nodes.colspec(colwidth=1)
        group += nodes.colspec(colwidth=2)
        head = nodes.thead()
        group += head
        head += self._row("id", "class", literal=False)
        body = nodes.tbody()
        group += body
        for env_id, entry in ENV_IDS.items():
            body += self._row(env_id, entry.replace(":", "."))
        return [table]

    @staticmethod
    def _row(first: str, second: str, literal: bool = True) -> nodes.row:
        row = nodes.row()
        for text in (first, second):
            entry = nodes.entry()
            para = nodes.paragraph()
            para += nodes.literal(text, text) if literal else nodes.Text(text)
            entry += para
            row += entry
        return row


_ALIAS = re.compile(r"Alias for field number \d+")


def skip_field_aliases(app: Sphinx, what: str, name: str, obj, skip: bool, options) -> bool | None:
    """``autodoc-skip-member`` hook: skip NamedTuple fields documented only by their generated alias text."""
    doc = getattr(obj, "__doc__", None)
    if isinstance(doc, str) and _ALIAS.fullmatch(doc.strip()):
        return True
    return None


_LINK = re.compile(r"\[([^\]]+)\]\(([^()\s#]+)(#[^()\s]*)?\)")


def outside_links(app: Sphinx, docname: str, source: list[str]) -> None:
    """Rewrite ``[text](../path)`` to ``{download}`text <../path>``` where the path is an existing file outside the
    source folder (``source-read`` hook, Markdown pages only)."""
    page = str(app.env.doc2path(docname))
    if not page.endswith(".md"):
        return
    srcdir = os.path.realpath(app.srcdir)

    def rewrite(m: re.Match) -> str:
        text, target = m.group(1), m.group(2)
        if "://" in target or target.startswith("mailto:"):
            return m.group(0)
        path = os.path.realpath(os.path.join(os.path.dirname(page), target))
        if path.startswith(srcdir + os.sep) or not os.path.isfile(path):
            return m.group(0)
        label = text.replace("`", "")
        return f"{{download}}`{label} <{target}>`"

    source[0] = _LINK.sub(rewrite, source[0])


def setup(app: Sphinx) -> dict:
    app.connect("source-read", outside_links)
    app.connect("autodoc-skip-member", skip_field_aliases)
    app.add_directive("banditkit-cli", CLIHelp)
    app.add_directive("banditkit-env-ids", EnvIds)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
