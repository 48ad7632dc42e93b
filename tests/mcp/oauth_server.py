"""An OAuth-protected MCP server and its authorization server, in one process, for the tests of
per-user consent (MCP authorization: OAuth 2.1 authorization code + PKCE S256, RFC 9728
protected-resource metadata, RFC 8414 authorization-server metadata, RFC 7591 dynamic client
registration, refresh-token rotation, RFC 7009 revocation).

Built from the official MCP Python SDK (mcp 2.x), as its "simple-auth" example is:
- the authorization server is the SDK's `create_auth_routes` (metadata, /authorize, /token,
  /register, /revoke handlers, client authentication, PKCE S256 check, redirect_uri check) over
  the in-memory `FixtureProvider` below (an `OAuthAuthorizationServerProvider`);
- the MCP server is the SDK's `MCPServer` (streamable HTTP, both protocol eras) as a resource
  server with `token_verifier=` and `AuthSettings(resource_server_url=...)`, so the SDK itself
  answers 401 + `WWW-Authenticate: Bearer ... resource_metadata="..."` and serves
  /.well-known/oauth-protected-resource/mcp.
Tokens and codes are opaque random strings (`secrets`); nothing here signs or hashes by hand.

The authorize step needs no browser: it logs in the user named by `login_hint=<user>` (or
`user=<user>`) and redirects (302) at once to the client's redirect_uri with `code` and `state`.

    python3 tests/mcp/oauth_server.py [--access-ttl S] [--refresh-ttl S] [--code-ttl S]
        [--no-dcr] [--client-id X --client-secret Y [--client-auth-method M] [--redirect-uri U]...]
        [--refuse-user NAME]... [--admin-user NAME]... [--default-user NAME]
        [--scopes "mcp ..."] [--required-scopes "mcp"] [--strict-refresh-reuse]
        [--same-origin] [--stateless] [--json-response] [--tools-ttl-ms MS]
        [--token-auth-methods "client_secret_basic ..."] [--iss-parameter]
        [--mcp-port P] [--issuer-port P] [--admin-port P]

Prints one line `READY {"mcp": ..., "issuer": ..., "admin": ...}` on stdout once it listens, then
serves until SIGTERM/SIGINT (exits 0). Logs go to stderr, warnings and above only.

Admin (plain JSON on its own loopback port, `<admin>` is the URL printed, ending in /admin):
  GET  <admin>/stats            counters (see `Stats.snapshot`)
  POST <admin>/stats/reset      zero the counters
  POST <admin>/revoke           {"user": "ada"[, "client_id": "..."]}: revoke all of the user's tokens
  POST <admin>/expire           {"user": "ada"}: expire the user's access tokens now (refresh still works)
  POST <admin>/clients          {"client_id", "client_secret"?, "redirect_uris": [...],
                                 "token_endpoint_auth_method"?, "scope"?, "grant_types"?}: register
                                 or replace a client (works with --no-dcr too)
  POST <admin>/refuse           {"user": "bob", "refuse": true|false}: make /authorize deny that user
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import logging
import re
import secrets
import signal
import socket
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, TypedDict
from urllib.parse import parse_qsl, urlencode

import uvicorn
from pydantic import AnyHttpUrl, AnyUrl, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

log = logging.getLogger("oauth_fixture")

USER_RE = re.compile(r"^[A-Za-z0-9._@+-]{1,64}$")
S256_CHALLENGE_RE = re.compile(r"^[A-Za-z0-9_-]{43}$")  # BASE64URL(SHA256(verifier)) without padding
MAX_BODY = 1 << 20

# The raw parameters of the /authorize request being handled, and the raw redirect_uris of the
# /register request being handled: the SDK handlers pass the provider only validated (normalized)
# values, these are set by the wrappers around its routes.
authorize_request: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("authorize_request", default=None)
register_request: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("register_request", default=None)


def now() -> float:
    return time.time()


def exact_url(url: str) -> AnyHttpUrl:
    """An AnyHttpUrl that keeps a path-less URL without a trailing slash (RFC 8414 issuer
    comparison is exact), as the SDK's AuthSettings validates its URLs."""
    return AuthSettings(issuer_url=url, resource_server_url=None).issuer_url


