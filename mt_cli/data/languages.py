"""Language codes: what a data file's suffix, a column name or a model's name says about the
languages a model reads and writes (checkpoints record them; `mt serve` lists them), and the
English names of the ISO 639-1 codes."""

from __future__ import annotations

import re
from pathlib import Path

# ISO 639-1, English names (as ISO 639-2's registration authority lists them, shortened).
_TABLE = (
    "aa:Afar ab:Abkhazian ae:Avestan af:Afrikaans ak:Akan am:Amharic an:Aragonese ar:Arabic as:Assamese "
    "av:Avaric ay:Aymara az:Azerbaijani ba:Bashkir be:Belarusian bg:Bulgarian bi:Bislama bm:Bambara "
    "bn:Bengali bo:Tibetan br:Breton bs:Bosnian ca:Catalan ce:Chechen ch:Chamorro co:Corsican cr:Cree "
    "cs:Czech cu:Church_Slavic cv:Chuvash cy:Welsh da:Danish de:German dv:Dhivehi dz:Dzongkha ee:Ewe "
    "el:Greek en:English eo:Esperanto es:Spanish et:Estonian eu:Basque fa:Persian ff:Fulah fi:Finnish "
    "fj:Fijian fo:Faroese fr:French fy:Western_Frisian ga:Irish gd:Scottish_Gaelic gl:Galician gn:Guarani "
    "gu:Gujarati gv:Manx ha:Hausa he:Hebrew hi:Hindi ho:Hiri_Motu hr:Croatian ht:Haitian hu:Hungarian "
    "hy:Armenian hz:Herero ia:Interlingua id:Indonesian ie:Interlingue ig:Igbo ii:Sichuan_Yi ik:Inupiaq "
    "io:Ido is:Icelandic it:Italian iu:Inuktitut ja:Japanese jv:Javanese ka:Georgian kg:Kongo ki:Kikuyu "
    "kj:Kuanyama kk:Kazakh kl:Kalaallisut km:Khmer kn:Kannada ko:Korean kr:Kanuri ks:Kashmiri ku:Kurdish "
    "kv:Komi kw:Cornish ky:Kyrgyz la:Latin lb:Luxembourgish lg:Ganda li:Limburgish ln:Lingala lo:Lao "
    "lt:Lithuanian lu:Luba-Katanga lv:Latvian mg:Malagasy mh:Marshallese mi:Maori mk:Macedonian "
    "ml:Malayalam mn:Mongolian mr:Marathi ms:Malay mt:Maltese my:Burmese na:Nauru nb:Norwegian_Bokmål "
    "nd:North_Ndebele ne:Nepali ng:Ndonga nl:Dutch nn:Norwegian_Nynorsk no:Norwegian nr:South_Ndebele "
    "nv:Navajo ny:Chichewa oc:Occitan oj:Ojibwa om:Oromo or:Oriya os:Ossetian pa:Punjabi pi:Pali pl:Polish "
    "ps:Pashto pt:Portuguese qu:Quechua rm:Romansh rn:Rundi ro:Romanian ru:Russian rw:Kinyarwanda "
    "sa:Sanskrit sc:Sardinian sd:Sindhi se:Northern_Sami sg:Sango si:Sinhala sk:Slovak sl:Slovenian "
    "sm:Samoan sn:Shona so:Somali sq:Albanian sr:Serbian ss:Swati st:Southern_Sotho su:Sundanese "
    "sv:Swedish sw:Swahili ta:Tamil te:Telugu tg:Tajik th:Thai ti:Tigrinya tk:Turkmen tl:Tagalog "
    "tn:Tswana to:Tonga tr:Turkish ts:Tsonga tt:Tatar tw:Twi ty:Tahitian ug:Uyghur uk:Ukrainian ur:Urdu "
    "uz:Uzbek ve:Venda vi:Vietnamese vo:Volapük wa:Walloon wo:Wolof xh:Xhosa yi:Yiddish yo:Yoruba "
    "za:Zhuang zh:Chinese zu:Zulu"
)
NAMES = {code: name.replace("_", " ") for code, name in (item.split(":") for item in _TABLE.split())}

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
