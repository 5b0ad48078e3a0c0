"""The nemesis's network: each broker in its own network namespace (`ip netns`), joined to the root
namespace by a veth pair on one bridge, on a private /24 (10.77.N.0/24, N from the caller).

Rules:
- names start with `kn<tag>` (tag: 4 hex digits of this run), so a run touches only what it made;
- `setup` records every namespace and link as it creates it and `teardown` removes each of them (bridge
  last), even when setup failed half way; `teardown` returns what it could not remove (empty when clean);
- a broker is isolated from everyone (the other brokers, ZooKeeper, clients) by taking its veth's root
  side down; healing brings it up (ARP and TCP retransmission carry on where they stopped);
- `unavailable_reason()` says in one line why namespaces cannot be used here (not root, no `ip`, the kernel
  refuses a namespace, veth or bridge), so the harness falls back to loopback and prints it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10, check=check)


def unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "not root (network namespaces need CAP_NET_ADMIN)"
    if shutil.which("ip") is None:
        return "iproute2's `ip` not found"
    probe = f"knp{uuid.uuid4().hex[:6]}"
    try:
        r = _ip("netns", "add", probe, check=False)
        if r.returncode != 0:
            return f"`ip netns add` failed: {r.stderr.strip()}"
        r = _ip("link", "add", f"{probe}a", "type", "veth", "peer", "name", f"{probe}b", check=False)
        if r.returncode != 0:
            return f"no veth pairs: {r.stderr.strip()}"
        _ip("link", "del", f"{probe}a", check=False)
        r = _ip("link", "add", f"{probe}br", "type", "bridge", check=False)
        if r.returncode != 0:
            return f"no bridges: {r.stderr.strip()}"
        _ip("link", "del", f"{probe}br", check=False)
        return None
    finally:
        _ip("netns", "del", probe, check=False)


class Namespaces:
    def __init__(self, broker_ids: list[int], subnet: int) -> None:
        self.tag = uuid.uuid4().hex[:4]
        self.subnet = subnet
        self.broker_ids = broker_ids
        self.bridge = f"kn{self.tag}br"
        self.made_ns: list[str] = []
        self.made_links: list[str] = []

    @property
    def host_addr(self) -> str:
        """The root namespace's address on the bridge (ZooKeeper's and the relays' side)."""
        return f"10.77.{self.subnet}.1"

    def addr(self, broker_id: int) -> str:
        return f"10.77.{self.subnet}.{10 + broker_id}"

    def ns(self, broker_id: int) -> str:
        return f"kn{self.tag}-{broker_id}"

    def veth(self, broker_id: int) -> str:
        return f"kn{self.tag}h{broker_id}"

    def exec_prefix(self, broker_id: int) -> list[str]:
        return ["ip", "netns", "exec", self.ns(broker_id)]

    def setup(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        self.made_links.append(self.bridge)
        _ip("addr", "add", f"{self.host_addr}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for b in self.broker_ids:
            ns, host_side, ns_side = self.ns(b), self.veth(b), f"kn{self.tag}n{b}"
            _ip("netns", "add", ns)
            self.made_ns.append(ns)
            _ip("link", "add", host_side, "type", "veth", "peer", "name", ns_side)
            self.made_links.append(host_side)  # deleting one end deletes the pair
            _ip("link", "set", host_side, "master", self.bridge)
            _ip("link", "set", host_side, "up")
            _ip("link", "set", ns_side, "netns", ns)
            _ip("-n", ns, "addr", "add", f"{self.addr(b)}/24", "dev", ns_side)
            _ip("-n", ns, "link", "set", ns_side, "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def isolate(self, broker_id: int) -> None:
        _ip("link", "set", self.veth(broker_id), "down")

    def heal(self, broker_id: int) -> None:
        _ip("link", "set", self.veth(broker_id), "up")

    def teardown(self) -> list[str]:
        left: list[str] = []
        for link in [x for x in self.made_links if x != self.bridge] + [self.bridge]:
            if link in self.made_links and _ip("link", "del", link, check=False).returncode != 0:
                if _ip("link", "show", link, check=False).returncode == 0:
                    left.append(f"link {link}")
        for ns in self.made_ns:
            if _ip("netns", "del", ns, check=False).returncode != 0 and ns in _ip("netns", "list").stdout:
                left.append(f"netns {ns}")
        self.made_links.clear()
        self.made_ns.clear()
        return left