def same_resource(a: str, b: str) -> bool:
    """Compare two resource URLs as the SDK's bearer middleware does (URL-normalized, trailing slash aside)."""
    try:
        return str(AnyHttpUrl(a)).removesuffix("/") == str(AnyHttpUrl(b)).removesuffix("/")
    except ValidationError:
        return False


# --------------------------------------------------------------------------------------------
# Counters


@dataclass
class Stats:
    registrations: int = 0
    authorizations: int = 0  # codes issued (302 with code)
    authorizations_refused: int = 0  # 302 with error=access_denied
    authorize_errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    token_exchanges: int = 0  # authorization_code grants that issued tokens
    refreshes: int = 0  # refresh_token grants that issued tokens
    token_errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    code_replays: int = 0
    refresh_replays: int = 0
    revocations: int = 0  # grants revoked through the RFC 7009 endpoint
    admin_revocations: int = 0
    mcp_requests: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    mcp_methods: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    mcp_unauthorized: int = 0
    mcp_unauthorized_no_token: int = 0
    mcp_unauthorized_bad_token: int = 0
    mcp_forbidden: int = 0

    def reset(self) -> None:
        fresh = Stats()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))


# --------------------------------------------------------------------------------------------
# Authorization server state


class FixtureAccessToken(AccessToken):
    grant_id: str
    expires_at_precise: float


class FixtureRefreshToken(RefreshToken):
    grant_id: str
    expires_at_precise: float | None = None


class FixtureCode(AuthorizationCode):
    pass


@dataclass
class Grant:
    id: str
    client_id: str
    subject: str
    scopes: list[str]
    resource: str


