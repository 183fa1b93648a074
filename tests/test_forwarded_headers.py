"""X-Forwarded-For is believed only from the deployment's own proxy: rotating it gives no extra password guesses.

compose.yaml's web server trusts the header from one address (its network's gateway, where the host's proxy
connects from) and publishes its port on the host's loopback only; the login throttle (django-axes) counts
the address uvicorn settled on (REMOTE_ADDR), never the header itself.
"""

import asyncio
import ipaddress
import re
from pathlib import Path

import yaml
from django.conf import settings
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from tests.test_login_throttling import log_in

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = re.compile(r"^\$\{(?P<name>\w+):-(?P<default>[^}]*)\}$")


def compose() -> dict:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())


def default_of(value: str) -> str:
    """The value compose uses when the variable is unset: ${NAME:-default} -> default."""
    match = DEFAULT.match(value)
    return match.group("default") if match else value


def web_trusted_proxies() -> str:
    command = compose()["services"]["web"]["command"]
    assert "--proxy-headers" in command
    return default_of(command[command.index("--forwarded-allow-ips") + 1])


def test_compose_trusts_forwarded_headers_from_its_gateway_only():
    trusted = web_trusted_proxies()
    assert "*" not in trusted
    network = compose()["networks"]["default"]["ipam"]["config"][0]
    gateway = ipaddress.ip_address(default_of(network["gateway"]))
    assert gateway in ipaddress.ip_network(default_of(network["subnet"]))
    assert [ipaddress.ip_address(a.strip()) for a in trusted.split(",")] == [gateway]


def test_compose_publishes_the_web_port_on_the_host_loopback_only():
    for service in compose()["services"].values():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), port


def client_address_seen(trusted: str, peer: str, forwarded_for: str) -> str:
    """The client address uvicorn's proxy-headers middleware hands the app, given the compose setting."""
    seen = {}

    async def app(scope, receive, send):
        seen["client"] = scope["client"][0]

    scope = {
        "type": "http",
        "client": (peer, 40000),
        "scheme": "http",
        "headers": [(b"x-forwarded-for", forwarded_for.encode())],
    }
    asyncio.run(ProxyHeadersMiddleware(app, trusted_hosts=trusted)(scope, None, None))
    return seen["client"]


def test_uvicorn_with_the_compose_setting_ignores_the_header_from_anyone_but_the_proxy():
    trusted = web_trusted_proxies()
    assert client_address_seen(trusted, "172.30.250.23", "198.51.100.1") == "172.30.250.23"
    assert client_address_seen(trusted, "203.0.113.7", "198.51.100.1") == "203.0.113.7"
    assert client_address_seen(trusted, trusted, "198.51.100.1") == "198.51.100.1"
    assert client_address_seen("*", "203.0.113.7", "198.51.100.1") == "198.51.100.1"  # what "*" allowed


def test_the_login_throttle_counts_the_peer_address_not_the_header(client, staff_user):
    assert tuple(settings.AXES_IPWARE_META_PRECEDENCE_ORDER) == ("REMOTE_ADDR",)
    assert not settings.AXES_CLIENT_IP_CALLABLE
    for i in range(4):
        response = client.post(
            "/admin/login/?next=/admin/",
            {"username": "staff", "password": "wrong-guess"},
            REMOTE_ADDR="203.0.113.7",
            HTTP_X_FORWARDED_FOR=f"198.51.100.{i}",
        )
        assert response.status_code == 200
    assert log_in(client, "wrong-guess").status_code == 429  # the fifth guess from that address, header or not
