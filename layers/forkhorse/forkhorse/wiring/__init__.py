"""The composition roots, one per environment, and the only package code that builds
adapters: `aws` for the Lambda functions, `local` for `forkhorse serve`, the demo and the
tests, each from its typed settings in `settings`; `handlers` are the step functions'
Lambda handlers, whose ports come from `aws` unless a test provides its own."""