class FixtureProvider:
    """In-memory OAuthAuthorizationServerProvider for the SDK's auth routes."""

    def __init__(self, opts: argparse.Namespace, stats: Stats, issuer: str, resource: str):
        self.opts = opts
        self.stats = stats
        self.issuer = issuer
        self.resource = resource
        self.valid_scopes: list[str] = opts.scopes.split()
        self.refused: set[str] = set(opts.refuse_user)
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.raw_redirects: dict[str, list[str]] = {}
        self.codes: dict[str, FixtureCode] = {}
        self.used_codes: dict[str, str] = {}  # code -> grant id
        self.grants: dict[str, Grant] = {}
        self.access: dict[str, FixtureAccessToken] = {}
        self.refresh: dict[str, FixtureRefreshToken] = {}
        self.rotated: dict[str, str] = {}  # refresh token rotated away -> grant id

    # -- clients -------------------------------------------------------------------------------

    def add_client(self, info: OAuthClientInformationFull, raw_redirects: list[str] | None) -> None:
        self.clients[info.client_id] = info
        self.raw_redirects[info.client_id] = list(
            raw_redirects if raw_redirects is not None else [str(u) for u in info.redirect_uris or []]
        )

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        raw = register_request.get() or {}
        uris = raw.get("redirect_uris")
        raw_uris = [u for u in uris if isinstance(u, str)] if isinstance(uris, list) else None
        self.add_client(client_info, raw_uris)
        self.stats.registrations += 1

    # -- authorize -----------------------------------------------------------------------------

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        raw = authorize_request.get() or {}
        if raw.get("code_challenge_method") != "S256":
            raise AuthorizeError("invalid_request", "code_challenge_method=S256 is required")
        if not S256_CHALLENGE_RE.match(params.code_challenge):
            raise AuthorizeError("invalid_request", "code_challenge must be BASE64URL(SHA256(code_verifier))")
        if params.resource is not None and not same_resource(params.resource, self.resource):
            raise AuthorizeError("invalid_target", f"unknown resource {params.resource!r}; this server is {self.resource}")
        user = raw.get("login_hint") or raw.get("user") or self.opts.default_user
        if not user:
            raise AuthorizeError("invalid_request", "no user: pass login_hint=<user> (or user=<user>)")
        if not USER_RE.match(user):
            raise AuthorizeError("invalid_request", "bad user name")
        if user in self.refused:
            raise AuthorizeError("access_denied", f"user {user} refused the authorization")

        scopes = params.scopes if params.scopes is not None else (client.scope or " ".join(self.valid_scopes)).split()
        code = secrets.token_urlsafe(32)
        self.codes[code] = FixtureCode(
            code=code,
            scopes=scopes,
            expires_at=now() + self.opts.code_ttl,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=self.resource,
            subject=user,
        )
        # Redirect to the redirect_uri exactly as registered and sent (it was checked verbatim).
        target = raw.get("redirect_uri") or self.raw_redirects.get(client.client_id, [str(params.redirect_uri)])[0]
        return construct_redirect_uri(target, code=code, state=params.state)

    # -- codes and tokens ----------------------------------------------------------------------

    async def load_authorization_code(self, client: OAuthClientInformationFull, authorization_code: str) -> FixtureCode | None:
        if authorization_code in self.used_codes:
            # RFC 6749 §4.1.2 / OAuth 2.1 §4.1.3: a code used twice revokes what it issued.
            self.stats.code_replays += 1
            self.revoke_grant(self.used_codes[authorization_code])
            return None
        return self.codes.get(authorization_code)

    def issue(self, grant: Grant, client: OAuthClientInformationFull, scopes: list[str]) -> OAuthToken:
        t = now()
        access = secrets.token_urlsafe(32)
        self.access[access] = FixtureAccessToken(
            token=access,
            client_id=grant.client_id,
            scopes=scopes,
            expires_at=int(t + self.opts.access_ttl) + 1,
            expires_at_precise=t + self.opts.access_ttl,
            resource=grant.resource,
            subject=grant.subject,
            claims={"iss": self.issuer},
            grant_id=grant.id,
        )
        refresh = None
        if "refresh_token" in client.grant_types:
            refresh = secrets.token_urlsafe(32)
            ttl = self.opts.refresh_ttl
            self.refresh[refresh] = FixtureRefreshToken(
                token=refresh,
                client_id=grant.client_id,
                scopes=grant.scopes,
                expires_at=int(t + ttl) + 1 if ttl > 0 else None,
                expires_at_precise=t + ttl if ttl > 0 else None,
                resource=grant.resource,
                subject=grant.subject,
                grant_id=grant.id,
            )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=int(self.opts.access_ttl),
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, authorization_code: FixtureCode) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code does not exist")
        grant = Grant(
            id=secrets.token_hex(8),
            client_id=client.client_id,
            subject=authorization_code.subject or "",
            scopes=list(authorization_code.scopes),
            resource=authorization_code.resource or self.resource,
        )
        self.grants[grant.id] = grant
        self.used_codes[authorization_code.code] = grant.id
        self.stats.token_exchanges += 1
        return self.issue(grant, client, grant.scopes)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> FixtureRefreshToken | None:
        if refresh_token in self.rotated:
            self.stats.refresh_replays += 1
            if self.opts.strict_refresh_reuse:
                self.revoke_grant(self.rotated[refresh_token])
            return None
        rt = self.refresh.get(refresh_token)
        if rt is None:
            return None
        if rt.expires_at_precise is not None and rt.expires_at_precise <= now():
            return None
        return rt

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: FixtureRefreshToken, scopes: list[str]) -> OAuthToken:
        grant = self.grants.get(refresh_token.grant_id)
        if grant is None or self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token does not exist")
        self.rotated[refresh_token.token] = grant.id
        self.stats.refreshes += 1
        return self.issue(grant, client, scopes)

    async def load_access_token(self, token: str) -> FixtureAccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        grant_id = getattr(token, "grant_id", None)
        if grant_id and self.revoke_grant(grant_id):
            self.stats.revocations += 1

    # -- revocation ----------------------------------------------------------------------------

    def revoke_grant(self, grant_id: str) -> tuple[int, int]:
        """Drop a grant with every access and refresh token it issued; returns the counts dropped."""
        self.grants.pop(grant_id, None)
        dead_access = [k for k, v in self.access.items() if v.grant_id == grant_id]
        dead_refresh = [k for k, v in self.refresh.items() if v.grant_id == grant_id]
        for k in dead_access:
            del self.access[k]
        for k in dead_refresh:
            del self.refresh[k]
        return len(dead_access), len(dead_refresh)

    def revoke_user(self, user: str, client_id: str | None) -> dict[str, int]:
        grants = [g.id for g in self.grants.values() if g.subject == user and (client_id is None or g.client_id == client_id)]
        access = refresh = 0
        for gid in grants:
            a, r = self.revoke_grant(gid)
            access += a
            refresh += r
        # Codes not yet exchanged die too.
        for code in [c for c, v in self.codes.items() if v.subject == user and (client_id is None or v.client_id == client_id)]:
            del self.codes[code]
        return {"grants": len(grants), "access_tokens": access, "refresh_tokens": refresh}

    def expire_user(self, user: str) -> int:
        t = now()
        n = 0
        for tok in self.access.values():
            if tok.subject == user and tok.expires_at_precise > t:
                tok.expires_at_precise = t
                tok.expires_at = int(t)
                n += 1
        return n

    def active_tokens(self) -> dict[str, dict[str, int]]:
        t = now()
        out: dict[str, dict[str, int]] = defaultdict(lambda: {"access_tokens": 0, "refresh_tokens": 0})
        for tok in self.access.values():
            if tok.expires_at_precise > t:
                out[tok.subject or ""]["access_tokens"] += 1
        for rt in self.refresh.values():
            if rt.expires_at_precise is None or rt.expires_at_precise > t:
                out[rt.subject or ""]["refresh_tokens"] += 1
        return dict(out)


