"""ContainerPort adapters: podman (local default), Fargate (AWS) and a mock (tests only)."""
