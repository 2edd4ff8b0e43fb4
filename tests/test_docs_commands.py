"""The user guide's commands and links are real: every `mt ...` line in a fenced block of README.md
or docs/*.md parses with the `mt` app's own options (nothing is run, no model is needed), and every
relative link points at a file (and heading) that exists."""

from __future__ import annotations

import importlib
import re
import shlex
import unicodedata
from pathlib import Path

import pytest
import typer

from mt_cli.cli import app

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "(", ")"}


def fenced_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for each line inside a ``` or ~~~ fence, with `\\` continuations joined
    onto the line they continue (numbered where the command starts)."""
    out: list[tuple[int, str]] = []
    fence = ""
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not fence:
            if stripped.startswith(("```", "~~~")):
                fence = stripped[:3]
            continue
        if stripped.startswith(fence):
            fence, pending = "", None
            continue
        if pending is not None:
            pending = (pending[0], pending[1] + " " + stripped)
        else:
            pending = (number, stripped)
        if pending[1].endswith("\\"):
            pending = (pending[0], pending[1][:-1].rstrip())
            continue
        out.append(pending)
        pending = None
    return out


def mt_arguments(line: str) -> list[str] | None:
    """The arguments after `mt` (or `-m mt_cli`) of one shell line, cut at the first shell operator
    and at a comment; None when the line is not an mt command."""
    if line.startswith("$ "):
        line = line[2:].lstrip()
    if not (line.startswith("mt ") or " -m mt_cli " in f"{line} "):
        return None
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    if words[:1] == ["mt"]:
        words = words[1:]
    elif "-m" in words and words[words.index("-m") + 1 : words.index("-m") + 2] == ["mt_cli"]:
        words = words[words.index("-m") + 2 :]
    else:
        return None
    for i, word in enumerate(words):
        if word in SHELL_OPERATORS:
            return words[:i]
    return words


def mt_commands() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for number, line in fenced_lines(page.read_text(encoding="utf-8")):
            args = mt_arguments(line)
            if args is not None:
                found.append((f"{page.relative_to(ROOT)}:{number}: {line}", args))
    return found


class CommandError(Exception):
    """A documented command that `mt` would refuse: the reason, as click words it."""


def _click_errors() -> tuple[type[Exception], ...]:
    """Click's usage-error base class: typer's vendored copy (typer 0.28) and/or click itself."""
    found = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(importlib.import_module(name).ClickException)
        except ImportError:
            continue
    return tuple(found)


CLICK_ERRORS = _click_errors()


def check_parses(args: list[str]) -> None:
    """Resolve the subcommand and build its click context as `mt` would, without invoking it
    (`make_context` with resilient_parsing off): an unknown command or option, a missing required
    one or a value of the wrong type raises CommandError."""
    command = typer.main.get_command(app)
    name = "mt"
    while getattr(command, "commands", None) is not None and args and not args[0].startswith("-"):
        sub = command.commands.get(args[0])
        if sub is None:
            raise CommandError(f"no such command {args[0]!r} under {name!r}")
        command, name, args = sub, args[0], args[1:]
    try:
        command.make_context(name, list(args), resilient_parsing=False)
    except typer.Exit as e:  # an eager option (--help, --version) has done its work
        if e.exit_code:
            raise CommandError(f"exit code {e.exit_code}") from None
    except CLICK_ERRORS as e:
        raise CommandError(e.format_message()) from None


def test_the_guide_has_mt_commands_in_every_page():
    by_page = {c.split(":", 1)[0] for c, _ in mt_commands()}
    assert by_page == {str(p.relative_to(ROOT)) for p in PAGES}


@pytest.mark.parametrize(
    "where,args", mt_commands(), ids=lambda v: v.split(": ")[0] if isinstance(v, str) else ""
)
def test_every_mt_command_in_the_guide_parses(where, args):
    problem = ""
    try:
        check_parses(args)
    except CommandError as e:
        problem = str(e)
    if problem:
        pytest.fail(f"{where}\n  -> {problem}", pytrace=False)


def test_a_wrong_option_or_command_fails_the_check():
    check_parses(
        mt_arguments("mt translate --checkpoint RUN/best.pt --beam 5 in.txt  # fine") or []
    )
    for bad in (
        "mt translate --checkpoint RUN/best.pt --beams 5",  # no such option
        "mt translate --checkpoint RUN/best.pt --beam five",  # not an integer
        "mt translate --beam 5",  # --checkpoint is required
        "mt translat --checkpoint RUN/best.pt",  # no such command
        "mt tokenizer train --src a --tgt b",  # --out is required
    ):
        with pytest.raises(CommandError):
            check_parses(mt_arguments(bad) or [])


def test_continuations_prompts_comments_and_pipes_are_read_as_a_shell_would():
    text = (
        "```bash\n$ mt translate --checkpoint A.pt \\\n    --beam 4 in.txt > out.txt  # "
        "note\necho mt\n```\n"
    )
    [(number, line), (_, other)] = fenced_lines(text)
    assert number == 2 and other == "echo mt"
    assert mt_arguments(line) == ["translate", "--checkpoint", "A.pt", "--beam", "4", "in.txt"]
    assert mt_arguments("torchrun --nproc_per_node=2 -m mt_cli train --out RUN") == [
        "train",
        "--out",
        "RUN",
    ]
    assert mt_arguments(other) is None


# [text](target) and ![alt](target), outside fenced blocks and inline code.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(text: str, code: bool = False) -> str:
    """The page without its fenced blocks, and without its inline code unless `code` (brackets in
    code are not links; a heading's code is part of its anchor)."""
    kept, fence = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")) and (not fence or stripped.startswith(fence)):
            fence = "" if fence else stripped[:3]
            kept.append("")
            continue
        kept.append("" if fence else line if code else re.sub(r"`[^`]*`", "", line))
    return "\n".join(kept)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, -1 for
    repeats."""
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text(encoding="utf-8"), code=True).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        kept = [
            ch for ch in m.group(1).lower() if ch in " -_" or unicodedata.category(ch)[0] in "LN"
        ]
        slug = "".join(kept).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links() -> list[tuple[str, Path, str]]:
    found = []
    for page in PAGES:
        text = prose(page.read_text(encoding="utf-8"))
        for number, line in enumerate(text.splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                    continue
                path, _, anchor = target.partition("#")
                where = f"{page.relative_to(ROOT)}:{number}: {target}"
                found.append((where, page.parent / path if path else page, anchor))
    return found


def test_the_guide_links_to_its_pages():
    targets = {str(p.resolve().relative_to(ROOT)) for _, p, _ in relative_links()}
    assert {
        "docs/training.md",
        "docs/decoding.md",
        "docs/serving.md",
        "docs/pretrained.md",
    } <= targets
    assert {
        "docs/architecture.md",
        "docs/speed.md",
        "docs/quality.md",
        "docs/configuration.md",
    } <= targets


@pytest.mark.parametrize(
    "where,path,anchor", relative_links(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_relative_link_points_at_an_existing_file_and_heading(where, path, anchor):
    assert path.exists(), f"{where}: {path} does not exist"
    if anchor and path.suffix == ".md":
        assert anchor in anchors(path), f"{where}: no heading #{anchor} in {path.name}"
