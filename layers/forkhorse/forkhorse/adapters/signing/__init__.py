"""The deployment's signing key: a key file under the local home, or a KMS key on AWS."""
