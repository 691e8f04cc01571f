"""Security of the embedded broker: certificates of a CA of its own for TLS, the SASL logins it
accepts (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and the server properties of both.

:func:`make_certificates` writes PEM files (``ca.pem``; a key and certificate per name, signed by
the CA, valid for ``127.0.0.1`` and ``localhost``) with the ``cryptography`` package (the ``tls``
extra). The broker takes them inline as Kafka's PEM key and trust stores; librdkafka clients by
path (``ssl.ca.location``).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from dataclasses import dataclass

from kspark.errors import KsparkError

#: the SASL mechanisms the embedded broker offers its clients when it has users
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: the user the broker logs in as on its own listeners (inter-broker and controller traffic)
INTERNAL_USER = "kspark-broker"
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: user names the broker's JAAS options (``user_<name>="password"``) can carry
USER_NAME = re.compile(r"[A-Za-z0-9_.-]+")
#: Kafka's authorizer for KRaft clusters
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_HOSTS = ("127.0.0.1", "localhost")


class SecurityError(KsparkError):
    """Certificates could not be made, or a security setting is not one the broker takes."""


def jaas_quote(value: str) -> str:
    """``value`` as a quoted string of a JAAS configuration."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def plain_jaas_config(username: str, password: str, users: dict[str, str] | None = None) -> str:
    """A ``sasl.jaas.config`` of the PLAIN login module: the login of ``username`` and, for a
    broker's listener, the users it accepts with their passwords."""
    options = [f"username={jaas_quote(username)}", f"password={jaas_quote(password)}"]
    options += [f"user_{name}={jaas_quote(pw)}" for name, pw in (users or {}).items()]
    return f"{PLAIN_MODULE} required {' '.join(options)};"


def create_scram_users(bootstrap_servers: str, admin_config: dict[str, str],
                       users: dict[str, str], iterations: int = 8192) -> None:
    """Create (or update) ``users`` with their passwords for SCRAM-SHA-256 and SCRAM-SHA-512,
    through Kafka's AlterUserScramCredentials as a client with ``admin_config`` (any password:
    the storage tool's ``--add-scram`` cannot take every character)."""
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialAlteration,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap_servers, "log_level": 4, **admin_config})
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        # (one credential of a user per request)
        info = ScramCredentialInfo(mechanism, iterations)
        upserts: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(user, info, password.encode(), os.urandom(16))
            for user, password in users.items()]
        for user, future in admin.alter_user_scram_credentials(upserts).items():
            try:
                future.result(30)
            except Exception as exc:
                raise SecurityError(f"Kafka at {bootstrap_servers}: creating SCRAM user {user!r} "
                                    f"failed: {exc}") from None


@dataclass(frozen=True)
class Certificates:
    """PEM files made by :func:`make_certificates`: the CA's certificate and, per name, a key
    (PKCS#8, unencrypted) and its certificate."""

    directory: str

    @property
    def ca(self) -> str:
        return os.path.join(self.directory, "ca.pem")

    def key(self, name: str) -> str:
        return os.path.join(self.directory, f"{name}.key")

    def certificate(self, name: str) -> str:
        return os.path.join(self.directory, f"{name}.pem")

    def read(self, path: str) -> str:
        with open(path) as f:
            return f.read()

    def client_config(self, name: str | None = None) -> dict[str, str]:
        """librdkafka TLS settings trusting the CA; with ``name``, also presenting that
        certificate (mutual TLS)."""
        config = {"ssl.ca.location": self.ca}
        if name is not None:
            config["ssl.certificate.location"] = self.certificate(name)
            config["ssl.key.location"] = self.key(name)
        return config


def make_certificates(directory: str, names: tuple[str, ...] = ("broker",),
                      hosts: tuple[str, ...] = _HOSTS, days: int = 30) -> Certificates:
    """A CA of its own and, for each of ``names``, an EC key and a certificate signed by the CA
    for ``hosts`` (IP addresses and DNS names), as PEM files in ``directory``. Files already
    there are kept (a broker restarted on the same directory keeps its CA)."""
    made = Certificates(directory)
    if os.path.exists(made.ca) and all(os.path.exists(made.key(n)) for n in names):
        return made
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:
        raise SecurityError(
            "making TLS certificates needs the 'cryptography' package: pip install "
            "'kspark[tls]'") from exc
    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)

    def write(path: str, data: bytes, private: bool = False) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    def pkcs8(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kspark test CA")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        write(made.key(name), pkcs8(key), private=True)
        write(made.certificate(name), cert.public_bytes(serialization.Encoding.PEM))
    write(made.ca, ca_cert.public_bytes(serialization.Encoding.PEM))
    return made


def tls_properties(certificates: Certificates, client_auth: bool = False) -> dict[str, str]:
    """A broker's TLS settings: its key and certificate chain and the CA it trusts, inline as
    Kafka's PEM stores; ``client_auth`` asks clients for a certificate of the CA."""
    chain = certificates.read(certificates.certificate("broker")) + certificates.read(
        certificates.ca)
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": chain,
        "ssl.keystore.key": certificates.read(certificates.key("broker")),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": certificates.read(certificates.ca),
        "ssl.client.auth": "required" if client_auth else "none",
        "ssl.endpoint.identification.algorithm": "https",
    }


def sasl_properties(listener: str, internal_password: str, users: dict[str, str]) -> dict[str, str]:
    """SASL on the client (and inter-broker) listener ``listener`` and the controller listener:
    PLAIN and SCRAM for clients (SCRAM's credentials live in the cluster's metadata:
    :func:`create_scram_users`), PLAIN only between the broker's own listeners, where the
    broker logs in as :data:`INTERNAL_USER`."""
    jaas = plain_jaas_config(INTERNAL_USER, internal_password,
                             {INTERNAL_USER: internal_password, **users})
    name = listener.lower()
    props = {
        "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        f"listener.name.{name}.plain.sasl.jaas.config": jaas,
        "listener.name.controller.plain.sasl.jaas.config": jaas,
    }
    for mechanism in SASL_MECHANISMS[1:]:
        props[f"listener.name.{name}.{mechanism.lower()}.sasl.jaas.config"] = (
            f"{SCRAM_MODULE} required;")
    return props


def acl_properties(super_users: tuple[str, ...]) -> dict[str, str]:
    """Kafka's ``StandardAuthorizer``: only what an ACL allows, except for ``super_users`` and
    the broker's own user."""
    return {
        "authorizer.class.name": AUTHORIZER,
        "super.users": ";".join(f"User:{u}" for u in (INTERNAL_USER, *super_users)),
        "allow.everyone.if.no.acl.found": "false",
    }
