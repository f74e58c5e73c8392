"""Reaching the cluster: EKS bearer tokens, the cluster endpoint and CA, and a configured transport.

An EKS token is a presigned STS GetCallerIdentity URL that signs the `x-k8s-aws-id: <cluster>` header,
base64url-encoded behind `k8s-aws-v1.` (what `aws eks get-token` prints). EKS accepts it for 15
minutes after signing; `EksTokenSource` caches one and signs a new one well before that, and, as the
transport's `Credentials`, gives every request of a long-lived transport a valid token. A token the
API server refuses anyway (401: clock skew, a token revoked with its role session) is dropped by
`renew`, and the adapter retries the request once with a new one.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
import urllib3
from botocore.exceptions import BotoCoreError, ClientError

from shared.adapters.kubernetes.transport import (
    Credentials,
    FixedToken,
    RestTransport,
    TlsSettings,
    default_retries,
)
from shared.domain.errors import AuthError, ClusterReadError, ConfigError

if TYPE_CHECKING:
    from mypy_boto3_eks import EKSClient
    from mypy_boto3_sts import STSClient
else:
    EKSClient = STSClient = Any

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
PRESIGN_EXPIRES_SECONDS = 60  # what aws-iam-authenticator signs; EKS itself honours 15 minutes
TOKEN_REFRESH_SECONDS = 600.0  # sign a new token after 10 of the 15 minutes EKS accepts one

_AUTH_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredToken",
        "ExpiredTokenException",
        "SignatureDoesNotMatch",
    }
)


def _take_cluster_id(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    # The cluster name travels from Params to the signer in the request context, so one STS client
    # can sign tokens for several clusters (the same trick as aws-cli's `eks get-token`).
    if CLUSTER_ID_HEADER in params:
        context[CLUSTER_ID_HEADER] = params.pop(CLUSTER_ID_HEADER)


def _add_cluster_id_header(request: Any, **_: Any) -> None:
    if CLUSTER_ID_HEADER in request.context:
        request.headers[CLUSTER_ID_HEADER] = request.context[CLUSTER_ID_HEADER]


def _register_handlers(sts_client: STSClient) -> None:
    events = sts_client.meta.events
    events.register(
        "provide-client-params.sts.GetCallerIdentity",
        _take_cluster_id,
        unique_id="backlog-scaler-take-cluster-id",
    )
    events.register(
        "before-sign.sts.GetCallerIdentity",
        _add_cluster_id_header,
        unique_id="backlog-scaler-add-cluster-id-header",
    )


def eks_token(sts_client: STSClient, cluster_name: str) -> str:
    """A fresh EKS bearer token for `cluster_name`, signed with the client's credentials.

    Raises AuthError when no credentials are available.
    """
    _register_handlers(sts_client)
    try:
        url = sts_client.generate_presigned_url(
            "get_caller_identity",
            Params={CLUSTER_ID_HEADER: cluster_name},
            ExpiresIn=PRESIGN_EXPIRES_SECONDS,
            HttpMethod="GET",
        )
    except BotoCoreError as exc:  # NoCredentialsError and friends: nothing to sign with
        raise AuthError(f"cannot sign an EKS token for {cluster_name!r}: {exc}") from exc
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")


class EksTokenSource:
    """Caches an EKS token and signs a new one after `refresh_seconds`; thread-safe."""

    def __init__(
        self,
        cluster_name: str,
        region: str,
        sts_client: STSClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        refresh_seconds: float = TOKEN_REFRESH_SECONDS,
    ) -> None:
        # botocore resolves the regional endpoint (sts.<region>.amazonaws.com) by default.
        self._sts = sts_client if sts_client is not None else boto3.client("sts", region_name=region)
        self._cluster_name = cluster_name
        self._clock = clock
        self._refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._token: str | None = None
        self._header = ""
        self._signed_at = 0.0

    def token(self) -> str:
        """The cached token, or a newly signed one once the cached one is `refresh_seconds` old."""
        with self._lock:
            return self._current()[0]

    def authorization(self) -> str | None:
        """`Bearer <token>` for the next request (the same object until the token is signed again)."""
        with self._lock:
            return self._current()[1]

    def _current(self) -> tuple[str, str]:
        now = self._clock()
        if self._token is None or now - self._signed_at >= self._refresh_seconds:
            self._token = eks_token(self._sts, self._cluster_name)
            self._header = "Bearer " + self._token
            self._signed_at = now
        return self._token, self._header

    def invalidate(self, refused: str | None = None) -> None:
        """Sign a new token at the next request: drop the cached one (only if it is `refused`, when given,
        so that concurrent requests refused with the same token cause one new signature, not one each)."""
        with self._lock:
            # Identity, not equality: a token signed again within the same second may be equal.
            if refused is None or refused is self._token or refused is self._header:
                self._token = None

    def renew(self, refused: str | None) -> bool:
        """After a 401 to a request that carried `refused` (its Authorization header): sign anew."""
        self.invalidate(refused)
        return True


@dataclass(frozen=True, slots=True)
class ClusterEndpoint:
    """Where the API server is and the CA that signs its certificate (PEM)."""

    url: str
    ca_pem: bytes | None = None


def decode_certificate_authority(data: str) -> bytes:
    """The base64 PEM of eks:DescribeCluster / the config as PEM bytes; ConfigError when invalid."""
    try:
        pem = base64.b64decode(data, validate=True)
    except ValueError as exc:
        raise ConfigError(f"kubernetes.certificate_authority is not valid base64: {exc}") from exc
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ConfigError("kubernetes.certificate_authority does not hold a PEM certificate")
    return pem


def describe_cluster_endpoint(eks_client: EKSClient, cluster_name: str) -> ClusterEndpoint:
    """Endpoint and CA from eks:DescribeCluster.

    Raises AuthError (access denied), ConfigError (no such cluster), ClusterReadError (other, incl.
    a cluster still being created).
    """
    try:
        cluster = eks_client.describe_cluster(name=cluster_name)["cluster"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in _AUTH_CODES:
            raise AuthError(f"eks:DescribeCluster {cluster_name!r}: {code}") from exc
        if code == "ResourceNotFoundException":
            raise ConfigError(f"EKS cluster {cluster_name!r} does not exist") from exc
        raise ClusterReadError(f"eks:DescribeCluster {cluster_name!r}: {code or exc}") from exc
    except BotoCoreError as exc:
        raise ClusterReadError(f"eks:DescribeCluster {cluster_name!r}: {exc}") from exc
    endpoint = cluster.get("endpoint")
    ca_data = (cluster.get("certificateAuthority") or {}).get("data")
    if not endpoint or not ca_data:
        raise ClusterReadError(
            f"EKS cluster {cluster_name!r} has no endpoint yet (status {cluster.get('status')})"
        )
    try:
        ca_pem = decode_certificate_authority(ca_data)
    except ConfigError as exc:
        raise ClusterReadError(f"eks:DescribeCluster {cluster_name!r}: {exc}") from exc
    return ClusterEndpoint(endpoint, ca_pem)


def build_transport(
    host: str,
    *,
    token_source: EksTokenSource | None = None,
    token: str | None = None,
    ca_pem: bytes | None = None,
    verify_ssl: bool = True,
    retries: urllib3.Retry | None = None,
) -> RestTransport:
    """A transport to `host` authenticating with a refreshing token source or a fixed token."""
    credentials: Credentials | None = token_source
    if credentials is None and token is not None:
        credentials = FixedToken(token)
    return RestTransport(
        host,
        credentials=credentials,
        tls=TlsSettings(ca_pem=ca_pem, verify=verify_ssl),
        retries=retries if retries is not None else default_retries(),
    )
