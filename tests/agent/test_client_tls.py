"""TLS on the model wire (agent/model/wire.py): an untrusted server is a clear one-line error with
no key in it; with its certificate in SSL_CERT_FILE the same server is answered, as the SDK's own
transport trusts it; the SDK's telemetry headers are not sent and a gzip answer is decoded."""

from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import ssl

import pytest

from agent.client import ModelClient, ModelError
from tests.scripted_server import Reply, ScriptedLLM
from trajectory.records import AgentConfig


def _client(url: str, **config) -> ModelClient:
    return ModelClient(AgentConfig(model="m", base_url=url, max_retries=0, **config), api_key="sk-test-key")


def test_requests_carry_auth_and_no_telemetry_headers_and_a_gzip_answer_is_decoded(scripted_llm):
    body = json.dumps(
        {
            "choices": [{"text": " zipped", "index": 0, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        }
    ).encode()
    scripted_llm.push(Reply(body=gzip.compress(body), headers={"Content-Encoding": "gzip"}))
    text, call = _client(scripted_llm.base_url).complete("p", [])
    assert text == " zipped" and call.usage.prompt_tokens == 3
    headers = scripted_llm.last_request.headers
    assert headers["authorization"] == "Bearer sk-test-key" and headers["user-agent"].startswith("OpenAI/Python")
    assert not [h for h in headers if h.startswith("x-stainless")], headers


def _self_signed(tmp_path) -> tuple[str, str]:
    """(certificate file, key file) for 127.0.0.1, made here (no network, no fixture files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_file), str(key_file)


def test_tls_trusts_ssl_cert_file_and_an_untrusted_server_is_a_clear_error(tmp_path, monkeypatch):
    cert, key = _self_signed(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    with ScriptedLLM() as llm:
        llm._httpd.socket = ctx.wrap_socket(llm._httpd.socket, server_side=True)
        url = llm.base_url.replace("http://", "https://")
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        monkeypatch.delenv("SSL_CERT_DIR", raising=False)
        with pytest.raises(ModelError) as info:  # (a new client per timeout: the first one is untrusted)
            _client(url, timeout_s=30).complete("p", [])
        assert info.value.call.error.startswith("cannot reach the model server")
        assert "sk-test-key" not in info.value.call.error
        monkeypatch.setenv("SSL_CERT_FILE", cert)
        llm.push(Reply(text=" over tls"))
        assert _client(url, timeout_s=31).complete("p", [])[0] == " over tls"
