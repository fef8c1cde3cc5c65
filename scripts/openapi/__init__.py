"""The committed OpenAPI document (`openapi.json`): regenerate it, check it, and list the
breaking changes between two versions."""
