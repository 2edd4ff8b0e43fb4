"""Text documents in the encoding they declare: a byte-order mark; for HTML and XHTML the XML
declaration or a meta charset in the first kilobyte (where browsers look); for a PO file its
header's charset. Anything else is UTF-8. A document read in another encoding is written back in
UTF-8 with its declaration saying so, since a translation may hold characters the old encoding
lacks."""

from __future__ import annotations

import codecs
import re

from mt_cli.documents import BINARY
from mt_cli.errors import MtError

_XML = re.compile(rb"""^\s*<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""")
_META = re.compile(rb"""<meta[^>]+?charset\s*=\s*["']?([A-Za-z0-9._:-]+)""", re.I)
_PO = re.compile(rb"""Content-Type:[^"\n]*?charset=([A-Za-z0-9._:-]+)""", re.I)
# What a browser reads for these labels (the WHATWG Encoding standard): windows-1252, which places
# quotes and the euro sign where ISO-8859-1 has control characters.
_AS_BROWSERS_DO = {
    "iso-8859-1": "cp1252",
    "latin1": "cp1252",
    "us-ascii": "cp1252",
    "ascii": "cp1252",
}


def declared(raw: bytes, kind: str) -> str | None:
    """The encoding the document says it is in (None: it says nothing)."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    if raw.startswith(codecs.BOM_UTF8):
        return "utf-8"
    head = raw[:1024]
    found = None
    if kind == "html":
        found = _XML.search(head) or _META.search(head)
    elif kind == "po":
        found = _PO.search(raw[:4096])
    if found is None:
        return None
    name = found.group(1).decode("ascii").lower()
    return _AS_BROWSERS_DO.get(name, name) if kind == "html" else name


def read_document(raw: bytes, kind: str, where: str) -> str | bytes:
    """A document file's bytes as `translate_document` takes them: an office file or e-book as it
    is; text read in the encoding it declares (else UTF-8), and in another encoding than UTF-8,
    its declaration rewritten to say UTF-8."""
    if kind in BINARY:
        return raw
    encoding = declared(raw, kind) or "utf-8"
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        raise MtError(
            f"{where}: declares the encoding {encoding!r}, which is not known; convert it to UTF-8"
        ) from None
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        if name == "utf-8":
            raise MtError(
                f"{where}: not UTF-8 text (byte {e.start}); convert it, e.g. with iconv -t UTF-8"
            ) from None
        raise MtError(
            f"{where}: not {encoding} text as it declares (byte {e.start}); fix its declaration"
        ) from None
    return text if name == "utf-8" else _declared_utf8(text, kind)


def written(document: str | bytes) -> bytes:
    """A translated document as the bytes of its file: an office file as it is, text in UTF-8 (what
    read_document's declarations say)."""
    return document if isinstance(document, bytes) else document.encode("utf-8")


def _declared_utf8(text: str, kind: str) -> str:
    """The text's encoding declaration(s) made to say UTF-8 (how it is written)."""

    def utf8(m: re.Match[str]) -> str:
        whole, at = m.group(0), m.start(0)
        return whole[: m.start(1) - at] + "UTF-8" + whole[m.end(1) - at :]

    if kind == "html":
        text = re.sub(_XML.pattern.decode(), utf8, text, count=1)
        return re.sub(_META.pattern.decode(), utf8, text[:1024], count=1, flags=re.I) + text[1024:]
    return re.sub(_PO.pattern.decode(), utf8, text, count=1, flags=re.I)
