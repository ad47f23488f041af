"""Model spec strings: one parser, one registry (grammar and credential rules: docs/usage.md "Your models").

The provider is everything before the first ``:``; the query string is split off at the first ``?``; the base
URL at the first ``@`` of what remains (model names do not contain ``@``).  Credentials (parameters that carry
one, :func:`vlmcheck.core.secrets.is_secret_param`, and the base URL's userinfo) never become part of the model
id: they are kept in a field that is never serialised and sent with each request only
(:meth:`ModelSpec.request_auth`).  Providers register a factory by import path (:func:`register`; plugins through
the ``vlmcheck.adapters`` entry-point group), so heavy dependencies load only when used.
"""

from __future__ import annotations

import base64
import inspect
import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

from pydantic import BaseModel, Field, PrivateAttr

from .errors import SpecError
from .progress import loading
from .registry import Registry, plugins, resolve
from .secrets import is_secret_param, register_secret

RoleName = Literal["vlm", "text", "generator", "encoder"]


# A provider's parameters are IDENTITY (they change what the model answers) or PLACEMENT (where it is reached, how
# fast, how billed or bounded; may change on resume): docs/usage.md "Identity and placement".
IDENTITY, PLACEMENT = "identity", "placement"
ParamKind = Literal["identity", "placement"]
URL_CREDENTIALS_ENV = "VLMCHECK_URL_CREDENTIALS"


def identity_of(spec_or_id: str) -> str:
    """The identity of a model spec string (or a model id); a string that is not a spec comes back as is."""
    try:
        return ModelSpec.parse(spec_or_id).identity()
    except (SpecError, ValueError):
        return spec_or_id


def public_spec(text: str) -> str:
    """A model spec string as the user wrote it, less its credentials (each registered as a secret, so a later
    echo is masked too): the one text of a spec that any route shows or writes.  The rest keeps the user's order
    and spelling, so a sweep's folder named by it stays the one a resume finds."""
    text = str(text)
    head, sep, query = text.partition("?")
    if sep:
        kept = []
        for part in query.split("&"):
            key = unquote(part.partition("=")[0].replace("+", " "))
            if is_secret_param(key):
                register_secret(unquote(part.partition("=")[2].replace("+", " ")))
            else:
                kept.append(part)
        query = "&".join(kept)
    provider, colon, rest = head.partition(":")
    if colon and "@" in rest:
        name, _, urls = rest.partition("@")
        rest = f"{name}@" + ",".join(_split_userinfo(u)[0] for u in urls.split(","))
    return f"{provider}{colon}{rest}" + (f"?{query}" if query else "")


