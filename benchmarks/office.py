"""Office files and e-books: what each type costs against plain paragraphs, how well a bold word
lands on its translation in a Word file, how the output's size compares, and whether LibreOffice
opens every output.

    python benchmarks/office.py --checkpoint /work/bench/de-en-600/best.pt

1. Throughput. The same --paragraphs Multi30k paragraphs (documents.py's) written as each type with
   the library that reads it (python-docx, python-pptx: a slide per paragraph, openpyxl: a cell
   per paragraph, odfpy: ODT and ODP, ebooklib: one chapter) and as plain text: source words per
   second, best of --rounds, types taking turns, one Translator; each output's size against its
   input's.
2. Tag placement on DOCX runs. --tag-sentences Multi30k test2016 sentences with one of
   documents.py's nouns in a bold run, one paragraph each: of the translations holding the
   expected word, the share whose bold runs are exactly it, and that hold it; with the model's
   alignment and with placement by position (alignment withheld).
3. LibreOffice (`soffice --headless --convert-to pdf`), where it is installed: whether each output
   converts without error, and each of the tests' formatted German files (tests/test_documents_*.py:
   bold and coloured runs, links, a table, an image, a comment, fields, notes, grouped shapes,
   rich shared strings) once translated by the model. `--libreoffice-only` runs just this check.

Printed, and appended to RESULTS.md.
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from documents import DATA, LANG, NOUNS, SETS, WithoutAlignment, paragraphs
from results import append_section, copy_newest
from speed import machine

from mt_cli import Translator
from mt_cli.config import DocumentConfig
from mt_cli.documents import translate_document

TITLE = "Office files and e-books: throughput, bold runs, LibreOffice"
SUFFIX = {
    "docx": ".docx",
    "pptx": ".pptx",
    "xlsx": ".xlsx",
    "odt": ".odt",
    "odp": ".odp",
    "epub": ".epub",
}


def built(kind: str, paras: list[str]) -> bytes:
    """The paragraphs as a file of `kind`, written by the library that reads the format."""
    out = io.BytesIO()
    if kind == "docx":
        import docx

        d = docx.Document()
        for p in paras:
            d.add_paragraph(p)
        d.save(out)
    elif kind == "pptx":
        import pptx

        deck = pptx.Presentation()
        for p in paras:
            deck.slides.add_slide(deck.slide_layouts[1]).placeholders[1].text_frame.text = p
        deck.save(out)
    elif kind == "xlsx":
        import openpyxl

        book = openpyxl.Workbook()
        for k, p in enumerate(paras):
            book.active.cell(row=k + 1, column=1, value=p)
        book.save(out)
    elif kind in ("odt", "odp"):
        return _odf(kind, paras)
    else:
        return _epub(paras)
    return out.getvalue()


def _odf(kind: str, paras: list[str]) -> bytes:
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation, OpenDocumentText
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    if kind == "odt":
        d = OpenDocumentText()
        for p in paras:
            d.text.addElement(P(text=p))
    else:
        d = OpenDocumentPresentation()
        layout = PageLayout(name="Folie")
        d.automaticstyles.addElement(layout)
        master = MasterPage(name="Standard", pagelayoutname=layout)
        d.masterstyles.addElement(master)
        for p in paras:
            page, frame, box = (
                Page(masterpagename=master),
                Frame(width="20cm", height="10cm", x="1cm", y="1cm"),
                TextBox(),
            )
            box.addElement(P(text=p))
            frame.addElement(box)
            page.addElement(frame)
            d.presentation.addElement(page)
    out = io.BytesIO()
    d.write(out)
    return out.getvalue()


def _epub(paras: list[str]) -> bytes:
    import html

    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("mt-benchmark")
    book.set_title("Multi30k")
    book.set_language("de")
    chapter = epub.EpubHtml(title="Kapitel", file_name="kapitel.xhtml", lang="de")
    chapter.content = "<h1>Kapitel</h1>" + "".join(f"<p>{html.escape(p)}</p>" for p in paras)
    book.add_item(chapter)
    book.toc = [chapter]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    with tempfile.TemporaryDirectory() as tmp:
        epub.write_epub(f"{tmp}/b.epub", book)
        return Path(f"{tmp}/b.epub").read_bytes()


def speed_rows(tr: Translator, paras: list[str], rounds: int) -> tuple[list[str], dict[str, bytes]]:
    words = sum(len(p.split()) for p in paras)
    files = {kind: built(kind, paras) for kind in SUFFIX}
    best: dict[str, float] = {}
    outputs: dict[str, bytes] = {}
    for _ in range(rounds):
        for kind in ["text", *SUFFIX]:
            data = "\n\n".join(paras) + "\n" if kind == "text" else files[kind]
            start = time.perf_counter()
            out = tr.translate_document(data, kind, source_lang=LANG)
            best[kind] = min(best.get(kind, float("inf")), time.perf_counter() - start)
            if isinstance(out, bytes):
                outputs[kind] = out
    rows = []
    for kind, s in best.items():
        size = f"{len(outputs[kind]) / len(files[kind]):.2f}" if kind in files else ""
        rows.append(f"| {kind} | {words / s:,.0f} | {s / best['text']:.2f} | {size} |")
        print(rows[-1], flush=True)
    return rows, outputs


def tag_rows(tr: Translator, limit: int) -> list[str]:
    import docx

    lines = (DATA / SETS["Multi30k test2016"][0]).read_text(encoding="utf-8").splitlines()
    d, words = docx.Document(), []
    for line in lines:
        hit = next((w for w in line.rstrip(".").split() if w in NOUNS), None)
        if hit is None or len(words) >= limit:
            continue
        before, _, after = re.split(rf"\b({hit})\b", line, maxsplit=1)
        p = d.add_paragraph(before)
        p.add_run(hit).bold = True
        p.add_run(after)
        words.append(NOUNS[hit])
    source = io.BytesIO()
    d.save(source)
    rows = []
    for way, engine in (
        ("alignment", tr),
        ("by position (alignment withheld)", WithoutAlignment(tr)),
    ):
        out = translate_document(
            engine, source.getvalue(), "docx", DocumentConfig(input_type="docx"), LANG
        )
        assert isinstance(out, bytes)
        held = exact = inside = 0
        for p, word in zip(docx.Document(io.BytesIO(out)).paragraphs, words):
            if not re.search(rf"\b{word}\b", p.text.lower()):
                continue
            held += 1
            bold = " ".join(r.text for r in p.runs if r.bold).lower()
            exact += re.sub(r"[^\w ]", "", bold).strip() == word
            inside += bool(re.search(rf"\b{word}\b", bold))
        rows.append(
            f"| {way} | {len(words)} | {held} | {exact / max(held, 1):.1%} | "
            f"{inside / max(held, 1):.1%} |"
        )
        print(rows[-1], flush=True)
    return rows


def formatted(tr: Translator) -> dict[str, bytes]:
    """The tests' formatted German files of each type, translated by the model."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_documents_files import build

    with tempfile.TemporaryDirectory() as tmp:
        files = {kind: build(kind, Path(tmp)) for kind in SUFFIX}
    out = {
        f"{kind} (formatted test file)": tr.translate_document(data, kind, source_lang=LANG)
        for kind, data in files.items()
    }
    return {k: v for k, v in out.items() if isinstance(v, bytes)}


