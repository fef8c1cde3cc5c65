"""The receipt-run state machine for moto's Step Functions: the real definition with its
Lambda ARNs substituted, and the real step handlers that serve them."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"
REGION = "us-east-1"
# DefinitionSubstitutions name -> the function directory whose handler serves it.
FUNCTIONS = {
    "PrepareFunctionArn": "run_prepare",
    "QuickCheckFunctionArn": "quick_check",
    "QuickCheckJsFunctionArn": "quick_check",  # the same handler, in the image with node
    "QuickRecordFunctionArn": "run_quick_record",
    "FullStartFunctionArn": "run_full_start",
    "FullPollFunctionArn": "run_full_poll",
    "FinalizeFunctionArn": "run_finalize",
}


def load_handler(directory: str) -> Callable[..., dict[str, Any]]:
    """The `handler` of functions/<directory>/app.py, loaded as the Lambda runtime would."""
    spec = importlib.util.spec_from_file_location(
        f"fn_{directory}", ROOT / "functions" / directory / "app.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    handler: Callable[..., dict[str, Any]] = module.handler
    return handler


def receipt_run_definition() -> str:
    """The real receipt_run state machine with its function ARNs substituted."""
    text = (ROOT / "statemachine/receipt_run.asl.json").read_text()
    for name, function in FUNCTIONS.items():
        text = text.replace(
            "${" + name + "}", f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function}"
        )
    assert "${" not in text, "every DefinitionSubstitution must be covered"
    return text
