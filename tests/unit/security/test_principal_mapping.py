"""ssl.principal.mapping.rules and the subject DN as Java prints it (principal_mapping.py).

The rule table is Kafka's documented one (the broker config docs and SslPrincipalMapper's
tests): the same rules, DNs and names."""
from __future__ import annotations

import pytest

from coordinator.security.principal_mapping import (
    NoMatchingRule,
    PrincipalMapper,
    PrincipalMappingError,
    parse_rules,
    subject_dn,
)

KAFKA_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize(("dn", "name"), [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafka_documented_mapping_table(dn: str, name: str) -> None:
    mapper = PrincipalMapper(KAFKA_RULES)
    assert mapper.name(dn) == name
    assert mapper.principal(dn) == f"User:{name}"


def test_default_is_the_whole_dn() -> None:
    assert PrincipalMapper(None).principal("CN=a,O=b") == "User:CN=a,O=b"
    assert PrincipalMapper("DEFAULT").principal("CN=a,O=b") == "User:CN=a,O=b"


def test_escaped_comma_in_a_name() -> None:
    mapper = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_no_rule_applies_refuses() -> None:
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule):
        mapper.name("CN=x,OU=Other")


@pytest.mark.parametrize("rules", [
    "DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/", "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules: str) -> None:
    assert parse_rules(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(PrincipalMappingError):
        parse_rules(rules)


@pytest.mark.parametrize(("text", "count"), [
    ("", 0), (",   , , ,      , , ,   ", 0), (",,RULE://,,,DEFAULT,,", 2), ("  RULE:// ,  DEFAULT  ", 2),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", 3),
])
def test_rule_splitting(text: str, count: int) -> None:
    assert len(parse_rules(text)) == count


def test_replacement_semantics() -> None:
    # $4 with three groups is literal; $0 is the whole match; \$ a literal dollar.
    assert PrincipalMapper("RULE:^(a)(b)(c)$/$1-$4-$0-\\$1/").name("abc") == "a-$4-abc-$1"
    # $12 with one group: group 1, then "2".
    assert PrincipalMapper("RULE:^(x)y$/$12/").name("xy") == "x2"
    # A pattern that can match empty replaces twice, as Java's replaceAll does.
    assert PrincipalMapper("RULE:.*/u/").name("abc") == "uu"


# --- the DN, from real certificates ----------------------------------------------------


def _der(name_attrs, multi=None) -> bytes:  # type: ignore[no-untyped-def]
    from cryptography import x509

    from support.tls_certs import TestCA

    rdns = [x509.RelativeDistinguishedName([x509.NameAttribute(oid, value)]) for oid, value in name_attrs]
    if multi:
        rdns.append(x509.RelativeDistinguishedName([x509.NameAttribute(o, v) for o, v in multi]))
    return TestCA().issue(x509.Name(rdns), server=False).der


def test_dn_order_and_keywords() -> None:
    from cryptography.x509.oid import NameOID as N
    der = _der([(N.COUNTRY_NAME, "US"), (N.STATE_OR_PROVINCE_NAME, "MD"), (N.LOCALITY_NAME, "Fulton"),
                (N.ORGANIZATION_NAME, "mycp"), (N.ORGANIZATIONAL_UNIT_NAME, "SME"), (N.COMMON_NAME, "Duke")])
    assert subject_dn(der) == "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US"
    assert PrincipalMapper(KAFKA_RULES).principal_of_certificate(der) == "User:duke@sme"


def test_dn_escaping_and_oids() -> None:
    from cryptography.x509.oid import NameOID as N
    der = _der([(N.DOMAIN_COMPONENT, "com"), (N.USER_ID, "u1"), (N.EMAIL_ADDRESS, "a@b.c"),
                (N.SERIAL_NUMBER, "42"), (N.COMMON_NAME, " Tkac, Adam+#1 ")])
    # emailAddress and serialNumber have no RFC 2253 keyword: OID=#hex of the DER value.
    assert subject_dn(der) == ("CN=\\ Tkac\\, Adam\\+\\#1\\ ,2.5.4.5=#13023432,"
                               "1.2.840.113549.1.9.1=#16056140622e63,UID=u1,DC=com")


def test_dn_multi_valued_rdn_and_non_ascii() -> None:
    from cryptography.x509.oid import NameOID as N
    der = _der([(N.ORGANIZATION_NAME, "Zürich AG")], multi=[(N.COMMON_NAME, "a"), (N.ORGANIZATIONAL_UNIT_NAME, "b")])
    dn = subject_dn(der)
    assert dn.endswith(",O=Zürich AG")
    assert set(dn.split(",")[0].split("+")) == {"CN=a", "OU=b"}
