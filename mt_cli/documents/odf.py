"""OpenDocument text and presentations (.odt, .odp): every paragraph and heading (text:p, text:h)
of the body, of headers and footers, of notes, frames and speaker notes, translated as running
text, its spans and links (text:span, text:a) put back by alignment (documents/marked.py), and the
title in the document's metadata. Everything else of the package as it was (documents/package.py).

ODF keeps text as XML text between elements, so a paragraph reads as text, tags and atoms in
document order: spans and links are tags; tabs, line breaks, notes, frames, fields (page number,
date) and comments are atoms (a placeholder through the model); bookmarks and reference marks at
a paragraph's start or end stay there; `text:s` (repeated spaces) is read as spaces.
"""

from __future__ import annotations

from lxml import etree

from mt_cli.config import DocumentConfig
from mt_cli.documents.aligned import AlignedTranslator
from mt_cli.documents.inline import Run
from mt_cli.documents.marked import ATOM, OPEN, Item, Layout, as_run, edges, tokens, translate_read
from mt_cli.documents.package import Package
from mt_cli.documents.paragraphs import translate_paragraphs
from mt_cli.documents.protect import Protector
from mt_cli.errors import MtError

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
DC = "http://purl.org/dc/elements/1.1/"
MANIFEST = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"
PARAGRAPHS = (f"{{{TEXT}}}p", f"{{{TEXT}}}h")
CONTAINERS = frozenset(f"{{{TEXT}}}{n}" for n in ("span", "a"))
ANCHORS = frozenset(
    f"{{{TEXT}}}{n}"
    for n in (
        "bookmark bookmark-start bookmark-end reference-mark reference-mark-start "
        "reference-mark-end"
    ).split()
)
DROPPED = frozenset({f"{{{TEXT}}}soft-page-break"})
MIMETYPES = {
    "odt": "application/vnd.oasis.opendocument.text",
    "odp": "application/vnd.oasis.opendocument.presentation",
}
# styles.xml holds the master pages' headers and footers; only their paragraphs are text.
MASTER_TEXT = tuple(
    f"{{{STYLE}}}{n}"
    for n in ("header", "footer", "header-left", "footer-left", "header-first", "footer-first")
)


def read_package(data: bytes, kind: str) -> Package:
    """The package, checked to be an OpenDocument file of `kind`, not encrypted, without macros."""
    name = kind.upper()
    package = Package.read(data, name)
    mimetype = package.data.get("mimetype", b"").decode("ascii", "replace").strip()
    if mimetype != MIMETYPES[kind] or "content.xml" not in package.data:
        raise MtError(
            f"not an {name} file: its mimetype is {mimetype or 'missing'}, not {MIMETYPES[kind]}"
        )
    manifest = package.data.get("META-INF/manifest.xml", b"")
    if b"encryption-data" in manifest:
        raise MtError(
            f"an encrypted (password-protected) {name} file; save it without a password first"
        )
    if any(n.startswith(("Basic/", "Scripts/")) for n in package.data):
        raise MtError(
            f"an {name} file with macros (Basic/ or Scripts/); save it without macros first"
        )
    return package


def translate_odf(
    engine: AlignedTranslator, data: bytes, kind: str, lang: str, protector: Protector | None
) -> bytes:
    package = read_package(data, kind)
    paragraphs = list(_paragraphs(package.xml("content.xml").getroot()))
    if "styles.xml" in package.data:
        for master in MASTER_TEXT:
            for part in package.xml("styles.xml").getroot().iter(master):
                paragraphs += _paragraphs(part)
    translate_read(
        engine,
        [r for r in (_read(p) for p in paragraphs) if r is not None],
        _write,
        lang,
        protector,
    )
    if "meta.xml" in package.data:
        titles = [
            t
            for t in package.xml("meta.xml").getroot().iter(f"{{{DC}}}title")
            if (t.text or "").strip()
        ]
        for title, text in zip(
            titles, translate_paragraphs(engine, [t.text for t in titles], lang, protector)
        ):
            title.text = text
    return package.write(stored_first="mimetype")


def translate_odt(
    engine: AlignedTranslator,
    data: bytes,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> bytes:
    return translate_odf(engine, data, "odt", lang, protector)


def translate_odp(
    engine: AlignedTranslator,
    data: bytes,
    lang: str,
    protector: Protector | None,
    cfg: DocumentConfig,
) -> bytes:
    return translate_odf(engine, data, "odp", lang, protector)


def _paragraphs(root: etree._Element) -> list[etree._Element]:
    return list(root.iter(*PARAGRAPHS))


def _items(p: etree._Element) -> list[Item]:
    """The paragraph in document order: its texts, spans and links opening and closing, atoms."""
    items: list[Item] = []

    def text(value: str | None, depth: int) -> None:
        if value:
            items.append(Item("text", value, depth=depth))

    def walk(node: etree._Element, depth: int) -> None:
        text(node.text, depth)
        for child in node:
            tag = child.tag
            if not isinstance(tag, str):  # a comment or processing instruction: kept as it is
                items.append(Item("atom", parts=[(None, child)], depth=depth))
            elif tag == f"{{{TEXT}}}s":
                text(" " * int(child.get(f"{{{TEXT}}}c", "1")), depth)
            elif tag in CONTAINERS and "".join(child.itertext()).strip():
                items.append(Item("open", element=child, depth=depth))
                walk(child, depth + 1)
                items.append(Item("close", depth=depth))
            elif tag in ANCHORS:
                items.append(Item("anchor", element=child, depth=depth))
            elif tag not in DROPPED:
                items.append(Item("atom", parts=[(None, child)], depth=depth))
            text(child.tail, depth)

    walk(p, 0)
    return items


def _read(p: etree._Element) -> tuple[Run, Layout] | None:
    items = _items(p)
    if not any(i.text.strip() for i in items if i.kind == "text"):
        return None
    layout = Layout(p, [], [], None)
    layout.prefix, layout.suffix, inner = edges(items)
    return as_run(inner, layout, b""), layout


def _write(layout: Layout, out: str) -> None:
    """The paragraph's content replaced by the translation, with its tags and atoms."""
    p = layout.paragraph
    for child in list(p):
        p.remove(child)
    p.text = None
    parents = [p]
    for _, element in layout.prefix:
        _append(p, element)
    for kind, value in tokens(out):
        if kind == "text":
            _put(parents[-1], str(value))
        elif kind == ATOM:
            for _, element in layout.atoms[int(value)]:
                _append(parents[-1], element)
        elif kind == OPEN:
            element = layout.tags[int(value)][1]
            assert element is not None
            parents.append(etree.SubElement(parents[-1], element.tag, dict(element.attrib)))
        else:
            parents.pop()
    for _, element in layout.suffix:
        _append(p, element)


def _append(parent: etree._Element, element: etree._Element) -> None:
    element.tail = None  # its tail was the source's text
    parent.append(element)


def _put(parent: etree._Element, text: str) -> None:
    if len(parent):
        parent[-1].tail = (parent[-1].tail or "") + text
    else:
        parent.text = (parent.text or "") + text
