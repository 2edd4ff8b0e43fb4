"""The package layout keeps its promises: imports point down, files and functions stay short,
decoding loads nothing of training, and translations did not change when the code moved."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mt_cli"
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "decode"

# Lower layers never import higher ones: data (and documents, which knows formats, not models) ->
# model -> decode -> train -> interop/tools/serve -> cli (/work/shared/DESIGN.md; layer 0 is config,
# errors, files, device and metrics, with their helpers).
LAYERS = {
    "mt_cli.errors": 0,
    "mt_cli.files": 0,
    "mt_cli.config": 0,
    "mt_cli.device": 0,
    "mt_cli.metrics": 0,
    "mt_cli.scripts": 0,
    "mt_cli.data": 1,
    "mt_cli.documents": 1,
    "mt_cli.model": 2,
    "mt_cli.decode": 3,
    "mt_cli.train": 4,
    "mt_cli.interop": 5,
    "mt_cli.tools": 5,
    "mt_cli.serve": 5,
    "mt_cli.cli": 6,
    "mt_cli.__main__": 6,
}
# Packages of one layer that must not import each other either: what both need lives below them.
APART = [("mt_cli.serve", "mt_cli.tools")]


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _layer(module: str) -> int:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return LAYERS[prefix]
    raise AssertionError(f"{module}: not in any layer; add it to LAYERS")


def _imports(path: Path, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mt_cli"):
            found.add(node.module)
            # `from mt_cli.model import checkpoint`
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("mt_cli"))
    return found


def test_imports_point_down_the_layers_and_decoding_never_imports_training():
    modules = _modules()
    wrong = []
    for name, path in modules.items():
        if name == "mt_cli":  # its lazy `Translator` attribute is the public API, not a dependency
            continue
        for target in _imports(path, top_level_only=False):
            if target not in modules and target.rsplit(".", 1)[0] in modules:
                target = target.rsplit(".", 1)[0]  # a name imported from a module, not a module
            if target == "mt_cli":
                continue
            if _layer(target) > _layer(name) or (
                name.startswith("mt_cli.decode") and target.startswith("mt_cli.train")
            ):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_serve_and_tools_do_not_import_each_other():
    def package(module: str) -> str:
        return next(
            (p for pair in APART for p in pair if module == p or module.startswith(p + ".")), ""
        )

    modules = _modules()
    sideways = []
    for name, path in modules.items():
        for target in _imports(path, top_level_only=False):
            here, there = package(name), package(target)
            if here and there and here != there:
                sideways.append(f"{name} imports {target}")
    assert not sideways, "\n".join(sideways)


def test_module_level_imports_have_no_cycles():
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        deps = set()
        for target in _imports(path, top_level_only=True):
            while target not in modules and "." in target:
                target = target.rsplit(".", 1)[0]
            if target != name and target in modules:
                deps.add(target)
        graph[name] = deps
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for dep in graph[node]:
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(trail + [node, dep]))
            if dep not in state:
                visit(dep, trail + [node])
        state[node] = 2

    for name in graph:
        if name not in state:
            visit(name, [])


def test_files_stay_under_400_lines_and_functions_under_60():
    """A function's length is its body's: a CLI command's signature, one option a few lines,
    declares."""
    long_files, long_functions = [], []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > 400:
            long_files.append(f"{path}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.body[0].lineno + 1
                if n > 60:
                    long_functions.append(f"{name}.{node.name}: {n} lines")
    assert not long_files and not long_functions, "\n".join(long_files + long_functions)


def _lines(name: str) -> list[str]:
    return (FIXTURE / name).read_text(encoding="utf-8").split("\n")[:-1]


def test_importing_mt_cli_and_decoding_loads_no_training_module_nor_datasets_nor_matplotlib():
    code = f"""
