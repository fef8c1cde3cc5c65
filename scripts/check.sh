#!/usr/bin/env bash
# `make check`: validate and build the SAM application offline. It never deploys.
set -euo pipefail
# The committed openapi.json must be what the code generates; breaking changes against it
# are listed apart (scripts/openapi). `make openapi` regenerates it.
PYTHONPATH=layers/forkhorse "${FORKHORSE_PYTHON:-.venv/bin/python}" -m scripts.openapi check
export SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
tools_python="$(dirname "$(command -v sam)")/python"
python313_dir=$(dirname "$(scripts/find-python313.sh)")
export PATH="$python313_dir:$PATH"
sam validate --lint --template template.yaml
cfn-lint template.yaml
# The hygiene scan (checkov, its own venv): each finding accepted in checkov-baseline.yaml.
"$(dirname "$(command -v checkov)")/python" scripts/checkov_gate.py
sam build --template template.yaml --build-dir .aws-sam/build
# Tests on the synthesized CloudFormation; the SAM translator lives in the tools venv.
# --noconftest: the suite's root conftest loads fixtures that import forkhorse, which the
# tools venv does not have; the template tests need none of them.
"$tools_python" -m pytest -q --noconftest -o addopts="-p no:cacheprovider" -W ignore::pytest.PytestConfigWarning tests/template
echo "check: template valid, lint and hygiene scan clean, build complete"