class FixtureTokenVerifier:
    """The MCP server's TokenVerifier: looks the opaque token up in the authorization server's
    store (same process), refusing unknown, revoked and expired tokens."""

    def __init__(self, provider: FixtureProvider):
        self.provider = provider

    async def verify_token(self, token: str) -> AccessToken | None:
        tok = self.provider.access.get(token)
        if tok is None or tok.expires_at_precise <= now():
            return None
        return AccessToken(
            token=tok.token,
            client_id=tok.client_id,
            scopes=list(tok.scopes),
            expires_at=tok.expires_at,
            resource=tok.resource,
            subject=tok.subject,
            claims=dict(tok.claims or {}),
        )


# --------------------------------------------------------------------------------------------
# ASGI helpers


async def read_body(receive) -> bytes | None:
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if len(body) > MAX_BODY:
            return b"\x00" * (MAX_BODY + 1)
        if not message.get("more_body", False):
            return body


def replaying(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def send_json(send, status: int, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), (b"cache-control", b"no-store")],
        }
    )
    await send({"type": "http.response.body", "body": data})


class AuthorizeWrapper:
    """Around the SDK's /authorize handler: checks the redirect_uri verbatim against the
    registered strings (no redirect on mismatch, RFC 6749 §4.1.2.1), hands the raw parameters
    (login_hint/user, code_challenge_method) to the provider, and counts outcomes."""

    def __init__(self, app, provider: FixtureProvider, stats: Stats):
        self.app, self.provider, self.stats = app, provider, stats

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("GET", "POST"):
            return await self.app(scope, receive, send)
        body = await read_body(receive)
        if body is None:
            return
        if len(body) > MAX_BODY:
            return await send_json(send, 413, {"error": "invalid_request", "error_description": "request too large"})
        params = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if scope["method"] == "POST" and headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            params = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        client_id = params.get("client_id")
        redirect_uri = params.get("redirect_uri")
        if client_id and redirect_uri is not None and client_id in self.provider.clients:
            if redirect_uri not in self.provider.raw_redirects.get(client_id, []):
                self.stats.authorize_errors["invalid_request"] += 1
                return await send_json(
                    send,
                    400,
                    {"error": "invalid_request", "error_description": f"redirect_uri {redirect_uri!r} is not registered for this client (exact match required)"},
                )
        status: list[int] = []
        location: list[str] = []

        async def observe(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
                headers = []
                for k, v in message.get("headers", []):
                    if k.lower() == b"location":
                        location.append(v.decode("latin-1"))
                        v = add_iss(location[-1], self.provider).encode("latin-1")
                    headers.append((k, v))
                message = {**message, "headers": headers}
            await send(message)

        token = authorize_request.set(params)
        try:
            await self.app(scope, replaying(body, receive), observe)
        finally:
            authorize_request.reset(token)
        if status and status[0] == 302 and location:
            query = dict(parse_qsl(location[0].split("?", 1)[1] if "?" in location[0] else ""))
            if "code" in query:
                self.stats.authorizations += 1
            elif query.get("error") == "access_denied":
                self.stats.authorizations_refused += 1
            elif "error" in query:
                self.stats.authorize_errors[query["error"]] += 1
        elif status and status[0] >= 400:
            self.stats.authorize_errors["invalid_request"] += 1


def add_iss(location: str, provider: FixtureProvider) -> str:
    """With --iss-parameter, RFC 9207's `iss` on every authorization response (codes and errors)."""
    if not provider.opts.iss_parameter or "iss=" in location:
        return location
    sep = "&" if "?" in location else "?"
    return f"{location}{sep}{urlencode({'iss': provider.issuer})}"


class MetadataPatch:
    """Around the SDK's authorization-server metadata: sets the fields --token-auth-methods and
    --iss-parameter ask for (the SDK's metadata lists client_secret_post and client_secret_basic)."""

    def __init__(self, app, opts: argparse.Namespace):
        self.app, self.opts = app, opts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def capture(message):
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, capture)
        body = b"".join(chunks)
        if start.get("status") == 200:
            meta = json.loads(body)
            if self.opts.token_auth_methods is not None:
                meta["token_endpoint_auth_methods_supported"] = self.opts.token_auth_methods.split()
            if self.opts.iss_parameter:
                meta["authorization_response_iss_parameter_supported"] = True
            body = json.dumps(meta).encode()
        headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class RegisterWrapper:
    """Around the SDK's /register handler: keeps the raw redirect_uris of the request."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        body = await read_body(receive)
        if body is None:
            return
        if len(body) > MAX_BODY:
            return await send_json(send, 413, {"error": "invalid_client_metadata", "error_description": "request too large"})
        try:
            raw = json.loads(body)
        except ValueError:
            raw = None
        token = register_request.set(raw if isinstance(raw, dict) else None)
        try:
            await self.app(scope, replaying(body, receive), send)
        finally:
            register_request.reset(token)


class TokenErrorCounter:
    """Around /token and /revoke: counts error responses by their OAuth error code."""

    def __init__(self, app, stats: Stats):
        self.app, self.stats = app, stats

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        state: dict[str, Any] = {"status": 0, "body": b""}

        async def observe(message):
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
            elif message["type"] == "http.response.body" and state["status"] >= 400 and len(state["body"]) < 65536:
                state["body"] += message.get("body", b"")
            await send(message)

        await self.app(scope, receive, observe)
        if state["status"] >= 400:
            try:
                err = json.loads(state["body"]).get("error", "unknown")
            except (ValueError, AttributeError):
                err = "unknown"
            self.stats.token_errors[str(err)] += 1


class McpCounter:
    """Around the MCP server's Starlette app: per-user request counts and 401/403 counts."""

    def __init__(self, app, path: str, stats: Stats):
        self.app, self.path, self.stats = app, path, stats

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path:
            return await self.app(scope, receive, send)
        has_token = any(k.lower() == b"authorization" and v[:7].lower() == b"bearer " for k, v in scope.get("headers", []))
        counted = False

        async def observe(message):
            nonlocal counted
            if message["type"] == "http.response.start" and not counted:
                counted = True
                status = message["status"]
                if status == 401:
                    self.stats.mcp_unauthorized += 1
                    if has_token:
                        self.stats.mcp_unauthorized_bad_token += 1
                    else:
                        self.stats.mcp_unauthorized_no_token += 1
                else:
                    if status == 403:
                        self.stats.mcp_forbidden += 1
                    user = scope.get("user")
                    if isinstance(user, AuthenticatedUser):
                        self.stats.mcp_requests[user.access_token.subject or ""] += 1
            await send(message)

        await self.app(scope, receive, observe)


