"""The name a client certificate gives its connection: the subject's distinguished name as
Java's X500Principal.getName() writes it (RFC 2253), mapped by `ssl.principal.mapping.rules`
(Kafka's SslPrincipalMapper: `RULE:pattern/replacement/[LU]`, first full match wins,
`DEFAULT` keeps the DN). Loaded only by TLS listeners that ask for client certificates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# --- the distinguished name, as Java writes it ---------------------------------------------

# The attribute keywords Java's RFC 2253 output uses (the others appear as OID=#<DER hex>),
# by the names Python's ssl module gives attributes.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# Attributes Java writes by OID, with the ASN.1 string tag a certificate carries them in.
_OIDS = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),  # IA5String
    "serialNumber": ("2.5.4.5", 0x13),  # PrintableString
    "title": ("2.5.4.12", 0x0C),
    "surname": ("2.5.4.4", 0x0C),
    "givenName": ("2.5.4.42", 0x0C),
    "initials": ("2.5.4.43", 0x0C),
    "generationQualifier": ("2.5.4.44", 0x0C),
    "pseudonym": ("2.5.4.65", 0x0C),
    "businessCategory": ("2.5.4.15", 0x0C),
    "postalCode": ("2.5.4.17", 0x0C),
}


def _der_hex(tag: int, value: str) -> str:
    data = value.encode()
    if len(data) < 0x80:
        length = bytes([len(data)])
    else:
        size = (len(data).bit_length() + 7) // 8
        length = bytes([0x80 | size]) + len(data).to_bytes(size, "big")
    return "#" + (bytes([tag]) + length + data).hex()


def _escape(value: str) -> str:
    """RFC 2253 escaping, as Java applies it."""
    out = []
    for index, char in enumerate(value):
        if char in ',+"\\<>;' or (char == "#" and index == 0):
            out.append("\\" + char)
        elif char == " " and (index == 0 or index == len(value) - 1):
            out.append("\\ ")
        else:
            out.append(char)
    return "".join(out)


def distinguished_name(subject: Any) -> str:
    """The RFC 2253 name of a certificate subject as Python's ssl module gives it
    (getpeercert()["subject"]: relative names in certificate order, each a tuple of
    (attribute, value)): last relative name first, as Java writes it."""
    parts = []
    for rdn in reversed(subject):
        attributes = []
        for attribute, value in rdn:
            keyword = _KEYWORDS.get(attribute)
            if keyword is not None:
                attributes.append(f"{keyword}={_escape(value)}")
            elif attribute in _OIDS:
                oid, tag = _OIDS[attribute]
                attributes.append(f"{oid}={_der_hex(tag, value)}")
            else:  # an OID Python has no name for: it gives the dotted form
                attributes.append(f"{attribute}={_der_hex(0x0C, value)}")
        parts.append("+".join(attributes))
    return ",".join(parts)


# --- ssl.principal.mapping.rules -------------------------------------------------------------

_RULE = re.compile(
    r"(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)"
    r"/(?P<case>[LU]?)"
)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True, slots=True)
class MappingRule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        mapped = self.pattern.sub(self._python_replacement(), name)
        if self.case == "L":
            return mapped.lower()
        if self.case == "U":
            return mapped.upper()
        return mapped

    def _python_replacement(self) -> str:
        # Java's $n back references; one beyond the groups the pattern has is kept as
        # literal text, as Kafka's mapper keeps it.
        groups = self.pattern.groups if self.pattern is not None else 0
        escaped = self.replacement.replace("\\", "\\\\")

        def reference(match: re.Match[str]) -> str:
            number = int(match[1])
            return f"\\g<{number}>" if 0 < number <= groups else match[0]

        return _BACK_REFERENCE.sub(reference, escaped)


def parse_mapping_rules(text: str) -> tuple[MappingRule, ...]:
    """Kafka's rule list: comma-separated `DEFAULT` and `RULE:pattern/replacement/[LU]`."""
    rules = []
    position = 0
    text = text.strip()
    while position < len(text):
        while position < len(text) and text[position] in " ,":
            position += 1
        if position >= len(text):
            break
        match = _RULE.match(text, position)
        end = match.end() if match else position
        rest = text[end:].lstrip()
        if match is None or (rest and not rest.startswith(",")):
            bad = text[position:].split(",", 1)[0]
            raise ValueError(f"Invalid rule: {bad}")
        if match["default"]:
            rules.append(MappingRule(None))
        else:
            try:
                pattern = re.compile(match["pattern"])
            except re.error as exc:
                raise ValueError(f"Invalid rule: {match[0]}: {exc}") from None
            rules.append(MappingRule(pattern, match["replacement"], match["case"]))
        position = end
    return tuple(rules)


class NoMatchingRule(ValueError):
    pass


def map_distinguished_name(rules: tuple[MappingRule, ...], name: str) -> str:
    for rule in rules:
        mapped = rule.apply(name)
        if mapped is not None:
            return mapped
    raise NoMatchingRule(f"No rules apply to {name}")
