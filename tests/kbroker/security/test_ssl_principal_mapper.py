"""ssl.principal.mapping.rules with Kafka's rule syntax (the examples of Kafka's
SslPrincipalMapperTest), and a certificate subject in the form Java's X500Principal.getName()
gives Kafka's principal builder (expected strings produced by Java 17 from the same certificates)."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kbroker.security.principal import ANONYMOUS, KafkaPrincipal
from kbroker.security.ssl_principal import principal_of_certificate, subject_dn
from kbroker.security.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper

RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize(("subject", "name"), [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafkas_examples_map_as_in_kafka(subject: str, name: str) -> None:
    assert SslPrincipalMapper(RULES).name(subject) == name


def test_an_escaped_comma_stays_in_the_name() -> None:
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


@pytest.mark.parametrize("rules", [
    "DEFAULT", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/", "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U", "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules_parse(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


def test_empty_rules_are_ignored_and_no_rule_is_a_failure() -> None:
    assert len(SslPrincipalMapper(",,RULE:^x$/y/,,,DEFAULT,,").rules) == 2
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=a"):
        SslPrincipalMapper("RULE:^CN=b$/b/").name("CN=a")


def _certificate(name: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def _rdn(*attributes: x509.NameAttribute) -> x509.RelativeDistinguishedName:
    return x509.RelativeDistinguishedName(list(attributes))


@pytest.mark.parametrize(("name", "java"), [
    (x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme"),
                x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng"),
                x509.NameAttribute(NameOID.COMMON_NAME, "alice")]),
     "CN=alice,OU=eng,O=acme"),
    (x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                x509.NameAttribute(NameOID.COMMON_NAME, 'Tkac, Adam=#x+y<z>;"q\\ '),
                x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c")]),
     '1.2.840.113549.1.9.1=#16056140622e63,CN=Tkac\\, Adam\\=\\#x\\+y\\<z\\>\\;\\"q\\\\\\ ,C=US'),
    (x509.Name([_rdn(x509.NameAttribute(NameOID.COMMON_NAME, "a"), x509.NameAttribute(NameOID.USER_ID, "u1")),
                _rdn(x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "com")),
                _rdn(x509.NameAttribute(NameOID.SERIAL_NUMBER, "42")),
                _rdn(x509.NameAttribute(NameOID.COMMON_NAME, " lead#ü"))]),
     "CN=\\ lead\\#ü,2.5.4.5=#13023432,DC=com,CN=a+UID=u1"),
])
def test_the_subject_is_written_as_java_writes_it(name: x509.Name, java: str) -> None:
    assert subject_dn(_certificate(name)) == java


def test_the_principal_of_a_certificate_is_its_mapped_subject() -> None:
    der = _certificate(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme"),
                                  x509.NameAttribute(NameOID.COMMON_NAME, "Alice")]))
    assert principal_of_certificate(der, SslPrincipalMapper()) == KafkaPrincipal("User", "CN=Alice,O=acme")
    lower_cn = SslPrincipalMapper("RULE:^CN=(.*?),.*$/$1/L")
    assert principal_of_certificate(der, lower_cn) == KafkaPrincipal("User", "alice")
    assert principal_of_certificate(None, SslPrincipalMapper()) == ANONYMOUS
