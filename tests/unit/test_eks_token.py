"""EKS bearer tokens, cluster endpoint discovery and the transport's wiring (no network)."""

from __future__ import annotations

import base64
import io
import json
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
import urllib3
from botocore.exceptions import ClientError
from moto import mock_aws

from shared.adapters.kubernetes.auth import (
    CLUSTER_ID_HEADER,
    TOKEN_PREFIX,
    EksTokenSource,
    build_transport,
    decode_certificate_authority,
    describe_cluster_endpoint,
    eks_token,
)
from shared.adapters.kubernetes.cluster import KubernetesCluster
from shared.adapters.kubernetes.transport import transport_from_kubeconfig
from shared.domain.errors import AuthError, ClusterReadError, ConfigError

REGION = "eu-west-1"
CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def presigned_url(token: str) -> str:
    encoded = token.removeprefix(TOKEN_PREFIX)
    return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()


def query_of(token: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(presigned_url(token)).query).items()}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sts() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sts", region_name=REGION)


def count_signings(sts_client: Any) -> list[str]:
    """Record the cluster header of every GetCallerIdentity request signed by `sts_client`."""
    signed: list[str] = []
    sts_client.meta.events.register_last(  # after the adapter's handler has added the header
        "before-sign.sts.GetCallerIdentity",
        lambda request, **_: signed.append(request.headers.get(CLUSTER_ID_HEADER)),
        unique_id="test-count-signings",
    )
    return signed


def test_token_is_a_base64url_presigned_get_caller_identity_url(sts: Any) -> None:
    # Given an STS client for a region
    # When a token is made for a cluster
    token = eks_token(sts, "gpu-cluster")

    # Then it is "k8s-aws-v1." + unpadded base64url of a presigned regional GetCallerIdentity GET
    assert token.startswith(TOKEN_PREFIX)
    assert "=" not in token and "+" not in token and "/" not in token
    url = urlsplit(presigned_url(token))
    assert url.scheme == "https" and url.netloc == f"sts.{REGION}.amazonaws.com"
    query = query_of(token)
    assert query["Action"] == "GetCallerIdentity"
    assert query["Version"] == "2011-06-15"
    assert query["X-Amz-Expires"] == "60"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert f"/{REGION}/sts/aws4_request" in query["X-Amz-Credential"]


def test_token_signs_the_cluster_id_header(sts: Any) -> None:
    # Given an STS client
    # When tokens are made for two clusters with the same client
    first, second = eks_token(sts, "cluster-a"), eks_token(sts, "cluster-b")

    # Then the x-k8s-aws-id header is among the signed headers, and it is part of the signature
    # (the name never appears in the URL, so only a signed header can bind the token to a cluster)
    assert query_of(first)["X-Amz-SignedHeaders"].split(";") == ["host", CLUSTER_ID_HEADER]
    assert "cluster-a" not in presigned_url(first)
    if query_of(first)["X-Amz-Date"] == query_of(second)["X-Amz-Date"]:
        assert query_of(first)["X-Amz-Signature"] != query_of(second)["X-Amz-Signature"]


def test_cluster_name_is_not_left_in_the_request_params(sts: Any) -> None:
    # Given an STS client used for a token
    signed = count_signings(sts)
    eks_token(sts, "gpu-cluster")

    # When the same client calls GetCallerIdentity normally (moto answers)
    identity = sts.get_caller_identity()

    # Then the header went only into the presigned request, and the client still works
    assert signed == ["gpu-cluster", None]
    assert identity["Account"]


def test_token_source_reuses_the_token_until_the_refresh_age(sts: Any) -> None:
    # Given a token source with an injected clock
    clock = FakeClock()
    signed = count_signings(sts)
    source = EksTokenSource("gpu-cluster", REGION, sts_client=sts, clock=clock, refresh_seconds=600)

    # When the token is asked for repeatedly within 10 minutes
    first = source.token()
    clock.now += 599
    again = source.token()

    # Then it was signed once
    assert again == first
    assert signed == ["gpu-cluster"]


def test_token_source_signs_a_new_token_after_the_refresh_age(sts: Any) -> None:
    # Given a token source whose token is 10 minutes old
    clock = FakeClock()
    signed = count_signings(sts)
    source = EksTokenSource("gpu-cluster", REGION, sts_client=sts, clock=clock, refresh_seconds=600)
    source.token()
    clock.now += 600

    # When the token is asked for
    token = source.token()

    # Then a new one is signed (well before EKS's 15-minute limit)
    assert signed == ["gpu-cluster", "gpu-cluster"]
    assert token.startswith(TOKEN_PREFIX)


