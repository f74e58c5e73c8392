"""`RestTransport`: the adapter's HTTP requests to the API server, on urllib3 directly.

The adapter builds its few request paths itself and parses every response body itself
(`shared.formats.kubernetes`), so all it needs from a client is the request: the server's URL, its
TLS trust, a bearer token per request, timeouts and transport retries. It makes that request with
urllib3, the HTTP library the kubernetes package itself sends through (and botocore too), instead of
the package's `ApiClient`: `import kubernetes.client` loads the package's ~1,000 generated API and
model modules, which took ~190 ms at every cold start of every scaling function (about half of
`import kubernetes.client, boto3`; bench/latency_bench.py prints the handlers' import against it).

A kubeconfig (local use: `status`, a local controller) is still read by the kubernetes package, which
knows its every form (exec plugins such as `aws eks get-token`, client certificates, CA files, proxies);
`transport_from_kubeconfig` imports it only then and takes the endpoint, TLS files and the per-request
token from the `Configuration` it fills.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote, urlencode

import urllib3

from shared.domain.errors import ConfigError

if TYPE_CHECKING:
    from kubernetes.client import Configuration

USER_AGENT = "backlog-scaler"
POOL_SIZE = 4  # the lister's prefetch thread and the caller: a few connections are plenty

QueryValue = str | int | bool | None


class HttpStatusError(Exception):
    """The API server answered outside 2xx; `body` is the response body (a Status object, usually)."""

    def __init__(
        self,
        status: int,
        reason: str,
        body: bytes,
        headers: Mapping[str, str],
        authorization: str | None = None,
    ) -> None:
        super().__init__(f"HTTP {status} {reason}".rstrip())
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers
        self.authorization = authorization  # the header the refused request carried (for a 401)


class Credentials(Protocol):
    """Where a request's `Authorization` header comes from."""

    def authorization(self) -> str | None:
        """The header value for the next request (None: send none). May sign or refresh a token;
        raises AuthError when it cannot."""
        ...

    def renew(self, refused: str | None) -> bool:
        """After a 401 to a request that carried `refused`: True when the next request carries a new
        credential (so a retry can succeed), False when it would carry the same one."""
        ...


@dataclass(frozen=True, slots=True)
class FixedToken:
    """A bearer token that never changes (a service-account token, a test's token)."""

    token: str

    def authorization(self) -> str | None:
        return f"Bearer {self.token}"

    def renew(self, refused: str | None) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """How the server's certificate is checked and how the client proves itself (kubeconfig certs)."""

    ca_pem: bytes | None = None  # the CA in memory (EKS): no temp file in the Lambda's /tmp
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    server_name: str | None = None  # SNI and the name the certificate must carry, when not the host's


class RestTransport:
    """Requests to one API server through a urllib3 pool; thread-safe (urllib3's pools are)."""

    def __init__(
        self,
        host: str,
        *,
        credentials: Credentials | None = None,
        tls: TlsSettings = TlsSettings(),
        retries: urllib3.Retry | None = None,
        proxy: str | None = None,
    ) -> None:
        # `retries` None: no transport retries (`build_transport` and `transport_from_kubeconfig`
        # pass `default_retries()`).
        self.host = host.rstrip("/")
        self.credentials = credentials
        self.tls = tls
        self.retries = retries
        self._pool = _pool_manager(tls, retries, proxy)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, QueryValue]] = (),
        body: object = None,
        content_type: str = "application/json",
        timeout: tuple[float, float],
    ) -> urllib3.BaseHTTPResponse:
        """One request, its response unread (the caller streams or reads it).

        A JSON-encodable `body` is sent as JSON with `content_type` (the adapter's patches are merge
        patches, its posts Evictions and Events). Raises HttpStatusError outside 2xx (body read),
        urllib3's HTTPError or OSError on transport failures (after the pool's retries), AuthError
        when no token can be had.
        """
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        authorization = self.credentials.authorization() if self.credentials is not None else None
        if authorization is not None:
            headers["Authorization"] = authorization
        encoded: bytes | None = None
        if body is not None:
            headers["Content-Type"] = content_type
            encoded = json.dumps(body, separators=(",", ":")).encode("utf-8")
        response = self._pool.request(
            method,
            self.host + path + _query_string(query),
            body=encoded,
            headers=headers,
            timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
            preload_content=False,
            redirect=False,
        )
        if not 200 <= response.status <= 299:
            data = response.data  # read whole: the Status body says why
            reason = response.reason or ""
            raise HttpStatusError(response.status, reason, data, response.headers, authorization)
        return response

    def renew(self, refused: str | None) -> bool:
        """After a 401: whether a retry will carry a new credential (see `Credentials.renew`)."""
        return self.credentials is not None and self.credentials.renew(refused)

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.clear()