class PortDispatch:
    """One uvicorn server on several sockets: picks the app by the local port; lifespan goes to
    the MCP app (its session manager)."""

    def __init__(self, apps: dict[int, Any], lifespan_app):
        self.apps, self.lifespan_app = apps, lifespan_app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.lifespan_app(scope, receive, send)
        server = scope.get("server") or (None, None)
        app = self.apps.get(server[1])
        if app is None:
            if scope["type"] == "http":
                return await send_json(send, 404, {"error": "not_found"})
            return
        return await app(scope, receive, send)


async def json_http_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        code = {400: "invalid_request", 401: "invalid_client", 404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "error")
        return JSONResponse({"error": code, "error_description": exc.detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))
    log.warning("unexpected error on %s: %r", request.url.path, exc)
    return JSONResponse({"error": "server_error", "error_description": "unexpected error"}, status_code=500)


JSON_ERRORS = {HTTPException: json_http_error, Exception: json_http_error}


# --------------------------------------------------------------------------------------------
# The MCP server


class WhoAmI(TypedDict):
    user: str
    scopes: list[str]
    client_id: str


def build_mcp(opts: argparse.Namespace, provider: FixtureProvider, stats: Stats, issuer: str, resource: str) -> MCPServer:
    admins = set(opts.admin_user or ["ada"])

    def current_user() -> tuple[str, AccessToken]:
        token = get_access_token()
        if token is None or not token.subject:
            raise ToolError("no authenticated user")
        return token.subject, token

    def visible(tool: str, user: str | None) -> bool:
        return tool != "admin_report" or (user is not None and user in admins)

    async def per_user(ctx, call_next):
        token = get_access_token()
        user = token.subject if token is not None else None
        if user is not None:
            stats.mcp_methods[user][ctx.method] += 1
        result = await call_next(ctx)
        if ctx.method == "tools/list" and result is not None:
            if isinstance(result, dict) and isinstance(result.get("tools"), list):
                result["tools"] = [t for t in result["tools"] if visible(t.get("name"), user)]
            elif hasattr(result, "tools"):
                result.tools = [t for t in result.tools if visible(t.name, user)]
        return result

    server = MCPServer(
        "oauth-fixture",
        instructions="OAuth-protected test MCP server: whoami, calendar (and admin_report for admins).",
        token_verifier=FixtureTokenVerifier(provider),
        auth=AuthSettings(
            issuer_url=exact_url(issuer),
            resource_server_url=exact_url(resource),
            required_scopes=opts.required_scopes.split() or None,
            validate_token_resource=True,
        ),
        log_level="WARNING",
        middleware=[per_user],
        cache_hints={"tools/list": CacheHint(ttl_ms=opts.tools_ttl_ms, scope="private")},
    )

    @server.tool(description="The user this token was issued to (who logged in at the authorize step) and its scopes.")
    def whoami() -> WhoAmI:
        user, token = current_user()
        return WhoAmI(user=user, scopes=list(token.scopes), client_id=token.client_id)

    @server.tool(description="The user's meetings on a day.")
    def calendar(day: str) -> str:
        user, _ = current_user()
        return f"{user}: 3 meetings on {day}"

    @server.tool(description="An admin report (listed only for admin users).")
    def admin_report() -> str:
        user, _ = current_user()
        if not visible("admin_report", user):
            raise ToolError("Unknown tool: admin_report")
        return f"admin report for {user}: all systems nominal"

    return server


