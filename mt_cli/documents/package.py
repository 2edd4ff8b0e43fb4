"""Zip packages (DOCX, PPTX, XLSX, ODT, ODP, EPUB): read safely, and written back with only the
parts that hold text replaced.

Every other member comes out byte for byte as it went in, in the same order, with the same
compression and dates, so images, styles, macros-free settings and whatever a format keeps that
mt does not understand survive. The XML parts are parsed with lxml, which keeps namespace prefixes
and declarations as they were (Word refuses a file whose mc:Ignorable names a prefix that was
renamed, as Python's own ElementTree does).

What is refused, in one line each: a file that is not a zip (an Office file with a password is an
OLE compound file), a zip with encrypted members, a macro-enabled one, and one that unpacks to far
more than it holds (member sizes and the compression ratio are bounded: a zip bomb).
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass, field

from lxml import etree

from mt_cli.errors import MtError

MAX_MEMBERS = 10_000
MAX_UNPACKED = 1 << 30  # bytes, all members together
MAX_RATIO = 200  # unpacked / packed, for members of more than a megabyte
# members that hold no document text
METADATA = (
    "docProps/",
    "META-INF/",
    "meta.xml",
    "settings.xml",
)
# an OLE compound file: what a password-protected Office file is
OLE = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


@dataclass
class Package:
    """A zip package's members in order; `parts` holds the XML trees read (and maybe changed)."""

    kind: str  # the format's name, for messages: "DOCX", ...
    infos: list[zipfile.ZipInfo]
    data: dict[str, bytes]
    parts: dict[str, etree._ElementTree] = field(default_factory=dict)
    replaced: dict[str, bytes] = field(default_factory=dict)  # members written anew as bytes

    @classmethod
    def read(cls, raw: bytes, kind: str) -> Package:
        if raw[:8] == OLE:
            raise MtError(
                f"an encrypted (password-protected) {kind} file, or an old binary Office file; "
                "remove the password or save it as a new file first"
            )
        try:
            archive = zipfile.ZipFile(io.BytesIO(raw))
        except zipfile.BadZipFile:
            raise MtError(f"not a {kind} file: not a zip package") from None
        infos = archive.infolist()
        _check_sizes(infos, kind)
        if any(info.flag_bits & 0x1 for info in infos):
            raise MtError(f"a {kind} file with encrypted members; save it without a password first")
        return cls(kind, infos, {info.filename: archive.read(info) for info in infos})

    def names(self) -> list[str]:
        return [info.filename for info in self.infos]

    def xml(self, name: str) -> etree._ElementTree:
        """The member parsed (once), to be changed: it is written back from the tree."""
        if name not in self.parts:
            self.parts[name] = etree.ElementTree(self.parsed(name))
        return self.parts[name]

    def sample(self, most: int = 2000) -> str:
        """About `most` characters of the package's text, to tell its language by: the words of its
        XML and XHTML members in order, leaving out the metadata (an application's name is no
        sample of the document's language) and what parses as no XML at all."""
        parser = etree.XMLParser(resolve_entities=False, no_network=True, recover=True)
        out: list[str] = []
        for name, data in self.data.items():
            if not name.endswith((".xml", ".xhtml", ".html", ".htm")) or name.startswith(METADATA):
                continue
            root = etree.fromstring(data, parser)
            out += [
                t
                for t in (root.itertext() if root is not None else ())
                if any(c.isalpha() for c in t)
            ]
            if sum(map(len, out)) > most:
                break
        return " ".join(" ".join(out).split())[:most]

    def _changed(self, name: str) -> bool:
        """Whether a parsed part differs from the member it came from (a part with nothing to
        translate is written as it was, byte for byte, not as lxml would write it: <a/> for
        <a></a>)."""
        canonical = etree.tostring(self.parts[name].getroot(), method="c14n")
        return canonical != etree.tostring(self.parsed(name), method="c14n")

    def parsed(self, name: str) -> etree._Element:
        """The member parsed, only to be read; a part that is not well-formed XML is refused naming
        it."""
        parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
        try:
            return etree.fromstring(self.data[name], parser)
        except etree.XMLSyntaxError as e:
            raise MtError(f"{name} in the {self.kind} file is not well-formed XML: {e}") from None

    def write(self, stored_first: str | None = None) -> bytes:
        """The package with its parsed parts serialized and its replaced members written, every
        other member as it was. `stored_first`: a member written first and uncompressed (an EPUB's
        and an OpenDocument file's mimetype, which readers look for there)."""
        out = io.BytesIO()
        infos = self.infos
        if stored_first is not None and stored_first in self.data:
            infos = sorted(infos, key=lambda info: info.filename != stored_first)
        with zipfile.ZipFile(out, "w") as archive:
            for info in infos:
                data = self.replaced.get(info.filename, self.data[info.filename])
                if info.filename in self.parts and self._changed(info.filename):
                    data = _serialized(self.parts[info.filename], data)
                kind = zipfile.ZIP_STORED if info.filename == stored_first else info.compress_type
                archive.writestr(_copy(info), data, compress_type=kind)
        return out.getvalue()


