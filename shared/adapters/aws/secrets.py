"""`SecretsManagerSecrets`: reads secret strings from AWS Secrets Manager.

Errors, mapped by error code at this boundary (`clients.scaler_error` for the common cases):

    ResourceNotFoundException, no SecretString     ConfigError (the deployment names a wrong secret)
    DecryptionFailure, AccessDenied, credentials   AuthError (the KMS key or the role denies the read)
    throttling                                     ThrottledError
    anything else                                  ReadError

Secret values are credentials: they never appear in a message or a log line.
"""

from __future__ import annotations

from collections.abc import Callable

from shared.adapters.aws import clients
from shared.adapters.aws.clients import BOTO_ERRORS, AwsClient, error_code, scaler_error
from shared.domain.errors import AuthError, ConfigError, ReadError

ClientFactory = Callable[[str, str | None], AwsClient]
"""Builds the client of (service, region); `clients.client` in production."""


def region_of_arn(arn: str) -> str | None:
    """The region field of an ARN (None for a secret name or a malformed ARN)."""
    parts = arn.split(":")
    return parts[3] if len(parts) > 5 and parts[0] == "arn" and parts[3] else None


class SecretsManagerSecrets:
    """The current (AWSCURRENT) value of secrets, read from the secret's own region."""

    def __init__(self, client_factory: ClientFactory = clients.client) -> None:
        self._client_factory = client_factory

    def secret_string(self, secret_id: str) -> str:
        """The SecretString of `secret_id` (ARN or name). Raises ConfigError, AuthError, ReadError."""
        try:
            client = self._client_factory("secretsmanager", region_of_arn(secret_id))
            response = client.get_secret_value(SecretId=secret_id)
        except BOTO_ERRORS as exc:
            code = error_code(exc)
            if code == "ResourceNotFoundException":
                raise ConfigError(f"secret {secret_id} does not exist") from exc
            if code == "DecryptionFailure":
                raise AuthError(f"secret {secret_id}: its KMS key denied the decryption") from exc
            raise scaler_error(exc, ReadError, f"read secret {secret_id}") from exc
        value = response.get("SecretString")
        if not isinstance(value, str):
            raise ConfigError(f"secret {secret_id} holds no SecretString (binary secrets are not supported)")
        return value