def libreoffice_rows(outputs: dict[str, bytes]) -> list[str]:
    soffice = shutil.which("soffice") or shutil.which("libreoffice")
    if soffice is None:
        return ["| (LibreOffice is not installed here: not checked) | |"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, data) in enumerate(outputs.items()):
            kind = name.split()[0]
            if kind == "epub":
                continue  # LibreOffice does not read e-books
            path = Path(tmp) / f"out{k}{SUFFIX[kind]}"
            path.write_bytes(data)
            done = subprocess.run(
                [soffice, "--headless", "--convert-to", "pdf", "--outdir", tmp, str(path)],
                capture_output=True,
                text=True,
                timeout=300,
            )
            pdf = path.with_suffix(".pdf")
            ok = done.returncode == 0 and pdf.exists() and pdf.stat().st_size > 0
            rows.append(
                f"| {name} | "
                f"{'converted to PDF' if ok else 'FAILED: ' + (done.stderr.strip()[:80] or '?')} |"
            )
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--checkpoint", type=Path, required=True)
    p.add_argument("--paragraphs", type=int, default=200)
    p.add_argument("--tag-sentences", type=int, default=500)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--libreoffice-only",
        action="store_true",
        help="only the LibreOffice check of the test files",
    )
    p.add_argument("--no-append", action="store_true")
    args = p.parse_args()
    tr = Translator.load(args.checkpoint, device="cpu")
    if args.libreoffice_only:
        rows = libreoffice_rows(formatted(tr))
        command = " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
        body = "\n".join(
            [
                "| output | LibreOffice 7 headless |",
                "|---|---|",
                *rows,
                "",
                f"`{args.checkpoint}`; {machine()}. `{command}`",
            ]
        )
        print(body)
        if not args.no_append:
            append_section("Office files: LibreOffice opens the translated test files", body)
        return
    paras = [
        " ".join(src) for src, _ in paragraphs("Multi30k test2016", args.paragraphs, args.seed)
    ]
    speed, outputs = speed_rows(tr, paras, args.rounds)
    tags = tag_rows(tr, args.tag_sentences)
    office = libreoffice_rows({**outputs, **formatted(tr)})
    body = "\n".join(
        [
            "| document type | source words/s | time against plain text | output size / input size "
            "|",
            "|---|---|---|---|",
            *speed,
            "",
            f"The same {len(paras)} Multi30k test2016 paragraphs as each type (seed {args.seed}); "
            f"best of {args.rounds} "
            "rounds, types taking turns, one Translator.",
            "",
            "| placement | sentences | translations holding the word | bold runs are the word | "
            "bold runs hold it |",
            "|---|---|---|---|---|",
            *tags,
            "",
            f"Multi30k test2016 sentences with one of {len(NOUNS)} nouns in a bold run of a DOCX "
            "paragraph.",
            "",
            "| output | LibreOffice 7 headless |",
            "|---|---|",
            *office,
            "",
            f"`{args.checkpoint}` ({tr.cfg.search_method}, beam {tr.cfg.beam}); {machine()}. "
            f"`{' '.join([Path(sys.argv[0]).name, *sys.argv[1:]])}`",
        ]
    )
    print(body)
    if not args.no_append:
        append_section(TITLE, body)
        copy_newest(TITLE, "office-table")


if __name__ == "__main__":
    main()