CONTENT_TYPES = "{http://schemas.openxmlformats.org/package/2006/content-types}"


def content_types(package: Package) -> dict[str, str]:
    """Each part's content type, from an Office Open XML package's [Content_Types].xml; a package
    without one is not of its kind, and a macro-enabled one is refused."""
    if "[Content_Types].xml" not in package.data:
        raise MtError(f"not a {package.kind} file: a zip without [Content_Types].xml")
    root = package.parsed("[Content_Types].xml")
    types = {
        o.get("PartName", "").lstrip("/"): o.get("ContentType", "")
        for o in root.iter(f"{CONTENT_TYPES}Override")
    }
    if any("macroEnabled" in t or "vbaProject" in t for t in types.values()) or any(
        n.lower().endswith("vbaproject.bin") for n in package.data
    ):
        raise MtError(f"a macro-enabled {package.kind} file; save it without macros first")
    return types


def _check_sizes(infos: list[zipfile.ZipInfo], kind: str) -> None:
    if len(infos) > MAX_MEMBERS:
        raise MtError(
            f"a {kind} file of {len(infos)} members, more than {MAX_MEMBERS}; not translated"
        )
    total = sum(info.file_size for info in infos)
    if total > MAX_UNPACKED:
        raise MtError(
            f"a {kind} file that unpacks to {total >> 20} MB, more than {MAX_UNPACKED >> 20} MB"
        )
    for info in infos:
        if info.file_size > 1 << 20 and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise MtError(
                f"{info.filename} in the {kind} file unpacks to "
                f"{info.file_size // max(info.compress_size, 1)}x its "
                f"size, more than {MAX_RATIO}x (a zip bomb?); not translated"
            )


def _copy(info: zipfile.ZipInfo) -> zipfile.ZipInfo:
    copy = zipfile.ZipInfo(info.filename, info.date_time)
    copy.compress_type, copy.external_attr, copy.create_system = (
        info.compress_type,
        info.external_attr,
        info.create_system,
    )
    copy.comment, copy.extra = info.comment, info.extra
    return copy


def _serialized(tree: etree._ElementTree, original: bytes) -> bytes:
    """The tree as XML with the original's declaration (standalone="yes" where it had it)."""
    body = etree.tostring(tree.getroot(), encoding="UTF-8", xml_declaration=False)
    if not original.lstrip().startswith(b"<?xml"):
        return body
    declaration = original[: original.index(b"?>") + 2]
    if b"encoding" in declaration and not re.search(
        rb"encoding=[\"']utf-8[\"']", declaration, re.I
    ):
        # written as UTF-8, whatever it said
        declaration = b'<?xml version="1.0" encoding="UTF-8"?>'
    newline = b"\r\n" if original[len(declaration) : len(declaration) + 2] == b"\r\n" else b"\n"
    return declaration + newline + body
