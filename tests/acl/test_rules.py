"""The per-API authorization table (server/acl/rules.py): every check a handler makes is in it, every
check in it is made, and docs/security.md shows it."""

from __future__ import annotations

import ast
import re

from helpers import REPO
from kaflite.server.acl import rules
from kaflite.server.handlers import load_registry

HANDLERS = REPO / "src" / "kaflite" / "server" / "handlers"


def _used() -> dict[str, set[str]]:
    """Per handler module, the `rules.NAME` constants it uses."""
    out: dict[str, set[str]] = {}
    for path in sorted(HANDLERS.glob("*.py")):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "rules" \
                    and isinstance(getattr(rules, node.attr, None), rules.Check):
                names.add(node.attr)
        out[path.stem] = names
    return out


def _constants() -> dict[str, rules.Check]:
    return {k: v for k, v in vars(rules).items() if isinstance(v, rules.Check)}


def test_every_check_in_the_table_is_made_by_a_handler_and_every_check_made_is_in_the_table() -> None:
    used = set().union(*_used().values())
    in_table = {name for name, c in _constants().items() if any(c is x for cs in rules.API_CHECKS.values() for x in cs)}
    assert used == in_table == set(_constants())


def test_no_handler_asks_the_authorizer_except_through_the_table() -> None:
    for path in sorted(HANDLERS.glob("*.py")):
        text = path.read_text()
        assert "ctx.authorize(" not in text and "ctx.require(" not in text, path.name


def test_every_served_api_with_kafka_checks_is_in_the_table() -> None:
    served = {k for k, _lo, _hi in load_registry().ranges()}
    no_checks = {18, 17, 36}  # ApiVersions, SaslHandshake, SaslAuthenticate: Kafka checks nothing
    assert served - no_checks == set(rules.API_CHECKS), sorted((served - no_checks) ^ set(rules.API_CHECKS))


def test_docs_security_shows_the_table() -> None:
    text = (REPO / "docs" / "security.md").read_text()
    assert rules.markdown_table() in text, "regenerate: python -c 'from kaflite.server.acl import rules; " \
                                           "print(rules.markdown_table())'"
    assert re.search(r"^## ", text, re.M)
