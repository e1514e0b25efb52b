"""The sandboxes' egress proxy: the only way out of the internal network that sandboxes with a network
policy join. mitmproxy, used as a library, does the HTTP, TLS and CONNECT work; the addon here decides
(addon.py), from grants the gateway registers over a control API (control.py, grants.py).

It runs in an image of its own (egress/Dockerfile: mitmproxy pins its dependencies too tightly to share the
gateway's environment) and imports nothing of the gateway's but the standard-library helpers in runtime/."""
