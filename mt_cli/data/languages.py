"""Language codes: what a data file's suffix, a column name or a model's name says about the
languages a model reads and writes (checkpoints record them; `mt serve` lists them), and the
English names of the ISO 639-1 codes."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path

from mt_cli.errors import MtError

# ISO 639-1, English names (as ISO 639-2's registration authority lists them, shortened).
_TABLE = (
    "aa:Afar ab:Abkhazian ae:Avestan af:Afrikaans ak:Akan am:Amharic an:Aragonese ar:Arabic "
    "as:Assamese av:Avaric ay:Aymara az:Azerbaijani ba:Bashkir be:Belarusian bg:Bulgarian "
    "bi:Bislama bm:Bambara bn:Bengali bo:Tibetan br:Breton bs:Bosnian ca:Catalan ce:Chechen "
    "ch:Chamorro co:Corsican cr:Cree cs:Czech cu:Church_Slavic cv:Chuvash cy:Welsh da:Danish "
    "de:German dv:Dhivehi dz:Dzongkha ee:Ewe el:Greek en:English eo:Esperanto es:Spanish "
    "et:Estonian eu:Basque fa:Persian ff:Fulah fi:Finnish fj:Fijian fo:Faroese fr:French "
    "fy:Western_Frisian ga:Irish gd:Scottish_Gaelic gl:Galician gn:Guarani gu:Gujarati gv:Manx "
    "ha:Hausa he:Hebrew hi:Hindi ho:Hiri_Motu hr:Croatian ht:Haitian hu:Hungarian hy:Armenian "
    "hz:Herero ia:Interlingua id:Indonesian ie:Interlingue ig:Igbo ii:Sichuan_Yi ik:Inupiaq "
    "io:Ido is:Icelandic it:Italian iu:Inuktitut ja:Japanese jv:Javanese ka:Georgian kg:Kongo "
    "ki:Kikuyu kj:Kuanyama kk:Kazakh kl:Kalaallisut km:Khmer kn:Kannada ko:Korean kr:Kanuri "
    "ks:Kashmiri ku:Kurdish kv:Komi kw:Cornish ky:Kyrgyz la:Latin lb:Luxembourgish lg:Ganda "
    "li:Limburgish ln:Lingala lo:Lao lt:Lithuanian lu:Luba-Katanga lv:Latvian mg:Malagasy "
    "mh:Marshallese mi:Maori mk:Macedonian ml:Malayalam mn:Mongolian mr:Marathi ms:Malay "
    "mt:Maltese my:Burmese na:Nauru nb:Norwegian_Bokmål nd:North_Ndebele ne:Nepali ng:Ndonga "
    "nl:Dutch nn:Norwegian_Nynorsk no:Norwegian nr:South_Ndebele nv:Navajo ny:Chichewa "
    "oc:Occitan oj:Ojibwa om:Oromo or:Oriya os:Ossetian pa:Punjabi pi:Pali pl:Polish ps:Pashto "
    "pt:Portuguese qu:Quechua rm:Romansh rn:Rundi ro:Romanian ru:Russian rw:Kinyarwanda "
    "sa:Sanskrit sc:Sardinian sd:Sindhi se:Northern_Sami sg:Sango si:Sinhala sk:Slovak "
    "sl:Slovenian sm:Samoan sn:Shona so:Somali sq:Albanian sr:Serbian ss:Swati st:Southern_Sotho "
    "su:Sundanese sv:Swedish sw:Swahili ta:Tamil te:Telugu tg:Tajik th:Thai ti:Tigrinya "
    "tk:Turkmen tl:Tagalog tn:Tswana to:Tonga tr:Turkish ts:Tsonga tt:Tatar tw:Twi ty:Tahitian "
    "ug:Uyghur uk:Ukrainian ur:Urdu uz:Uzbek ve:Venda vi:Vietnamese vo:Volapük wa:Walloon "
    "wo:Wolof xh:Xhosa yi:Yiddish yo:Yoruba za:Zhuang zh:Chinese zu:Zulu"
)
NAMES = {
    code: name.replace("_", " ") for code, name in (item.split(":") for item in _TABLE.split())
}

# A code with a region or script after it: pt_BR, pt-BR, zh-Hant, sr_Latn.
_CODE = re.compile(r"([a-z]{2})(?:[_-]([A-Za-z]{2}|[A-Za-z]{4}|\d{3}))?")


def language_code(text: str) -> str | None:
    """`text` when it is an ISO 639-1 code, alone or with a region or script (de, pt_BR, zh-Hant);
    None for anything else (src, train, ROMANCE, mul)."""
    found = _CODE.fullmatch(text)
    return text if found and found.group(1) in NAMES else None


def language_name(code: str) -> str:
    """The English name of a code (de: German; pt_BR: Portuguese (BR)); an unknown code as it is."""
    found = _CODE.fullmatch(code)
    if not found or found.group(1) not in NAMES:
        return code
    return NAMES[found.group(1)] + (f" ({found.group(2)})" if found.group(2) else "")


def suffix_language(path: Path) -> str | None:
    """The language a text file's suffix names: train.de -> de, train.pt_BR.gz -> pt_BR."""
    name = Path(path).name
    name = name[: -len(".gz")] if name.endswith(".gz") else name
    suffix = name.rsplit(".", 1)[1] if "." in name else ""
    return language_code(suffix)


