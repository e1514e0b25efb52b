"""Which IP addresses a fetch on the model's behalf may reach: public ones, and the networks an operator
allows by name. Shared by the browser and webhooks (connectors/browser/guard.py) and the sandboxes' egress
proxy (egress/), which runs in an environment of its own: this module needs nothing but the standard library."""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


class PublicAddresses:
    """Public unicast addresses, plus the operator's `allowed` networks (a test server, an internal index)."""

    def __init__(self, allowed: list[str] | None = None) -> None:
        self.allowed: list[Network] = [ipaddress.ip_network(network, strict=False) for network in allowed or []]

    def permits(self, address: Address) -> bool:
        if any(address in network for network in self.allowed):
            return True
        embedded = embedded_ipv4(address)
        if embedded:  # an IPv6 form that reaches an IPv4 address (mapped, NAT64, 6to4, Teredo): that address decides
            return all(self.permits(inner) for inner in embedded)
        return address.is_global and not address.is_multicast and not address.is_reserved


def embedded_ipv4(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address stands for, where a network would route it to one."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if (address in _IPV4_COMPATIBLE and int(address) > 1) or any(address in network for network in _NAT64):
        return [low]
    return []
