"""AWS test helpers: moto tables built from template.yaml, so tests and template cannot drift."""

import copy
import functools
import importlib.util
import itertools
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
_loads = itertools.count()
TABLE_RESOURCE = "ForkhorseTable"


class _CloudFormationLoader(yaml.CSafeLoader):
    """A safe loader that reads CloudFormation short-form tags (!Ref, !Sub, ...) as plain data."""


def _any_tag(loader: yaml.CSafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix == "Ref":
        return {"Ref": value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)  # the short form's "Resource.Attribute"
    return {f"Fn::{suffix}": value}


_CloudFormationLoader.add_multi_constructor("!", _any_tag)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as data; a copy of one parse per process, so callers may change it."""
    return copy.deepcopy(_parsed(path))


@functools.cache
def _parsed(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as stream:
        loaded: dict[str, Any] = yaml.load(stream, Loader=_CloudFormationLoader)
    return loaded


def table_properties(resource: str = TABLE_RESOURCE) -> dict[str, Any]:
    properties: dict[str, Any] = load_template()["Resources"][resource]["Properties"]
    return properties


def create_table_from_template(dynamodb_client: Any, table_name: str = "forkhorse") -> str:
    """Create the template's table (its key schema and billing) in moto; returns its name."""
    properties = table_properties()
    dynamodb_client.create_table(
        TableName=table_name,
        AttributeDefinitions=properties["AttributeDefinitions"],
        KeySchema=properties["KeySchema"],
        BillingMode=properties["BillingMode"],
    )
    dynamodb_client.get_waiter("table_exists").wait(TableName=table_name)
    return table_name


def load_function(directory: str) -> ModuleType:
    """`functions/<directory>/app.py`, loaded afresh: a new Lambda container each time."""
    path = ROOT / "functions" / directory / "app.py"
    spec = importlib.util.spec_from_file_location(f"fn_{directory}_{next(_loads)}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
