"""The HTTP API: routes, authentication, CSRF checks, error mapping and OpenAPI."""
