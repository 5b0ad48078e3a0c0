"""No key is claimed to take effect unless the code reads it: every broker key with `applies=True` is
named by a module outside the key table, or read by one of BrokerConfig's derived properties."""

from __future__ import annotations

import re

from helpers import REPO
from kaflite.server.config import BROKER_CONFIGS

SRC = REPO / "src" / "kaflite"
CONFIG = SRC / "server" / "config"  # the key tables name every key: they do not count as reading one


def test_every_applying_key_is_read() -> None:
    elsewhere = "".join(p.read_text() for p in SRC.rglob("*.py") if CONFIG not in p.parents)
    # BrokerConfig's properties read `self._values["key"]` (retention_ms, log_dirs, listeners, ...)
    derived = set(re.findall(r'_values\["([a-z0-9.]+)"\]', (CONFIG / "broker_config.py").read_text()))
    unread = [k for k, d in BROKER_CONFIGS.items() if d.applies and f'"{k}"' not in elsewhere and k not in derived]
    assert not unread, f"keys claimed to apply that nothing reads (read them, or mark applies=False): {unread}"


def test_keys_without_effect_say_why() -> None:
    for key, d in BROKER_CONFIGS.items():
        if not d.applies:
            assert d.differs, key
