"""The console's boundary in a real browser: cross-origin and non-JSON writes are refused,
the PKCE helper computes RFC 7636's challenge, the Cognito hosted-UI sign-in completes with
authorization code + PKCE. (Page-load times are measured in tests/bench/test_bench_console.py.)"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import Route, expect

from tests.support.console import TOKEN_KEY, Console
from tests.support.live import Server

ATTACKER = "http://attacker.invalid"
COGNITO = "https://forkhorse-test.auth.eu-west-1.amazoncognito.com"


def _project_names(server: Server) -> list[str]:
    return [project["name"] for project in server.owner.ok("GET", "/projects")["projects"]]


def test_a_cross_origin_form_post_is_refused_and_changes_nothing(
    console: Console, server: Server
) -> None:
    # A text/plain form can smuggle a JSON-looking body; the Origin check refuses it first.
    attack = (
        f'<form id="f" method="POST" action="{server.url}/projects" enctype="text/plain">'
        '<input name=\'{"name":"csrf","x":"\' value=\'"}\'></form>'
        "<script>document.getElementById('f').submit()</script>"
    )
    console.page.route(
        f"{ATTACKER}/**",
        lambda route: route.fulfill(status=200, content_type="text/html", body=attack),
    )
    before = _project_names(server)
    with console.page.expect_navigation(url=f"{server.url}/projects"):
        console.page.goto(f"{ATTACKER}/page")
    expect(console.page.locator("body")).to_contain_text("Cross-origin requests are refused.")
    assert _project_names(server) == before


def test_a_non_json_post_is_refused_even_with_the_owner_token(
    console: Console, server: Server
) -> None:
    console.sign_in()
    before = _project_names(server)
    answer = console.page.evaluate(
        """async (key) => {
          const response = await fetch('/projects', {
            method: 'POST',
            headers: {
              'Content-Type': 'text/plain',
              Authorization: 'Bearer ' + sessionStorage.getItem(key),
            },
            body: JSON.stringify({name: 'plain'}),
          });
          return {status: response.status, body: await response.json()};
        }""",
        TOKEN_KEY,
    )
    assert answer == {"status": 415, "body": {"error": "Content-Type must be application/json."}}
    # A same-origin HTML form cannot send JSON either.
    with console.page.expect_navigation(url=f"{server.url}/projects"):
        console.page.evaluate(
            """() => {
              const form = document.createElement('form');
              form.method = 'POST';
              form.action = '/projects';
              const field = document.createElement('input');
              field.name = 'name';
              field.value = 'form';
              form.append(field);
              document.body.append(form);
              form.submit();
            }"""
        )
    # The console's no-referrer policy makes Chromium send `Origin: null` with a form
    # navigation, so the origin check refuses it even before the content-type check would.
    expect(console.page.locator("body")).to_contain_text(
        re.compile(r"Cross-origin requests are refused\.|Content-Type must be application/json\.")
    )
    assert _project_names(server) == before


def test_the_pkce_helper_computes_rfc_7636_challenges_in_the_browser(console: Console) -> None:
    console.open()
    result = console.page.evaluate(
        """async () => {
          const pkce = await import('/console/pkce.js');
          const verifiers = [pkce.randomVerifier(), pkce.randomVerifier()];
          return {
            vector: await pkce.challengeFor('dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk'),
            verifiers,
            challenges: await Promise.all(verifiers.map(pkce.challengeFor)),
          };
        }"""
    )
    assert result["vector"] == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    first, second = result["verifiers"]
    assert first != second
    for verifier, challenge in zip(result["verifiers"], result["challenges"], strict=True):
        assert 43 <= len(verifier) <= 128
        assert set(verifier) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
        )
        assert challenge == _s256(verifier)


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def test_owners_sign_in_through_the_cognito_hosted_ui_with_code_and_pkce(
    console: Console, server: Server
) -> None:
    """The hosted UI and the token endpoint are stood in for at the network layer; the
    console, its config route and the API are real. The stand-in issues the owner token."""
    page = console.page
    seen: dict[str, Any] = {}
    config = {
        "auth": "cognito",
        "cognito": {"domain": COGNITO, "clientId": "client123", "scopes": ["openid", "email"]},
    }
    page.route(f"{server.url}/console/config.json", lambda route: route.fulfill(json=config))

    def hosted_ui(route: Route) -> None:
        query = parse_qs(urlparse(route.request.url).query)
        seen["authorize"] = {key: values[0] for key, values in query.items()}
        back = f"{server.url}/?code=the-code&state={seen['authorize']['state']}"
        route.fulfill(status=302, headers={"Location": back})

    def token_endpoint(route: Route) -> None:
        seen["token"] = {k: v[0] for k, v in parse_qs(route.request.post_data or "").items()}
        route.fulfill(
            json={"access_token": server.owner_token, "id_token": "x", "token_type": "Bearer"},
            headers={"Access-Control-Allow-Origin": server.url},
        )

    page.route(f"{COGNITO}/oauth2/authorize**", hosted_ui)
    page.route(f"{COGNITO}/oauth2/token", token_endpoint)
    console.open()
    with page.expect_navigation(url=f"{server.url}/?code=the-code**"):
        page.get_by_role("button", name="Sign in with the hosted UI").click()
    expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible()
    authorize = seen["authorize"]
    assert {key: authorize[key] for key in ("response_type", "client_id", "redirect_uri")} == {
        "response_type": "code",
        "client_id": "client123",
        "redirect_uri": f"{server.url}/",
    }
    assert authorize["code_challenge_method"] == "S256"
    assert authorize["scope"] == "openid email"
    token = seen["token"]
    assert (token["grant_type"], token["code"], token["client_id"]) == (
        "authorization_code",
        "the-code",
        "client123",
    )
    assert _s256(token["code_verifier"]) == authorize["code_challenge"]
    # The code left the address bar; the token is in sessionStorage, and no cookie was set.
    assert "code=" not in page.url
    assert page.evaluate(f"sessionStorage.getItem('{TOKEN_KEY}')") == server.owner_token
    assert console.context.cookies() == []
