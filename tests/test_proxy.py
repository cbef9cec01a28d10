"""Endpoints behind a proxy (core/wire/proxy.py): HTTPS_PROXY, HTTP_PROXY and NO_PROXY are honoured
as the openai SDK honours them, through rollout as a user runs it. The proxy is
tests/http_proxy.py and the endpoint tests/openai_double.py, served over TLS with a certificate
made here for localhost (both are doubles at the edge endstate does not own)."""

from __future__ import annotations

import base64
import shutil
import ssl
import subprocess

import pytest
from http_proxy import LocalProxy
from openai_double import FakeEndpoint, gold_policy
from test_preflight import BENCH, chat_agent, one_task, records, tool

from endstate.core.wire import proxy

UNSET = (*proxy.VARIABLES, "no_proxy", "NO_PROXY")  # the test's proxy settings, not the box's


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """(server context, CA file): a self-signed certificate for localhost, which the tools trust
    through SSL_CERT_FILE as they would a cluster's own CA."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test certificate")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context, str(cert)


def test_an_https_endpoint_is_reached_through_a_connect_tunnel(tmp_path, certificate):
    context, ca = certificate
    with LocalProxy() as egress, FakeEndpoint(policy=gold_policy(BENCH), tls=context) as ep:
        env = {"HTTPS_PROXY": egress.url.replace("http://", "http://me:p%40ss@"),
               "SSL_CERT_FILE": ca}
        done, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url), env=env, unset=UNSET)
        reached = len(ep.requests)
    assert done.returncode == 0, done.stderr
    assert [e["status"] for e in records(done.stdout)] == ["ok"] and reached > 0
    # every connection a tunnel to the endpoint: the proxy saw host and port, never a request
    assert egress.lines and set(egress.lines) == {f"CONNECT localhost:{ep.port} HTTP/1.1"}
    assert set(egress.authorizations) == {"Basic " + base64.b64encode(b"me:p@ss").decode()}


def test_an_http_endpoint_is_forwarded_and_no_proxy_goes_direct(tmp_path):
    with LocalProxy() as egress, FakeEndpoint(policy=gold_policy(BENCH)) as ep:
        done, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url),
                       env={"HTTP_PROXY": egress.url}, unset=UNSET)
        forwarded = list(egress.lines)
        direct, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url),
                         env={"HTTP_PROXY": egress.url, "NO_PROXY": "localhost,127.0.0.1"}, unset=UNSET)
    assert done.returncode == 0 and direct.returncode == 0, done.stderr + direct.stderr
    assert forwarded[0] == f"GET http://127.0.0.1:{ep.port}/v1/models HTTP/1.1"
    assert f"POST http://127.0.0.1:{ep.port}/v1/chat/completions HTTP/1.1" in forwarded
    assert egress.lines == forwarded  # NO_PROXY: nothing more went through the proxy
    assert [e["status"] for e in records(direct.stdout)] == ["ok"]


def test_a_proxy_that_refuses_the_tunnel_is_named_before_any_work(tmp_path, certificate):
    context, ca = certificate
    with LocalProxy(refuse=407) as egress, FakeEndpoint(policy=gold_policy(BENCH), tls=context) as ep:
        done, _ = tool("rollout", "run", one_task(tmp_path), *chat_agent(ep.base_url),
                       env={"HTTPS_PROXY": egress.url, "SSL_CERT_FILE": ca}, unset=UNSET)
    assert done.returncode == 2, done.stderr
    assert (f"the proxy {egress.url} refused CONNECT localhost:{ep.port}: HTTP/1.1 407 Refused"
            in done.stderr), done.stderr


def test_the_environment_as_httpx_reads_it():
    found = {"https": "http://p:3128", "http": "proxy.internal:8080", "no": "internal.example,.corp,h:81"}
    assert proxy.route(found, "https", "api.openai.com", 443).url == "http://p:3128"
    assert proxy.route(found, "http", "vllm", 8000).url == "http://proxy.internal:8080"
    for host, port in (("internal.example", 443), ("a.internal.example", 443), ("x.corp", 443),
                       ("h", 81)):
        assert proxy.route(found, "https", host, port) is None, host
    assert proxy.route(found, "https", "h", 82) is not None
    assert proxy.route({"all": "http://a:1"}, "https", "x", 443).url == "http://a:1"
    with pytest.raises(Exception, match="only http:// proxies are supported"):
        proxy.route({"https": "socks5://s:1080"}, "https", "x", 443)
