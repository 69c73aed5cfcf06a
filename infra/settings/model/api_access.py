"""Which addresses `kubernetes.apiAccessCidrs` may name: one's own public address or network,
never the whole internet, a documentation range or an address behind a router."""

from __future__ import annotations

import ipaddress


# RFC 5737 (IPv4) and RFC 3849 (IPv6) reserve these for documentation: no real client has them.
DOCUMENTATION_RANGES = tuple(ipaddress.ip_network(n) for n in (
    "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32"))
# Addresses a machine has behind a router, never the one the cloud's API server sees it come
# from: RFC 1918 private networks (what `hostname -I` prints at home or in an office), RFC 6598
# carrier-grade NAT, loopback, link-local, and IPv6 unique local (RFC 4193) and link-local.
UNREACHABLE_RANGES = {
    "a private network (RFC 1918)": ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"),
    "carrier-grade NAT space (RFC 6598)": ("100.64.0.0/10",),
    "the loopback range": ("127.0.0.0/8", "::1/128"),
    "the link-local range": ("169.254.0.0/16", "fe80::/10"),
    "an IPv6 unique local range (RFC 4193)": ("fc00::/7",),
}
FIND_YOUR_ADDRESS = (
    "pulumi config set --path 'kubernetes.apiAccessCidrs[0]' "
    "\"$(curl -s https://checkip.amazonaws.com)/32\"")
# IPv6 prefixes that carry IPv4 addresses in their last 32 bits (RFC 4291 IPv4-mapped, RFC 6052
# NAT64's well-known prefix): a range inside one is judged as the IPv4 range it stands for, here
# (private, documentation) and by the breadth rule (infra/settings/security_rules.py).
IPV4_IN_IPV6 = tuple(ipaddress.ip_network(n) for n in ("::ffff:0:0/96", "64:ff9b::/96"))


def ipv4_equivalent(network: ipaddress.IPv4Network | ipaddress.IPv6Network
                    ) -> ipaddress.IPv4Network | None:
    """The IPv4 range an IPv6 range inside IPV4_IN_IPV6 stands for (`::ffff:10.1.2.3/128` ->
    `10.1.2.3/32`); None for an IPv4 range or one of IPv6 addresses only."""
    if network.version != 6:
        return None
    for embedding in IPV4_IN_IPV6:
        if network.subnet_of(embedding):  # type: ignore[arg-type]
            return ipaddress.IPv4Network((int(network.network_address) & 0xFFFFFFFF,
                                          network.prefixlen - embedding.prefixlen))
    return None


def _inside(network: ipaddress.IPv4Network | ipaddress.IPv6Network, cidrs: tuple[str, ...]) -> bool:
    return any(network.version == other.version
               and network.subnet_of(other)  # type: ignore[arg-type]
               for other in map(ipaddress.ip_network, cidrs))


def api_access_cidr(cidr: str, index: int = 0) -> str:
    """One CIDR the API server admits, normalised: a bare address is that address alone
    (`81.2.69.142` -> `81.2.69.142/32`), as `ip_network` reads it. Host bits are refused
    (strict), not cleared: `81.2.69.142/24` may mean the address or its /24, and clearing
    them silently would open the API to 255 other machines the user did not name."""
    try:
        network = ipaddress.ip_network(cidr.strip(), strict=True)
    except ValueError as error:
        if "host bits set" in str(error):
            address, _, prefix = cidr.strip().partition("/")
            whole = ipaddress.ip_network(cidr.strip(), strict=False)
            full = 32 if whole.version == 4 else 128
            raise ValueError(
                f"{cidr!r} has host bits set: write {address}/{full} for that address alone "
                f"or {whole} for its whole /{prefix} network; for the address alone: "
                f"`pulumi config set --path 'kubernetes.apiAccessCidrs[{index}]' {address}/{full}`"
                ) from None
        raise ValueError(f"{cidr!r} is not a CIDR: {error}") from None
    if network.prefixlen == 0:
        raise ValueError(
            f"{cidr!r} opens the API server to the whole internet; name your own public "
            f"address or network (a /32, or your office's public range): "
            f"`{FIND_YOUR_ADDRESS.replace('[0]', f'[{index}]')}`")
    # IPv4 written as IPv6 is that IPv4 range: `::ffff:10.1.2.3` is still a private address.
    judged = ipv4_equivalent(network) or network
    if judged is not network:
        cidr = f"{cidr.strip()} (IPv4 {judged})"
    if _inside(judged, tuple(str(doc) for doc in DOCUMENTATION_RANGES)):
        raise ValueError(
            f"{cidr!r} is a documentation range (RFC 5737/3849) no real machine has, so "
            f"`pulumi up` could not reach the cluster it creates; use your own address: "
            f"{FIND_YOUR_ADDRESS}")
    for kind, cidrs in UNREACHABLE_RANGES.items():
        if _inside(judged, cidrs):
            raise ValueError(
                f"{cidr!r} is in {kind}: the API server sees your machine come from its public "
                f"address, never this one, so `pulumi up` could not reach the cluster; use "
                f"your public address: {FIND_YOUR_ADDRESS}")
    return str(network)