# ISO 639-3 -> ISO 639-1 for the languages NLLB-200 names by 639-3 code and script (deu_Latn):
# the 639-2/T codes with a 639-1 code (from ISO 639-3's tables), and for macrolanguages the
# standard variety NLLB uses (arb: Arabic, zsm: Malay, swh: Swahili, ...).
_ISO3 = (
    "afr:af aka:ak amh:am asm:as bak:ba bam:bm bel:be ben:bn bod:bo bos:bs bul:bg cat:ca ces:cs "
    "cym:cy dan:da deu:de dzo:dz ell:el eng:en epo:eo est:et eus:eu ewe:ee fao:fo fij:fj fin:fi "
    "fra:fr gla:gd gle:ga glg:gl grn:gn guj:gu hat:ht hau:ha heb:he hin:hi hrv:hr hun:hu hye:hy "
    "ibo:ig ind:id isl:is ita:it jav:jv jpn:ja kan:kn kas:ks kat:ka kaz:kk khm:km kik:ki kin:rw "
    "kir:ky kon:kg kor:ko lao:lo lim:li lin:ln lit:lt ltz:lb lug:lg mal:ml mar:mr mkd:mk mlt:mt "
    "mri:mi mya:my nld:nl nno:nn nob:nb nya:ny oci:oc pan:pa pol:pl por:pt ron:ro run:rn rus:ru "
    "sag:sg san:sa sin:si slk:sk slv:sl smo:sm sna:sn snd:sd som:so sot:st spa:es srd:sc srp:sr "
    "ssw:ss sun:su swe:sv tam:ta tat:tt tel:te tgk:tg tgl:tl tha:th tir:ti tsn:tn tso:ts tuk:tk "
    "tur:tr twi:tw uig:ug ukr:uk urd:ur vie:vi wol:wo xho:xh yor:yo zho:zh zul:zu arb:ar pes:fa "
    "zsm:ms swh:sw lvs:lv khk:mn plt:mg gaz:om uzn:uz azj:az npi:ne ory:or als:sq ydd:yi quy:qu "
    "ayr:ay pbt:ps kmr:ku"
)
ISO3_TO_ISO1 = dict(item.split(":") for item in _ISO3.split())
# Where a 639-1 code has several scripts in a model and the code names none: the usual one.
_USUAL_SCRIPT = {"zh": "Hans"}


def short_code(code: str) -> str:
    """A model's language code as ISO 639-1 where there is one: deu_Latn -> de, de -> de, ast ->
    ast."""
    base = re.split(r"[_-]", code, maxsplit=1)[0]
    return ISO3_TO_ISO1.get(base, base)


def resolve_language(given: str, codes: Sequence[str], what: str) -> str:
    """The model's code (one of `codes`) that `given` names: itself, or a 639-1 code for a model
    that spells it otherwise (de for deu_Latn; zh-Hant for zho_Hant). Anything else is one line
    naming `what` (a config field) and the model's nearest codes."""
    if given in codes:
        return given
    folded = {c.lower().replace("-", "_"): c for c in codes}
    if given.lower().replace("-", "_") in folded:
        return folded[given.lower().replace("-", "_")]
    base, _, script = given.replace("-", "_").partition("_")
    same = [
        c
        for c in codes
        if base.lower() in (short_code(c), re.split(r"[_-]", c, maxsplit=1)[0].lower())
    ]
    if len(same) > 1:
        script = script or _USUAL_SCRIPT.get(base.lower(), "")
        same = [c for c in same if script and c.lower().endswith("_" + script.lower())] or same
    if len(same) == 1:
        return same[0]
    near = same or difflib.get_close_matches(given, codes, n=6, cutoff=0.5)
    near = near or [c for c in codes if c[:1].lower() == given[:1].lower()][:6]
    hint = f"nearest: {', '.join(near)}" if near else f"it has {', '.join(list(codes)[:8])}"
    hint += f" ({len(codes)} in all)" if len(codes) > len(near) else ""
    raise MtError(f"{what} {given!r}: the model has no such language; {hint}")