class ModelSpec(BaseModel):
    provider: str
    name: str
    base_url: str | None = None
    params: dict[str, str] = Field(default_factory=dict)
    _secrets: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "ModelSpec":
        text = text.strip()
        if ":" not in text:
            raise SpecError(f"model spec {public_spec(text)!r} has no provider; expected 'provider:name', e.g. "
                            "'openai:gpt-4o-mini'")
        provider, _, rest = text.partition(":")
        rest, _, query = rest.partition("?")
        name, _, base_url = rest.partition("@")
        provider, name, base_url = provider.strip().lower(), name.strip(), base_url.strip() or None
        if not provider or not name:
            raise SpecError(f"model spec {public_spec(text)!r}: provider and name must both be non-empty")
        params: dict[str, str] = {}
        secrets: dict[str, str] = {}
        if base_url:
            # several endpoints of one model: "@URL1,URL2" or "@file:endpoints.txt" (one URL per line)
            where = f"{provider}:{name}"
            split = [_split_userinfo(_checked_url(url, where)) for url in _endpoint_list(base_url, where)]
            infos = {userinfo for _, userinfo in split}
            if len(infos) > 1:
                raise SpecError(f"model spec {provider}:{name}: the endpoints carry different credentials; give "
                                "them one user:password (or none)")
            base_url = ",".join(url for url, _ in split)
            userinfo = infos.pop()
            if userinfo:
                secrets["userinfo"] = userinfo
                params["login"] = "url"  # recorded, so that a resume asks for them instead of using a key
        given: set[str] = set()
        for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
            if key in given:
                raise SpecError(f"model spec {provider}:{name}: parameter {key} is given twice; give it once")
            given.add(key)
            if is_secret_param(key):
                secrets[key.lower()] = value
                register_secret(value)
            else:
                params[key] = value
        spec = cls(provider=provider, name=name, base_url=base_url, params=params)
        spec._secrets = secrets
        return spec

    def secret(self, key: str) -> str | None:
        return self._secrets.get(key)

    @property
    def endpoints(self) -> list[str]:
        """The base URLs (several for a model served by several endpoints, ``@URL1,URL2``)."""
        return self.base_url.split(",") if self.base_url else []

    def at(self, url: str) -> "ModelSpec":
        """This spec at one of its endpoints (credentials kept)."""
        return self._copy(base_url=url)

    def _copy(self, **update: Any) -> "ModelSpec":
        spec = self.model_copy(update=update)
        spec._secrets = dict(self._secrets)
        return spec

    def request_auth(self) -> dict[str, dict[str, str]]:
        """SDK client arguments that carry the spec's credentials other than the API key, for requests only:
        ``default_query`` for credential query parameters, ``default_headers`` with HTTP Basic auth for URL
        userinfo (replacing a Bearer key, as httpx does for a URL with userinfo)."""
        out: dict[str, dict[str, str]] = {}
        query = {k: v for k, v in self._secrets.items() if k not in ("api_key", "userinfo")}
        if query:
            out["default_query"] = query
        if "userinfo" in self._secrets:
            token = base64.b64encode(self._secrets["userinfo"].encode()).decode()
            register_secret(token)
            out["default_headers"] = {"Authorization": f"Basic {token}"}
        return out

    def with_params(self, **params: Any) -> "ModelSpec":
        return self._copy(params={**self.params, **{k: str(v) for k, v in params.items() if v is not None}})

    def canonical(self) -> str:
        """Stable string without secrets: used as the model id in caches and results."""
        return f"{self.provider}:{self.name}" + (f"@{self.base_url}" if self.base_url else "") + _query(self.params)

    def identity(self) -> str:
        """What the model *is*: provider, name and the parameters that change its outputs (no base URL, no
        :func:`placement_params`, no secret).  Keys the call cache and the resume check, so moving a server or
        changing concurrency keeps a run's cache."""
        placement = placement_params(self.provider)
        return f"{self.provider}:{self.name}" + _query({k: v for k, v in self.params.items() if k not in placement})

    def __str__(self) -> str:
        return self.canonical()

    def get_float(self, key: str, default: float) -> float:
        return _convert(self, key, default, float)

    def get_int(self, key: str, default: int) -> int:
        return _convert(self, key, default, int)

    def get_str(self, key: str, default: str | None = None) -> str | None:
        return self.params.get(key, default)

    def get_bool(self, key: str, default: bool) -> bool:
        if key not in self.params:
            return default
        value = self.params[key].strip().lower()
        if value in ("1", "true", "yes", "on", ""):
            return True
        if value in ("0", "false", "no", "off"):
            return False
        raise SpecError(f"{self.canonical()}: parameter {key}={value!r} is not a boolean")


def _query(params: dict[str, str]) -> str:
    return "?" + "&".join(f"{k}={quote(str(v), safe='/:.,-_')}" for k, v in sorted(params.items())) if params else ""


def _endpoint_list(text: str, where: str) -> list[str]:
    """The URLs of ``@URL1,URL2`` or ``@file:PATH`` (one URL per line; blank lines and # comments skipped)."""
    if text.startswith("file:"):
        path = Path(text[5:]).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise SpecError(f"model spec {where}: cannot read the endpoints file {path} ({exc.__class__.__name__}: "
                            f"{getattr(exc, 'strerror', None) or exc})") from None
        urls = [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]
        if not urls:
            raise SpecError(f"model spec {where}: the endpoints file {path} lists no URL")
        return urls
    urls = [u.strip() for u in text.split(",")]
    if not all(urls):
        shown = ",".join(_split_userinfo(u)[0] for u in urls)  # a password in another endpoint never shown
        raise SpecError(f"model spec {where}: an empty endpoint in {shown!r}")
    return urls


