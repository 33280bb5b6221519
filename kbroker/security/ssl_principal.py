"""The principal of a TLS connection: the client certificate's subject in the form Kafka sees it.

Kafka's principal builder takes the subject as Java prints it (``X500Principal.getName()``, RFC
2253): relative names from the most specific (``CN=alice,OU=eng,O=acme``), the attributes RFC 2253
names by keyword (CN, C, L, ST, O, OU, STREET, DC, UID), any other as its dotted OID with the
value's DER bytes in hex (``1.2.840.113549.1.9.1=#1609...``), and in string values ``, = + < > # ;
" \\`` escaped with a backslash, as are a leading or trailing space. Then
``ssl.principal.mapping.rules`` (SslPrincipalMapper) makes the name. A connection without a client
certificate is ``User:ANONYMOUS``.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from kbroker.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from kbroker.security.ssl_principal_mapper import SslPrincipalMapper

_KEYWORDS = {
    NameOID.COMMON_NAME: "CN", NameOID.COUNTRY_NAME: "C", NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST", NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU", NameOID.STREET_ADDRESS: "STREET", NameOID.DOMAIN_COMPONENT: "DC",
    NameOID.USER_ID: "UID",
}
_ESCAPED = frozenset(',=+<>#;"\\')
_UTF8_STRING, _BMP_STRING = 12, 30  # ASN.1 tags of the string types not stored as plain ASCII


def principal_of_certificate(der: bytes | None, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """``User:<mapped subject>`` for a client certificate, ANONYMOUS without one; raises
    NoMatchingRule when no mapping rule applies."""
    if not der:
        return ANONYMOUS
    return KafkaPrincipal(USER_TYPE, mapper.name(subject_dn(der)))


def subject_dn(der: bytes) -> str:
    """The certificate's subject as Java's ``X500Principal.getName()`` writes it."""
    subject = x509.load_der_x509_certificate(der).subject
    return ",".join("+".join(_attribute(attribute) for attribute in rdn) for rdn in reversed(subject.rdns))


def _attribute(attribute: x509.NameAttribute) -> str:
    keyword = _KEYWORDS.get(attribute.oid)
    value = attribute.value if isinstance(attribute.value, str) else attribute.value.decode("latin-1")
    if keyword is None:
        return f"{attribute.oid.dotted_string}=#{_der_string(attribute).hex()}"
    return f"{keyword}={_escape(value)}"


def _escape(value: str) -> str:
    last = len(value) - 1
    return "".join("\\" + ch if ch in _ESCAPED or (ch == " " and i in (0, last)) else ch
                   for i, ch in enumerate(value))


def _der_string(attribute: x509.NameAttribute) -> bytes:
    """The attribute value's DER encoding (tag, length, bytes), which RFC 2253 prints in hex."""
    tag = attribute._type.value  # the ASN.1 string type the certificate used
    value = attribute.value if isinstance(attribute.value, str) else attribute.value.decode("latin-1")
    body = value.encode("utf-16-be" if tag == _BMP_STRING else "utf-8" if tag == _UTF8_STRING else "latin-1")
    if len(body) < 0x80:
        length = bytes([len(body)])
    else:
        size = (len(body).bit_length() + 7) // 8
        length = bytes([0x80 | size]) + len(body).to_bytes(size, "big")
    return bytes([tag]) + length + body
