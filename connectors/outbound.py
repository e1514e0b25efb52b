"""Where a request to a client-given URL may go (a webhook receiver, an OAuth token endpoint): a URL the
operator allowed goes where it says, http included; any other must be https and resolve to public addresses
only, checked now and connected to at the address checked (a name that resolves elsewhere the second time
gains nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from .browser.guard import AddressPolicy, BlockedURL
from .urls import is_allowed, parse


@dataclass(frozen=True)
class Destination:
    """Where a request goes: the URL to connect to, and the name it is sent for (Host header, TLS)."""

    connect_url: str
    headers: dict[str, str] = field(default_factory=dict)
    extensions: dict[str, str] = field(default_factory=dict)


async def destination(url: str, allowed_urls: list[str], policy: AddressPolicy, timeout_s: float, setting: str) -> Destination:
    """Where `url` may be sent to, found within `timeout_s`; raises BlockedURL, saying why (`setting` names
    the operator's list that would allow it)."""
    if is_allowed(url, allowed_urls):
        return Destination(url)
    parts = parse(url)
    if parts is None:
        raise BlockedURL("the URL must be a plain https URL (no user info, fragment, dot segments or encoded separators)")
    if parts.scheme != "https":
        raise BlockedURL(f"the URL must be https (an http one must be listed in the gateway's {setting})")
    try:
        with anyio.fail_after(timeout_s):  # a name server the URL's owner runs may never answer
            target = await policy.check(url)
    except TimeoutError:
        raise BlockedURL(f"its host did not resolve within {timeout_s:g} s") from None
    except BlockedURL as exc:
        raise BlockedURL(f"{exc}; allowing it is the operator's choice ({setting})") from None
    return Destination(target.connect_url, {"Host": target.host_header}, {"sni_hostname": target.host})