# --------------------------------------------------------------------------------------------
# Admin


def build_admin(provider: FixtureProvider, stats: Stats) -> Starlette:
    async def body_json(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if not raw:
            return {}
        try:
            data = json.loads(raw)
        except ValueError:
            raise HTTPException(400, "body is not JSON")
        if not isinstance(data, dict):
            raise HTTPException(400, "body must be a JSON object")
        return data

    def user_of(data: dict[str, Any]) -> str:
        user = data.get("user")
        if not isinstance(user, str) or not user:
            raise HTTPException(400, "\"user\" is required")
        return user

    async def get_stats(request: Request) -> Response:
        snap = json.loads(json.dumps({k: getattr(stats, k) for k in stats.__dataclass_fields__}))
        snap["clients"] = len(provider.clients)
        snap["active_tokens"] = provider.active_tokens()
        snap["refused_users"] = sorted(provider.refused)
        return JSONResponse(snap)

    async def reset_stats(request: Request) -> Response:
        stats.reset()
        return JSONResponse({"ok": True})

    async def revoke(request: Request) -> Response:
        data = await body_json(request)
        user = user_of(data)
        client_id = data.get("client_id") if isinstance(data.get("client_id"), str) else None
        out = provider.revoke_user(user, client_id)
        stats.admin_revocations += 1
        return JSONResponse({"user": user, **out})

    async def expire(request: Request) -> Response:
        data = await body_json(request)
        user = user_of(data)
        return JSONResponse({"user": user, "expired_access_tokens": provider.expire_user(user)})

    async def clients(request: Request) -> Response:
        data = await body_json(request)
        client_id = data.get("client_id")
        uris = data.get("redirect_uris")
        if not isinstance(client_id, str) or not client_id:
            raise HTTPException(400, "\"client_id\" is required")
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise HTTPException(400, "\"redirect_uris\" must be a list of strings")
        secret = data.get("client_secret")
        method = data.get("token_endpoint_auth_method") or ("client_secret_post" if secret else "none")
        try:
            info = OAuthClientInformationFull(
                client_id=client_id,
                client_secret=secret,
                client_id_issued_at=int(now()),
                client_secret_expires_at=0 if secret else None,
                redirect_uris=[AnyUrl(u) for u in uris] or None,
                token_endpoint_auth_method=method,
                grant_types=data.get("grant_types") or ["authorization_code", "refresh_token"],
                response_types=["code"],
                scope=data.get("scope") or " ".join(provider.valid_scopes),
            )
        except (ValidationError, ValueError) as e:
            raise HTTPException(400, f"bad client: {e}")
        provider.add_client(info, uris)
        return JSONResponse(info.model_dump(mode="json", exclude_none=True), status_code=201)

    async def refuse(request: Request) -> Response:
        data = await body_json(request)
        user = user_of(data)
        if data.get("refuse", True):
            provider.refused.add(user)
        else:
            provider.refused.discard(user)
        return JSONResponse({"refused_users": sorted(provider.refused)})

    return Starlette(
        routes=[
            Route("/admin/stats", get_stats, methods=["GET"]),
            Route("/admin/stats/reset", reset_stats, methods=["POST"]),
            Route("/admin/revoke", revoke, methods=["POST"]),
            Route("/admin/expire", expire, methods=["POST"]),
            Route("/admin/clients", clients, methods=["POST"]),
            Route("/admin/refuse", refuse, methods=["POST"]),
        ],
        exception_handlers=JSON_ERRORS,
    )


# --------------------------------------------------------------------------------------------
# Wiring


def auth_routes(opts: argparse.Namespace, provider: FixtureProvider, stats: Stats, issuer: str) -> list[Route]:
    routes = create_auth_routes(
        provider=provider,
        issuer_url=exact_url(issuer),
        client_registration_options=ClientRegistrationOptions(
            enabled=not opts.no_dcr,
            valid_scopes=provider.valid_scopes,
            default_scopes=provider.valid_scopes,
        ),
        revocation_options=RevocationOptions(enabled=True),
    )
    for route in routes:
        if route.path == "/authorize":
            route.app = AuthorizeWrapper(route.app, provider, stats)
        elif route.path == "/register":
            route.app = RegisterWrapper(route.app)
        elif route.path in ("/token", "/revoke"):
            route.app = TokenErrorCounter(route.app, stats)
        elif route.path == "/.well-known/oauth-authorization-server":
            route.app = MetadataPatch(route.app, opts)
    return routes


def listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--access-ttl", type=float, default=3600, help="access token lifetime, seconds (default 3600)")
    p.add_argument("--refresh-ttl", type=float, default=0, help="refresh token lifetime, seconds; 0 = no expiry (default)")
    p.add_argument("--code-ttl", type=float, default=60, help="authorization code lifetime, seconds (default 60)")
    p.add_argument("--no-dcr", action="store_true", help="disable dynamic client registration (/register)")
    p.add_argument("--client-id", help="pre-register a client with this id")
    p.add_argument("--client-secret", help="its secret (confidential client); without it the client is public")
    p.add_argument("--client-auth-method", default=None, choices=["client_secret_post", "client_secret_basic", "none"],
                   help="its token endpoint auth method (default client_secret_post with a secret, none without)")
    p.add_argument("--redirect-uri", action="append", default=[], help="a redirect_uri of the pre-registered client (repeatable)")
    p.add_argument("--refuse-user", action="append", default=[], help="/authorize answers error=access_denied for this user (repeatable)")
    p.add_argument("--admin-user", action="append", default=[], help="users who also see admin_report (repeatable; default ada)")
    p.add_argument("--default-user", default=None, help="user logged in when /authorize has no login_hint/user (default: none, an error)")
    p.add_argument("--scopes", default="mcp", help="space-separated scopes the server knows and grants by default (default \"mcp\")")
    p.add_argument("--required-scopes", default="mcp", help="scopes the MCP server requires; \"\" for none (default \"mcp\")")
    p.add_argument("--strict-refresh-reuse", action="store_true", help="presenting a rotated refresh token revokes its whole grant")
    p.add_argument("--same-origin", action="store_true", help="serve the authorization server on the MCP server's origin")
    p.add_argument("--stateless", action="store_true", help="MCP streamable HTTP without sessions")
    p.add_argument("--json-response", action="store_true", help="MCP answers in JSON rather than SSE")
    p.add_argument("--tools-ttl-ms", type=int, default=0, help="ttlMs cache hint (private scope) on tools/list (default 0)")
    p.add_argument("--token-auth-methods", default=None,
                   help="space-separated token_endpoint_auth_methods_supported of the metadata (default the SDK's: "
                   "\"client_secret_post client_secret_basic\"); \"\" for an empty list")
    p.add_argument("--iss-parameter", action="store_true",
                   help="RFC 9207: advertise authorization_response_iss_parameter_supported and send iss on authorization responses")
    p.add_argument("--mcp-port", type=int, default=0)
    p.add_argument("--issuer-port", type=int, default=0)
    p.add_argument("--admin-port", type=int, default=0)
    opts = p.parse_args(argv)
    if opts.client_secret and not opts.client_id:
        p.error("--client-secret needs --client-id")
    if opts.client_auth_method == "none" and opts.client_secret:
        p.error("--client-auth-method none takes no --client-secret")
    if opts.client_auth_method in ("client_secret_post", "client_secret_basic") and not opts.client_secret:
        p.error(f"--client-auth-method {opts.client_auth_method} needs --client-secret")
    valid = set(opts.scopes.split())
    if not valid:
        p.error("--scopes needs at least one scope")
    if not set(opts.required_scopes.split()) <= valid:
        p.error("--required-scopes must be among --scopes")
    for user in opts.refuse_user + opts.admin_user + ([opts.default_user] if opts.default_user else []):
        if not USER_RE.match(user):
            p.error(f"bad user name {user!r}")
    return opts


async def serve(opts: argparse.Namespace) -> int:
    stats = Stats()
    mcp_sock = listen(opts.mcp_port)
    mcp_origin = f"http://127.0.0.1:{mcp_sock.getsockname()[1]}"
    as_sock = None if opts.same_origin else listen(opts.issuer_port)
    issuer = mcp_origin if as_sock is None else f"http://127.0.0.1:{as_sock.getsockname()[1]}"
    admin_sock = listen(opts.admin_port)
    admin_url = f"http://127.0.0.1:{admin_sock.getsockname()[1]}/admin"
    resource = f"{mcp_origin}/mcp"

    provider = FixtureProvider(opts, stats, issuer, resource)
    if opts.client_id:
        method = opts.client_auth_method or ("client_secret_post" if opts.client_secret else "none")
        provider.add_client(
            OAuthClientInformationFull(
                client_id=opts.client_id,
                client_secret=opts.client_secret,
                client_id_issued_at=int(now()),
                client_secret_expires_at=0 if opts.client_secret else None,
                redirect_uris=[AnyUrl(u) for u in opts.redirect_uri] or None,
                token_endpoint_auth_method=method,
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                scope=" ".join(provider.valid_scopes),
            ),
            opts.redirect_uri,
        )

    mcp_server = build_mcp(opts, provider, stats, issuer, resource)
    mcp_app = mcp_server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=opts.stateless, json_response=opts.json_response, host="127.0.0.1"
    )
    routes = auth_routes(opts, provider, stats, issuer)
    apps: dict[int, Any] = {}
    if as_sock is None:
        mcp_app.router.routes.extend(routes)
    else:
        apps[as_sock.getsockname()[1]] = Starlette(routes=routes, exception_handlers=JSON_ERRORS)
    apps[mcp_sock.getsockname()[1]] = McpCounter(mcp_app, "/mcp", stats)
    apps[admin_sock.getsockname()[1]] = build_admin(provider, stats)

    config = uvicorn.Config(
        PortDispatch(apps, mcp_app),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
        log_config=None,
    )
    server = uvicorn.Server(config)
    sockets = [s for s in (mcp_sock, as_sock, admin_sock) if s is not None]
    task = asyncio.create_task(server.serve(sockets=sockets))
    while not server.started:
        if task.done():
            return task.result() or 1
        await asyncio.sleep(0.01)
    print("READY " + json.dumps({"mcp": resource, "issuer": issuer, "admin": admin_url}), flush=True)
    await task
    return 0


def main() -> int:
    opts = parse_args(sys.argv[1:])
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    # uvicorn catches SIGTERM/SIGINT while it serves, shuts down gracefully, then re-raises the
    # signal to the handler that was there before: a no-op one, so the process exits 0.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    return asyncio.run(serve(opts))


if __name__ == "__main__":
    sys.exit(main())