def test_the_token_source_refreshes_the_bearer_header_of_a_long_lived_transport(sts: Any) -> None:
    # Given a transport authenticating with a token source
    clock = FakeClock()
    signed = count_signings(sts)
    source = EksTokenSource("gpu-cluster", REGION, sts_client=sts, clock=clock)
    transport = build_transport("https://example.invalid", token_source=source)
    assert transport.credentials is source
    source.authorization()  # the first request signs the first token

    # When the transport asks for the Authorization header of requests 5 and 11 minutes later
    clock.now += 300
    early = source.authorization()
    clock.now += 360
    late = source.authorization()

    # Then each request carries "Bearer <token>", re-signed once the token is 10 minutes old
    assert str(early).startswith("Bearer " + TOKEN_PREFIX)
    assert str(late).startswith("Bearer " + TOKEN_PREFIX)
    assert late is not early  # signed again (equal text when signed within the same second)
    assert len(signed) == 2


def test_missing_credentials_are_an_auth_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # Given a process without any AWS credentials
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    sts = boto3.session.Session().client("sts", region_name=REGION)

    # When / Then signing a token fails with the project's error
    with pytest.raises(AuthError, match="gpu-cluster"):
        eks_token(sts, "gpu-cluster")


class FakeEks:
    """Records DescribeCluster calls; answers with a canned cluster or raises a ClientError code."""

    def __init__(self, cluster: dict[str, Any] | None = None, error_code: str | None = None) -> None:
        self.cluster = cluster
        self.error_code = error_code
        self.calls: list[str] = []

    def describe_cluster(self, *, name: str) -> dict[str, Any]:
        self.calls.append(name)
        if self.error_code:
            raise ClientError({"Error": {"Code": self.error_code, "Message": "no"}}, "DescribeCluster")
        return {"cluster": self.cluster}


def test_describe_cluster_gives_endpoint_and_decoded_ca() -> None:
    # Given an EKS cluster with an endpoint and a base64 CA
    eks = FakeEks(
        {
            "endpoint": "https://abc.gr7.eu-west-1.eks.amazonaws.com",
            "status": "ACTIVE",
            "certificateAuthority": {"data": base64.b64encode(CA_PEM).decode()},
        }
    )

    # When its endpoint is described
    endpoint = describe_cluster_endpoint(eks, "gpu-cluster")

    # Then the URL and the PEM come back
    assert eks.calls == ["gpu-cluster"]
    assert endpoint.url == "https://abc.gr7.eu-west-1.eks.amazonaws.com"
    assert endpoint.ca_pem == CA_PEM


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("AccessDeniedException", AuthError),
        ("ResourceNotFoundException", ConfigError),
        ("ServerException", ClusterReadError),
    ],
)
def test_describe_cluster_failures_map_to_project_errors(code: str, error: type[Exception]) -> None:
    # Given DescribeCluster failing with an AWS error code
    eks = FakeEks(error_code=code)

    # When / Then the failure is mapped at the boundary
    with pytest.raises(error):
        describe_cluster_endpoint(eks, "gpu-cluster")


def test_cluster_still_creating_is_a_read_error() -> None:
    # Given a cluster without an endpoint yet
    eks = FakeEks({"status": "CREATING"})

    # When / Then
    with pytest.raises(ClusterReadError, match="CREATING"):
        describe_cluster_endpoint(eks, "gpu-cluster")


@pytest.mark.parametrize("data", ["not base64!", base64.b64encode(b"just text").decode()])
def test_invalid_certificate_authority_is_a_config_error(data: str) -> None:
    # Given a CA that is not base64 of a PEM certificate
    # When / Then
    with pytest.raises(ConfigError, match="certificate_authority"):
        decode_certificate_authority(data)


def test_the_transport_takes_the_ca_in_memory_and_retries_transport_failures_of_gets_only() -> None:
    # Given an endpoint, a CA and a fixed token
    # When the transport is built
    transport = build_transport("https://k8s.example/", token="abc", ca_pem=CA_PEM)

    # Then it verifies TLS against the CA data and retries reads only on idempotent methods
    assert transport.host == "https://k8s.example"
    assert transport.tls.ca_pem == CA_PEM
    assert transport.tls.verify
    pool = transport._pool.connection_pool_kw
    assert pool["ca_cert_data"] == CA_PEM.decode() and pool["cert_reqs"] == ssl.CERT_REQUIRED
    assert transport.credentials is not None
    assert transport.credentials.authorization() == "Bearer abc"
    retries = transport.retries
    assert retries is not None
    assert retries.status == 0 and retries.read == 1 and retries.connect == 2
    assert retries.allowed_methods is not None
    assert "GET" in retries.allowed_methods and "POST" not in retries.allowed_methods
    assert "PATCH" not in retries.allowed_methods


