#!/bin/sh
# /lambda-entrypoint.sh, as in AWS's base images: `docker run <image> <handler>` starts the
# bundled emulator; under a real runtime API it runs the bootstrap directly. SAM overrides the
# entrypoint with its own emulator (/var/rapid/aws-lambda-rie), which starts the bootstrap.
if [ $# -ne 1 ]; then
  echo "entrypoint requires the handler name to be the first argument" 1>&2
  exit 142
fi
export _HANDLER="$1"
if [ -z "${AWS_LAMBDA_RUNTIME_API}" ] && [ -x /var/rapid/aws-lambda-rie ]; then
  exec /var/rapid/aws-lambda-rie /var/runtime/bootstrap
fi
exec /var/runtime/bootstrap
