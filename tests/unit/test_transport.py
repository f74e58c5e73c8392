"""`RestTransport`: what goes on the wire and what comes back (a recording pool, no network), and what
a kubeconfig's cluster and user settings become."""

from __future__ import annotations

import base64
import io
import json
import ssl
from pathlib import Path
from typing import Any

import pytest
import urllib3

from shared.adapters.kubernetes.transport import (
    FixedToken,
    HttpStatusError,
    RestTransport,
    transport_from_kubeconfig,
)
from shared.domain.errors import ConfigError

CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


class RecordingPool:
    """Stands in for the urllib3 pool: records each request and answers with `status` and `body`."""

    def __init__(self, status: int = 200, body: bytes = b"{}", headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = headers or {"Content-Type": "application/json"}
        self.requests: list[dict[str, Any]] = []

    def request(self, method: str, url: str, **kwargs: Any) -> urllib3.HTTPResponse:
        self.requests.append({"method": method, "url": url, **kwargs})
        return urllib3.HTTPResponse(
            body=io.BytesIO(self.body),
            status=self.status,
            reason="Too Many Requests" if self.status == 429 else "OK",
            headers=self.headers,
            preload_content=False,
        )


def transport_with(pool: RecordingPool) -> RestTransport:
    transport = RestTransport("https://k8s.example/", credentials=FixedToken("abc"))
    transport._pool = pool  # type: ignore[assignment]
    return transport


def test_a_patch_is_sent_as_json_with_its_content_type_token_and_query() -> None:
    # Given a transport with a fixed token
    pool = RecordingPool()
    transport = transport_with(pool)

    # When it sends a merge patch with query parameters (None left out, booleans as the API spells them)
    response = transport.request(
        "PATCH",
        "/api/v1/nodes/gpu-0",
        query=(("dryRun", None), ("fieldManager", "backlog scaler"), ("pretty", False), ("limit", 5)),
        body={"spec": {"unschedulable": True}},
        content_type="application/merge-patch+json",
        timeout=(1.0, 2.0),
    )

    # Then one request carries exactly that
    (sent,) = pool.requests
    assert sent["method"] == "PATCH"
    assert (
        sent["url"]
        == "https://k8s.example/api/v1/nodes/gpu-0?fieldManager=backlog%20scaler&pretty=false&limit=5"
    )
    assert json.loads(sent["body"]) == {"spec": {"unschedulable": True}}
    assert sent["headers"]["Content-Type"] == "application/merge-patch+json"
    assert sent["headers"]["Authorization"] == "Bearer abc"
    assert sent["headers"]["Accept"] == "application/json"
    assert (sent["timeout"].connect_timeout, sent["timeout"].read_timeout) == (1.0, 2.0)
    assert sent["preload_content"] is False and sent["redirect"] is False
    # and the response comes back unread, for the caller to stream or read
    assert response.data == b"{}"


def test_a_get_has_no_body_and_no_content_type() -> None:
    pool = RecordingPool()
    transport_with(pool).request("GET", "/api/v1/nodes", timeout=(1.0, 2.0))
    (sent,) = pool.requests
    assert sent["body"] is None and "Content-Type" not in sent["headers"]
    assert sent["url"] == "https://k8s.example/api/v1/nodes"


def test_a_status_outside_2xx_raises_with_the_body_headers_and_the_token_sent() -> None:
    # Given an API server that throttles
    status = {"kind": "Status", "status": "Failure", "reason": "TooManyRequests", "code": 429}
    pool = RecordingPool(429, json.dumps(status).encode(), {"Retry-After": "2"})

    # When / Then the error carries what the caller maps and retries on
    with pytest.raises(HttpStatusError) as caught:
        transport_with(pool).request("GET", "/api/v1/pods", timeout=(1.0, 2.0))
    error = caught.value
    assert error.status == 429 and error.reason == "Too Many Requests"
    assert json.loads(error.body)["reason"] == "TooManyRequests"
    assert error.headers["Retry-After"] == "2"
    assert error.authorization == "Bearer abc"


def test_a_fixed_token_cannot_be_renewed() -> None:
    assert not transport_with(RecordingPool()).renew("Bearer abc")
    assert not RestTransport("https://k8s.example").renew(None)  # no credentials at all


def test_a_kubeconfig_with_ca_client_certificate_tls_name_and_proxy(tmp_path: Path) -> None:
    # Given a kubeconfig whose cluster has CA data, a TLS server name and a proxy, and whose user
    # authenticates with a client certificate (what kind and many managed clusters write)
    key = base64.b64encode(b"-----BEGIN PRIVATE KEY-----\nfake\n-----END PRIVATE KEY-----\n").decode()
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "kind",
                "clusters": [
                    {
                        "name": "kind",
                        "cluster": {
                            "server": "https://127.0.0.1:6443",
                            "certificate-authority-data": base64.b64encode(CA_PEM).decode(),
                            "tls-server-name": "kubernetes.default",
                            "proxy-url": "http://proxy.internal:3128",
                        },
                    }
                ],
                "users": [
                    {
                        "name": "admin",
                        "user": {
                            "client-certificate-data": base64.b64encode(CA_PEM).decode(),
                            "client-key-data": key,
                        },
                    }
                ],
                "contexts": [{"name": "kind", "context": {"cluster": "kind", "user": "admin"}}],
            }
        )
    )

    # When it is loaded
    transport = transport_from_kubeconfig(str(path))

    # Then TLS trusts the CA, presents the client certificate, checks the named server, via the proxy
    assert transport.host == "https://127.0.0.1:6443"
    tls = transport.tls
    assert tls.ca_file is not None and Path(tls.ca_file).read_bytes() == CA_PEM
    assert tls.cert_file is not None and Path(tls.cert_file).read_bytes() == CA_PEM
    assert tls.key_file is not None and Path(tls.key_file).is_file()
    assert tls.verify and tls.server_name == "kubernetes.default"
    assert isinstance(transport._pool, urllib3.ProxyManager)
    assert transport._pool.connection_pool_kw["cert_reqs"] == ssl.CERT_REQUIRED
    assert transport.credentials is not None and transport.credentials.authorization() is None


def test_a_kubeconfig_that_skips_tls_verification_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        """
apiVersion: v1
kind: Config
current-context: dev
clusters: [{name: dev, cluster: {server: "https://10.0.0.1", insecure-skip-tls-verify: true}}]
users: [{name: me, user: {username: admin, password: s3cret}}]
contexts: [{name: dev, context: {cluster: dev, user: me}}]
"""
    )
    transport = transport_from_kubeconfig(str(path))
    assert not transport.tls.verify
    assert transport._pool.connection_pool_kw["cert_reqs"] == ssl.CERT_NONE
    # a username and password become HTTP basic auth, as the kubernetes client sends them
    assert transport.credentials is not None
    assert transport.credentials.authorization() == "Basic " + base64.b64encode(b"admin:s3cret").decode()


def test_a_kubeconfig_proxy_scheme_urllib3_cannot_speak_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        """
apiVersion: v1
kind: Config
current-context: dev
clusters: [{name: dev, cluster: {server: "https://10.0.0.1", proxy-url: "socks5://bastion:1080"}}]
users: [{name: me, user: {token: t}}]
contexts: [{name: dev, context: {cluster: dev, user: me}}]
"""
    )
    with pytest.raises(ConfigError, match=r"proxy-url.*socks5"):
        transport_from_kubeconfig(str(path))