def test_kubeconfig_gives_a_transport(tmp_path: Any) -> None:
    # Given a kubeconfig with a token user
    path = tmp_path / "kubeconfig"
    path.write_text(
        """
apiVersion: v1
kind: Config
current-context: local
clusters: [{name: local, cluster: {server: "http://127.0.0.1:6443"}}]
users: [{name: me, user: {token: secret-token}}]
contexts: [{name: local, context: {cluster: local, user: me}}]
"""
    )

    # When it is loaded
    transport = transport_from_kubeconfig(str(path))

    # Then the transport points at its server with its token
    assert transport.host == "http://127.0.0.1:6443"
    assert transport.credentials is not None
    assert transport.credentials.authorization() == "Bearer secret-token"
    assert not transport.renew("Bearer secret-token")  # a kubeconfig's token is not re-signed here


def test_unreadable_kubeconfig_is_a_config_error(tmp_path: Any) -> None:
    # Given a kubeconfig path that does not exist
    # When / Then
    with pytest.raises(ConfigError, match="kubeconfig"):
        transport_from_kubeconfig(str(tmp_path / "missing"))


class TokenCheckingPool:
    """Stands in for the transport's urllib3 pool (no network): refuses the first `refusals` requests
    with 401 and answers an empty NodeList after; records the Authorization header of each."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.authorizations: list[str] = []

    def request(self, method: str, url: str, **kwargs: Any) -> urllib3.HTTPResponse:
        self.authorizations.append(kwargs["headers"]["Authorization"])
        if len(self.authorizations) <= self.refusals:
            status, body = 401, {"kind": "Status", "status": "Failure", "reason": "Unauthorized", "code": 401}
        else:
            status, body = 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": []}
        return urllib3.HTTPResponse(
            body=io.BytesIO(json.dumps(body).encode()),
            status=status,
            headers={"Content-Type": "application/json"},
            preload_content=False,
        )


def cluster_behind(pool: TokenCheckingPool, sts: Any, *, token_source: bool = True) -> KubernetesCluster:
    source = EksTokenSource("gpu-cluster", REGION, sts_client=sts, clock=FakeClock())
    source.token()  # a token signed and cached before the requests below
    transport = build_transport(
        "https://eks.invalid", token_source=source if token_source else None, token="fixed"
    )
    transport._pool = pool  # type: ignore[assignment]
    return KubernetesCluster(transport)


def test_a_refused_token_is_re_signed_and_the_request_retried_once(sts: Any) -> None:
    # Given an API server that refuses the first request's token (a fresh token, still cached)
    pool = TokenCheckingPool(refusals=1)
    cluster = cluster_behind(pool, sts)
    signed = count_signings(sts)

    # When the adapter lists nodes
    nodes = cluster.list_nodes()

    # Then it signed one new token and sent the request again, which succeeded
    assert nodes == ()
    assert signed == ["gpu-cluster"]
    assert len(pool.authorizations) == 2
    assert all(a.startswith("Bearer " + TOKEN_PREFIX) for a in pool.authorizations)


def test_a_second_401_is_an_auth_error(sts: Any) -> None:
    # Given an API server that refuses every token
    pool = TokenCheckingPool(refusals=10)
    cluster = cluster_behind(pool, sts)
    signed = count_signings(sts)

    # When the adapter lists nodes / Then one retry with a new token, then AuthError
    with pytest.raises(AuthError, match="401"):
        cluster.list_nodes()
    assert signed == ["gpu-cluster"]
    assert len(pool.authorizations) == 2


def test_a_fixed_token_is_not_retried(sts: Any) -> None:
    # Given a client with a fixed token (nothing to re-sign) and a server that refuses it
    pool = TokenCheckingPool(refusals=1)
    cluster = cluster_behind(pool, sts, token_source=False)

    # When the adapter lists nodes / Then AuthError at once: a retry would send the same token
    with pytest.raises(AuthError):
        cluster.list_nodes()
    assert pool.authorizations == ["Bearer fixed"]


def test_concurrent_refusals_of_one_token_sign_one_new_token(sts: Any) -> None:
    # Given a token source whose cached token was refused by two requests at once
    source = EksTokenSource("gpu-cluster", REGION, sts_client=sts, clock=FakeClock())
    refused = source.token()
    signed = count_signings(sts)

    # When both drop it, the second after the first request had already signed a new one
    source.invalidate(refused)
    renewed = source.token()
    source.invalidate(refused)

    # Then the new token stays: one signature, not one per refused request
    assert source.token() is renewed
    assert signed == ["gpu-cluster"]
