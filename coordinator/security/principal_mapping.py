"""The principal of a client certificate, as a Kafka broker builds it.

Kafka's `DefaultKafkaPrincipalBuilder` takes the peer certificate's subject, printed by
Java's `X500Principal.getName()` (RFC 2253), maps it through `ssl.principal.mapping.rules`
and prefixes `User:`. Both halves are here:

- `subject_dn(der)`: the subject of a DER certificate printed the way Java prints it:
  RDNs last to first, joined by ","; the AVAs of a multi-valued RDN joined by "+" in
  their encoded order; only CN, C, L, ST, O, OU, STREET, DC and UID get a keyword, every
  other attribute is its dotted OID with the value as "#" and the lower-case hex of its DER
  encoding (so emailAddress is `1.2.840.113549.1.9.1=#16...`); string values have
  `, = + < > # ; " \\` escaped with a backslash, NUL as `\\00`, and leading or trailing
  spaces (and CRs) escaped; other characters, non-ASCII included, are printed as they are.
- `PrincipalMapper(rules)`: Kafka's rule list. `DEFAULT` keeps the DN;
  `RULE:pattern/replacement/[L|U]` applies when the pattern matches the whole DN, and the
  name is then the DN with every match of the pattern replaced (Java `replaceAll`:
  `$n` group references, `\\x` a literal x, a `$n` past the pattern's groups taken
  literally), lower- or upper-cased with L or U. Rules are tried in order; the first that
  applies wins; when none does the client is refused (Kafka fails its authentication).
  Rules are separated by commas, which may also appear inside a rule's pattern or
  replacement (a `/` in them is written `\\/`). Kafka's default is `DEFAULT`.

Patterns are Java regular expressions; Python's `re` reads the common subset (groups,
classes, lazy quantifiers, anchors). Named groups `(?<name>...)` are accepted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

USER_TYPE = "User"
DEFAULT_RULES = "DEFAULT"


class PrincipalMappingError(ValueError):
    """An `ssl.principal.mapping.rules` value Kafka would refuse."""


class NoMatchingRule(LookupError):
    """No rule applies to a DN (Kafka refuses the client's authentication)."""


# --- the subject DN, as Java's X500Principal.getName() prints it --------------------------

# OIDs that RFC 2253 output names with a keyword (Java's AVAKeyword table, rfc2253 column).
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java prints as text: UTF8String, PrintableString, T61String, IA5String,
# GeneralString, BMPString. Any other value type is printed as #hex.
_STRING_TAGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED = ',=+<>#;"\\'
_PRINTABLE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 '()+,-./:=?")


class DerError(ValueError):
    """The certificate does not parse as DER where kcoord reads it."""


def _tlv(data: bytes, at: int) -> tuple[int, int, int, int]:
    """(tag, start of contents, end of contents, end of element) of the element at ``at``."""
    if at + 2 > len(data):
        raise DerError("truncated element")
    tag = data[at]
    if tag & 0x1F == 0x1F:
        raise DerError("multi-byte tags are not used in certificate names")
    length = data[at + 1]
    pos = at + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise DerError("bad length")
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    end = pos + length
    if end > len(data):
        raise DerError("element runs past its container")
    return tag, pos, end, end


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """The elements inside [start, end): (tag, contents start, contents end, element start)."""
    out = []
    at = start
    while at < end:
        tag, c_start, c_end, nxt = _tlv(data, at)
        out.append((tag, c_start, c_end, at))
        at = nxt
    if at != end:
        raise DerError("elements overrun their container")
    return out


def _oid(body: bytes) -> str:
    if not body:
        raise DerError("empty OID")
    parts: list[int] = []
    value = 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            if not parts:
                # The first sub-identifier carries two arcs (X.690 8.19.4).
                head = value
                parts.extend((0, head) if head < 40 else (1, head - 40) if head < 80 else (2, head - 80))
            else:
                parts.append(value)
            value = 0
    return ".".join(str(p) for p in parts)


def _escape_value(text: str) -> str:
    escaped = []
    for ch in text:
        if ch in _ESCAPED:
            escaped.append("\\" + ch)
        elif ch == "\x00":
            escaped.append("\\00")
        else:
            escaped.append(ch)   # printable or not, Java prints it as it is
    chars = "".join(escaped)
    lead = 0
    while lead < len(chars) and chars[lead] in " \r":
        lead += 1
    trail = len(chars) - 1
    while trail >= 0 and chars[trail] in " \r":
        trail -= 1
    return "".join(("\\" + c) if (i < lead or i > trail) else c for i, c in enumerate(chars))


def _ava(data: bytes, start: int, end: int) -> str:
    parts = _children(data, start, end)
    if len(parts) != 2 or parts[0][0] != 0x06:
        raise DerError("an attribute is not (OID, value)")
    oid = _oid(data[parts[0][1]:parts[0][2]])
    tag, v_start, v_end, v_at = parts[1]
    keyword = _KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{data[v_at:v_end].hex()}"
    return f"{keyword}={_escape_value(data[v_start:v_end].decode('utf-8', errors='replace'))}"


def name_rfc2253(data: bytes, start: int, end: int) -> str:
    """An X.501 Name (the contents of its SEQUENCE) in Java's RFC 2253 form."""
    rdns = []
    for tag, r_start, r_end, _ in _children(data, start, end):
        if tag != 0x31:
            raise DerError("an RDN is not a SET")
        avas = [_ava(data, a_start, a_end) for a_tag, a_start, a_end, _ in _children(data, r_start, r_end)
                if a_tag == 0x30]
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def subject_dn(der: bytes) -> str:
    """The subject of a DER X.509 certificate, as Java's X500Principal.getName() prints it."""
    tag, c_start, c_end, _ = _tlv(der, 0)
    if tag != 0x30:
        raise DerError("not a certificate")
    tbs_tag, t_start, t_end, _ = _tlv(der, c_start)
    if tbs_tag != 0x30:
        raise DerError("no TBSCertificate")
    fields = _children(der, t_start, t_end)
    # version [0] (optional), serialNumber, signature, issuer, validity, subject, ...
    index = 1 if fields and fields[0][0] == 0xA0 else 0
    if len(fields) < index + 5:
        raise DerError("TBSCertificate is too short")
    s_tag, s_start, s_end, _ = fields[index + 4]
    if s_tag != 0x30:
        raise DerError("the subject is not a Name")
    return name_rfc2253(der, s_start, s_end)


# --- ssl.principal.mapping.rules ---------------------------------------------------------

# One rule of the list: DEFAULT, RULE:pattern/replacement/[LU], or anything else (invalid,
# unless empty). A pattern or replacement is a run of escaped characters or of characters
# other than "\" and "/". The list splitter takes a rule up to the next comma that ends one.
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLIT = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSE = re.compile(_RULE)
_BACKREF = re.compile(r"\$(\d+)")
_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None     # None: DEFAULT
    replacement: str = ""
    case: str = ""                      # "", "L" or "U"
    source: str = "DEFAULT"

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        name = self.pattern.sub(lambda m: _java_replacement(self.replacement, m, groups), dn)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name


def _java_replacement(replacement: str, match: re.Match[str], groups: int) -> str:
    """Java's Matcher.appendReplacement, after Kafka's treatment of `$n` past the groups
    (taken literally; `$123` with 12 groups is `$12` then "3")."""
    out: list[str] = []
    i = 0
    n = len(replacement)
    while i < n:
        ch = replacement[i]
        if ch == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif ch == "$" and i + 1 < n and replacement[i + 1].isdigit():
            j = i + 1
            ref = int(replacement[j])
            if ref > groups:            # Kafka escapes a reference to a group that does not exist
                out.append("$")
                i += 1
                continue
            j += 1
            while j < n and replacement[j].isdigit() and ref * 10 + int(replacement[j]) <= groups:
                ref = ref * 10 + int(replacement[j])
                j += 1
            out.append(match.group(ref) or "")
            i = j
        elif ch == "$" and i + 1 < n and replacement[i + 1] == "{":
            close = replacement.find("}", i + 2)
            if close < 0:
                raise PrincipalMappingError(f"unterminated named group reference in {replacement!r}")
            out.append(match.group(replacement[i + 2:close]) or "")
            i = close + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _compile(pattern: str, source: str) -> re.Pattern[str]:
    try:
        return re.compile(_NAMED_GROUP.sub("(?P<", pattern))
    except re.error as e:
        raise PrincipalMappingError(f"ssl.principal.mapping.rules: rule {source!r}: bad pattern: {e}") from None


def parse_rules(text: str | None) -> tuple[Rule, ...]:
    """Kafka's rule list; PrincipalMappingError names the first rule it refuses."""
    if text is None:
        text = DEFAULT_RULES
    items = [m.group(1) for m in _SPLIT.finditer(text.strip())]
    rules: list[Rule] = []
    for item in items:
        match = _PARSE.match(item)
        if match is None or match.end() != len(item):
            rest = item[match.end():] if match is not None else item
            raise PrincipalMappingError(f"ssl.principal.mapping.rules: invalid rule {item!r}"
                                        + (f" (unmatched: {rest!r})" if rest != item else ""))
        if match.group(1) is not None:
            rules.append(Rule(None))
        elif match.group(2) is not None:
            pattern, replacement = match.group(2), match.group(3)
            rules.append(Rule(_compile(pattern, item), replacement, match.group(4) or "", item))
        # else: an empty rule, ignored (Kafka ignores them too)
    return tuple(rules)


class PrincipalMapper:
    """`ssl.principal.mapping.rules` applied to a DN: the user name, without `User:`."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        self.text = DEFAULT_RULES if rules is None else rules
        self.rules = parse_rules(rules)
        self._name = lru_cache(maxsize=1024)(self._map)

    def _map(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules={self.text!r} applies to {dn!r}")

    def name(self, dn: str) -> str:
        return self._name(dn)

    def principal(self, dn: str) -> str:
        """Kafka's principal string, `User:<name>`."""
        return f"{USER_TYPE}:{self._name(dn)}"

    def principal_of_certificate(self, der: bytes) -> str:
        return self.principal(subject_dn(der))