import sys
import mt_cli
assert "torch" not in sys.modules, "import mt_cli alone loaded torch"
from mt_cli import Translator
translator = Translator.load({str(FIXTURE / "model.pt")!r}, device="cpu", beam=4)
out = translator.translate(["Ein hund läuft.", ""])
assert len(out) == 2 and out[1] == ""
unused = ("datasets", "matplotlib")
loaded = sorted(m for m in sys.modules if m.startswith("mt_cli.train") or m.split(".")[0] in unused)
print(",".join(loaded))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_mt_translate_loads_nothing_it_does_not_use(tmp_path):
    """Each of these was a tenth of a second or more of `mt translate`'s start: pydantic comes with
    typer 0.29, yaml and the rest with training and plotting (benchmarks/startup.py times it)."""
    (tmp_path / "in.txt").write_text("Ein hund läuft.\n", encoding="utf-8")
    code = f"""
import runpy, sys
sys.argv = ["mt", "translate", "--checkpoint", {str(FIXTURE / "model.pt")!r},
            {str(tmp_path / "in.txt")!r}, "--output", {str(tmp_path / "out.txt")!r},
            "--device", "cpu"]
try:
    runpy.run_module("mt_cli", run_name="__main__")
except SystemExit as e:
    assert not e.code, e.code
unused = ("pydantic", "yaml", "rich", "datasets", "matplotlib", "transformers", "pandas")
loaded = (m for m in sys.modules if m.startswith("mt_cli.train") or m.split(".")[0] in unused)
print(",".join(sorted(loaded)))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").count("\n") == 1


@pytest.mark.parametrize("beam, saved", [(1, "greedy.txt"), (4, "beam4.txt")])
def test_translations_are_byte_identical_to_those_saved_before_the_layout_moved(beam, saved):
    from mt_cli import Translator

    src = _lines("src.txt")
    assert Translator.load(FIXTURE / "model.pt", device="cpu", beam=beam).translate(src) == _lines(
        saved
    )


def test_mt_translate_writes_the_saved_translations_across_its_10000_line_chunks(tmp_path):
    src, want = _lines("src.txt"), _lines("greedy.txt")
    n = 10_003  # crosses the first chunk boundary (translator.CHUNK_LINES) by three lines
    (tmp_path / "in.txt").write_text(
        "".join(src[i % len(src)] + "\n" for i in range(n)), encoding="utf-8"
    )
    cmd = [
        sys.executable,
        "-m",
        "mt_cli",
        "translate",
        "--checkpoint",
        FIXTURE / "model.pt",
        tmp_path / "in.txt",
        "--output",
        tmp_path / "out.txt",
        "--beam",
        "1",
        "--batch-size",
        "256",
        "--device",
        "cpu",
    ]
    subprocess.run(list(map(str, cmd)), check=True, capture_output=True, timeout=600)
    out = (tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")[:-1]
    assert out == [want[i % len(src)] for i in range(n)]


def test_library_errors_name_fields_not_command_line_flags():
    """Outside cli/, a raised error's message names the config field (train.amp, decode.nbest) or
    the thing itself, never a --flag: cli/ alone speaks in flags."""
    flagged = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                for part in ast.walk(node.exc):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str):
                        if re.search(r"(?<![\w-])--[a-z]", part.value):
                            flagged.append(
                                f"{path.relative_to(ROOT)}:{node.lineno}: {part.value.strip()[:60]}"
                            )
    assert flagged == []


def test_docs_architecture_maps_every_module_in_its_package():
    """docs/architecture.md's package map names each module on its package's lines, so the picture
    a newcomer reads is the layout the imports above are checked against."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("```\nmt_cli/\n", 1)[1].split("```", 1)[0]
    lines_of: dict[str, str] = {}
    package = ""
    for line in block.splitlines():
        head = re.match(r"  (\w+)/", line)
        if head:
            package = head.group(1)
        elif re.match(r"  \S", line):
            package = ""  # a top-level module's line
        lines_of[package] = lines_of.get(package, "") + " " + line
    missing = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and not re.search(
            rf"(?<![\w/]){re.escape(path.name)}\b",
            lines_of.get(path.parent.name if path.parent != PACKAGE else "", ""),
        )
    ]
    assert not missing, f"docs/architecture.md does not map: {missing}"