def default_retries() -> urllib3.Retry:
    """urllib3 retries for transport failures only; HTTP statuses are handled by the adapter.

    Connect failures are retried for every method (the request was not sent); a read failure (timeout,
    dropped connection) only for GET, the one idempotent verb the adapter uses.
    """
    return urllib3.Retry(
        total=3,
        connect=2,
        read=1,
        status=0,
        other=0,
        redirect=0,
        allowed_methods=frozenset({"GET", "HEAD"}),
        backoff_factor=0.2,
        raise_on_status=False,
        respect_retry_after_header=False,
    )


def _query_string(query: Sequence[tuple[str, QueryValue]]) -> str:
    """`?name=value&...` of the parameters that are not None, booleans as the API spells them."""
    pairs = [
        (name, str(value).lower() if isinstance(value, bool) else str(value))
        for name, value in query
        if value is not None
    ]
    return "?" + urlencode(pairs, quote_via=quote) if pairs else ""


def _pool_manager(tls: TlsSettings, retries: urllib3.Retry | None, proxy: str | None) -> urllib3.PoolManager:
    settings: dict[str, Any] = {
        "cert_reqs": ssl.CERT_REQUIRED if tls.verify else ssl.CERT_NONE,
        "maxsize": POOL_SIZE,
        "retries": retries if retries is not None else False,
    }
    if tls.ca_pem is not None:
        settings["ca_cert_data"] = tls.ca_pem.decode("ascii")
    if tls.ca_file is not None:
        settings["ca_certs"] = tls.ca_file
    if tls.cert_file is not None:
        settings["cert_file"] = tls.cert_file
        settings["key_file"] = tls.key_file
    if tls.server_name is not None:
        settings["server_hostname"] = tls.server_name
    if proxy:
        return urllib3.ProxyManager(proxy, **settings)
    return urllib3.PoolManager(**settings)


class _KubeconfigCredentials:
    """The Authorization header of a kubernetes `Configuration` that a kubeconfig filled, asked for before
    each request as the client's `Configuration.auth_settings` does, so that an exec plugin's or
    OIDC token is refreshed when it expires. kube_config stores the whole header value (`Bearer
    <token>`, or `Basic ...` for a username and password) under `BearerToken`."""

    def __init__(self, configuration: Configuration) -> None:
        self._configuration = configuration

    def authorization(self) -> str | None:
        value = self._configuration.get_api_key_with_prefix("BearerToken", alias="authorization")
        return str(value) if value else None

    def renew(self, refused: str | None) -> bool:
        return False  # the kubeconfig's own refresh runs before each request; a retry would be refused


def transport_from_kubeconfig(
    path: str, *, context: str | None = None, retries: urllib3.Retry | None = None
) -> RestTransport:
    """A transport from a kubeconfig file (local use); exec plugins such as `aws eks get-token` work.

    Raises ConfigError when the file cannot be read or lacks what is needed.
    """
    from kubernetes import client as k8s  # local use only: see the module docstring
    from kubernetes import config as k8s_config

    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration, persist_config=False
        )
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        raise ConfigError(f"kubeconfig {path}: {exc}") from exc
    tls = TlsSettings(
        ca_file=configuration.ssl_ca_cert or None,
        cert_file=configuration.cert_file or None,
        key_file=configuration.key_file or None,
        verify=bool(configuration.verify_ssl),
        server_name=configuration.tls_server_name or None,
    )
    try:
        return RestTransport(
            configuration.host,
            credentials=_KubeconfigCredentials(configuration),
            tls=tls,
            retries=retries if retries is not None else default_retries(),
            proxy=configuration.proxy or None,
        )
    except urllib3.exceptions.ProxySchemeUnknown as exc:  # socks5://: urllib3 needs PySocks for it
        raise ConfigError(f"kubeconfig {path}: proxy-url: {exc}") from exc
