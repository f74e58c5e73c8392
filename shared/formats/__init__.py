"""Parsers from real wire formats (kubectl/Kubernetes JSON, AWS CLI JSON) into the domain model."""