def _checked_url(url: str, where: str) -> str:
    if "://" not in url or url.split("://", 1)[0].lower() not in ("http", "https"):
        raise SpecError(f"model spec {where}: the base URL after '@' must start with http:// or https://")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port that is not a number
    except ValueError as exc:
        raise SpecError(f"model spec {where}: the base URL is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise SpecError(f"model spec {where}: the base URL names no host")
    return url


def _split_userinfo(url: str) -> tuple[str, str | None]:
    """(url without userinfo, "user:password" decoded) - the userinfo and its password are registered as secrets."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    user, password = unquote(user), unquote(password)
    for value in (userinfo, password, f"{user}:{password}"):
        register_secret(value)
    return urlunsplit(parts._replace(netloc=host)), f"{user}:{password}"


#: the smallest value of numeric parameters (``True``: strictly above 0); a value below is an error, not ignored
PARAM_MINIMUM: dict[str, float | bool] = {
    "concurrency": 0, "clients": 1, "timeout": True, "cooldown": 0, "batch_size": 1, "batch_window": 0,
    "batch_poll": True, "steps": 1, "width": 1, "height": 1, "vision_size": 1, "logprobs": 0,
    "prompt_logprobs": 0, "price_in": 0, "price_out": 0, "max_response_mb": True, "max_answer_chars": 1,
}


def _convert(spec: ModelSpec, key: str, default, typ):
    if key not in spec.params:
        return default
    try:
        value = typ(spec.params[key])
    except ValueError as exc:
        raise SpecError(f"{spec.canonical()}: parameter {key}={spec.params[key]!r} is not a {typ.__name__}") from exc
    low = PARAM_MINIMUM.get(key)
    finite = value == value and value not in (float("inf"), float("-inf"))
    if not finite or low is not None and (value <= 0 if low is True else value < low):
        need = "a finite number" if not finite else "above 0" if low is True else f"at least {low}"
        raise SpecError(f"{spec.canonical()}: parameter {key}={spec.params[key]} must be {need}")
    return value


class _Entry(BaseModel):
    """Everything vlmcheck knows about a provider, declared once in its :func:`register` call."""
    target: str  # "module:attr"
    roles: tuple[str, ...]
    description: str = ""
    #: the ?parameters the adapter reads, each IDENTITY or PLACEMENT (None: not checked, all identity)
    params: dict[str, ParamKind] | None = None
    #: how its calls are billed: "tokens" or "images" (run/prices.py looks the model up in prices.json), "local"
    #: (runs on the user's machine: no bill), None (unknown: no estimate unless the spec gives prices)
    billing: Literal["tokens", "images", "local"] | None = None
    #: how a request's images are counted in tokens for estimates (run/estimate.py)
    image_tokens: Literal["openai", "anthropic", "gemini"] = "openai"


#: provider -> its registration; a plugin's entry point is scanned only for a name that is not built in
PROVIDERS: Registry[_Entry] = Registry("model provider", error=SpecError, load=plugins("vlmcheck.adapters", lambda ep: (
    ep.name.lower(), _Entry(target=ep.value, roles=("vlm", "text", "generator", "encoder"), description="plugin"))))


#: parameters every provider takes, all placement: prices for cost accounting (run/runner.py), the image-token rule
#: of cost estimates (run/estimate.py: openai, anthropic or gemini), login=url (the base URL carried user:password,
#: which no record keeps: resolve_url_auth)
COMMON_PARAMS = ("price_in", "price_out", "login", "image_tokens")


def resolve_url_auth(spec: ModelSpec) -> None:
    """A spec recorded from a URL with ``user:password`` (``login=url``) needs them again: from the URL, or from
    the variable ``VLMCHECK_URL_CREDENTIALS``; never a silent switch to another kind of authentication."""
    if spec.params.get("login") != "url" or "userinfo" in spec._secrets:
        return
    value = os.environ.get(URL_CREDENTIALS_ENV)
    if not value:
        raise SpecError(f"{spec.canonical()}: this run reached its server with user:password in the URL, which "
                        f"is never stored; give the full URL again (the method's command with --resume) or set "
                        f"{URL_CREDENTIALS_ENV}=user:password")
    register_secret(value)
    register_secret(value.partition(":")[2])  # the password (a user name alone is no secret)
    spec._secrets["userinfo"] = value


def register(provider: str, target: str, roles: tuple[RoleName, ...], description: str = "", *,
             params: dict[str, ParamKind] | None = None, billing: Literal["tokens", "images", "local"] | None = None,
             image_tokens: Literal["openai", "anthropic", "gemini"] = "openai", replace: bool = False) -> None:
    """Register a factory ``target`` ("module:attr": called with the spec and the role, or with the spec alone
    where it takes one argument, as an adapter class does) for ``provider``: ``params``, the ``?parameters`` it
    reads, each :data:`IDENTITY` or :data:`PLACEMENT` (so that a misspelt one is an error, not ignored);
    ``billing`` and ``image_tokens`` (see :class:`_Entry`).  A provider registered twice is an error unless
    ``replace`` (core/registry.py)."""
    if params is not None:
        unclassified = sorted(k for k, kind in params.items() if kind not in (IDENTITY, PLACEMENT))
        if unclassified:
            raise SpecError(f"provider {provider!r}: parameter(s) {', '.join(unclassified)} are neither "
                            f"{IDENTITY!r} nor {PLACEMENT!r}")
    PROVIDERS.add(provider.lower(), _Entry(target=target, roles=tuple(roles), description=description,
                                           params=None if params is None else dict(params), billing=billing,
                                           image_tokens=image_tokens), replace=replace, stacklevel=2)


def registration(provider: str) -> _Entry | None:
    return PROVIDERS.get(provider.lower())


def placement_params(provider: str) -> frozenset[str]:
    """The parameters of ``provider`` that say where a model is reached and how, not what it answers: the common
    ones and those its registration declares :data:`PLACEMENT`.  Any other counts as identity (the safe side)."""
    found = registration(provider)
    declared = {k for k, kind in (found.params or {}).items() if kind == PLACEMENT} if found else set()
    return frozenset(COMMON_PARAMS) | declared


def check_params(spec: ModelSpec, entry: _Entry) -> None:
    if entry.params is None:
        return
    known = set(entry.params) | set(COMMON_PARAMS)
    unknown = sorted(set(spec.params) - known)
    if unknown:
        extra = "; extra request fields go in extra_body={...}" if "extra_body" in known else ""
        raise SpecError(f"{spec.canonical()}: unknown parameter(s) {', '.join(unknown)} for {spec.provider}:; known: "
                        f"{', '.join(sorted(known))}{extra}")


def load_model(spec: str | ModelSpec, role: RoleName = "vlm") -> Any:
    """Build the adapter for ``spec`` in ``role``; a :class:`SpecError` for an unknown provider, a provider that
    does not serve ``role``, or an adapter that does not satisfy the role's Protocol."""
    from . import roles as R

    if isinstance(spec, str):
        spec = ModelSpec.parse(spec)
    entry = PROVIDERS[spec.provider]
    check_params(spec, entry)
    for key in ("price_in", "price_out"):  # one sentence for text, NaN or negative prices, before any call
        spec.get_float(key, 0.0)
    resolve_url_auth(spec)
    if role not in entry.roles:
        raise SpecError(f"provider {spec.provider!r} does not serve the {role!r} role (it serves: "
                        f"{', '.join(entry.roles)})")
    try:
        factory = resolve(entry.target)
    except ImportError as exc:
        raise SpecError(f"provider {spec.provider!r} needs an optional dependency that is not installed ({exc}). "
                        f"Install the matching extra, e.g. pip install 'vlmcheck[local]' or 'vlmcheck[apis]'.") from exc
    args: tuple[Any, ...] = (spec, role)
    try:
        inspect.signature(factory).bind(*args)
    except TypeError:  # it takes the spec alone (an adapter class)
        args = (spec,)
    except ValueError:  # no signature to read (a builtin): the (spec, role) call
        pass
    with loading(spec.canonical()):  # local checkpoints can take minutes to load: say so when they do
        model = factory(*args)
    protocol = {"vlm": R.VLM, "text": R.TextModel, "generator": R.ImageGenerator, "encoder": R.ImageEncoder}[role]
    if not isinstance(model, protocol):
        raise SpecError(f"adapter for {spec.canonical()!r} does not implement the {role!r} role")
    return model
