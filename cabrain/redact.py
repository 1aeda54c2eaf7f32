"""Secrets and private text out of everything CaBrain stores or logs.

:func:`redact` removes

- everything inside ``<private>...</private>``, nested or not, whatever the case or attributes of
  the tags; an unclosed ``<private>`` runs to the end of the text, and a closing tag with no opening
  one hides everything before it (its opening was lost);
- anything that looks like a secret: private keys in any PEM flavour (and PuTTY's), vendor tokens
  (OpenAI, Anthropic, Stripe, AWS, GitHub, GitLab, Slack, Google, Hugging Face, npm, PyPI, SendGrid,
  Twilio, Mailgun, DigitalOcean, Shopify, Databricks, Telegram, Vault, Atlassian, Linear, Notion,
  Figma, Grafana, Square, Doppler, age, Azure AD client secrets, CaBrain keys, JWTs, webhook URLs),
  ``Authorization`` / API-key / cookie headers, passwords and tokens given as command-line flags
  (``--password=...``, ``mysql -pPASS``, ``curl -u user:PASS``, ``sshpass -p``, ``redis-cli -a``,
  ``docker login -p``, ``openssl -passin pass:``, ``keytool -storepass``, ...), ``.env`` / YAML /
  JSON assignments to names like PASSWORD, SECRET, TOKEN, API_KEY, credentials in URLs (user and
  password, a token as user name, secret query parameters) and Azure connection strings.

Redact whole texts before cutting them short: a token cut in half no longer looks like a token.
:func:`redact` is idempotent. Standard library only (the capture hook imports it on every event);
the patterns are compiled on first use.
"""

from __future__ import annotations

import functools
import re

REDACTED = "[REDACTED]"
PRIVATE = "[PRIVATE]"

_TAG = r"<\s*(/?)\s*private\b[^>]*>"

# Tool names whose short flags carry secrets (``mysql -pPASS``); ``[^\n;|&]*?`` keeps a rule inside
# one command of a pipeline.
_CMD = r"[^\n;|&]*?"

# A name that holds a secret, then what assigns to it (the two assignment rules below). Trying these
# names at every word makes them the slowest rules by far, so they run only on a text whose case
# fold holds one of _NAMES, which each of their matches holds ("credent", not "credential": a
# dotless ı matches i without regard to case, but its case fold is not i).
_ASSIGNED = (
    r"(?P<keep>\b[\w.\-]*(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|apikey|access[_\-]?key"
    r"|private[_\-]?key|(?:secret|master|license|ssh|root|admin|app|auth|signing|encryption|session)[_\-]?key|credentials?"
    r"|connection[_\-]?string|conn[_\-]?str)[\"']?\s*"
)
_NAMES = ("pass", "pwd", "secret", "token", "key", "credent", "conn")

# (pattern, flags). A pattern either matches the secret itself, or names groups: ``keep`` (kept
# before the secret), ``secret`` (replaced) and ``tail`` (kept after it).
RULES: list[tuple[str, int]] = [
    # private keys: PEM of every flavour (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ... BLOCK), PuTTY
    (
        r"-{3,5}[ \t]*BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?[ \t]*-{3,5}.*?"
        r"(?:-{3,5}[ \t]*END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?[ \t]*-{3,5}|\Z)",
        re.DOTALL,
    ),
    (r"PuTTY-User-Key-File-\d+:.*?(?:Private-MAC:[ \t]*\S+|\Z)", re.DOTALL),
    # vendor tokens, recognisable by their prefixes
    (
        r"\b(?:"
        r"sk-ant-[A-Za-z0-9_\-]{20,}"  # Anthropic
        r"|sk-(?:proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_\-]{20,}"  # OpenAI
        r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9+/=]{20,}"  # Stripe
        r"|(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}"  # AWS key ids
        r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
        r"|gl(?:pat|dt|ptt|rt|cbt|imt|ft|oas|soat)-[A-Za-z0-9_\-]{20,}|GR1348941[A-Za-z0-9_\-]{20,}"  # GitLab
        r"|xox[abposr]-[A-Za-z0-9\-]{10,}|xapp-\d-[A-Za-z0-9\-]{10,}"  # Slack
        r"|AIza[0-9A-Za-z_\-]{35}|GOCSPX-[A-Za-z0-9_\-]{20,}|ya29\.[0-9A-Za-z_\-]{20,}"  # Google
        r"|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36}|pypi-AgE[A-Za-z0-9_\-]{30,}"  # Hugging Face, npm, PyPI
        r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"  # SendGrid
        r"|SK[0-9a-fA-F]{32}|key-[0-9a-zA-Z]{32}"  # Twilio, Mailgun
        r"|do[opr]_v1_[a-f0-9]{64}|shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}|dapi[a-f0-9]{32}"  # DigitalOcean, Shopify, Databricks
        r"|\d{8,10}:AA[A-Za-z0-9_\-]{33}"  # Telegram bots
        r"|hv[sb]\.[A-Za-z0-9_\-]{24,}|ATATT3[A-Za-z0-9_=\-]{30,}"  # Vault, Atlassian
        r"|lin_api_[A-Za-z0-9]{30,}|secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,}|figd_[A-Za-z0-9_\-]{30,}"  # Linear, Notion, Figma
        r"|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/=]{30,}"  # Grafana
        r"|sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}|dp\.(?:pt|st|sa|ct)\.[A-Za-z0-9]{30,}"  # Square, Doppler
        r"|AGE-SECRET-KEY-1[0-9A-Z]{50,}"  # age
        r"|[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}"  # Azure AD client secrets
        r"|cbk_[A-Za-z0-9_\-]{20,}"  # CaBrain
        r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"  # JWTs
        r")",
        0,
    ),
    (r"(?P<keep>hooks\.slack\.com/(?:services|workflows)/)(?P<secret>[A-Za-z0-9/_\-]+)", re.IGNORECASE),
    (r"(?P<keep>discord(?:app)?\.com/api/webhooks/\d+/)(?P<secret>[A-Za-z0-9_\-]+)", re.IGNORECASE),
    # headers
    (
        r"(?P<keep>\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?"
        r"(?:(?:bearer|basic|token|digest|apikey|api-key|bot|sso-key|negotiate|ntlm)\s+)?)"
        r"(?P<secret>[^\s\"',;]+)",
        re.IGNORECASE,
    ),
    (r"(?P<keep>\b(?:set-)?cookie\s*:\s*)(?P<secret>[^\n\"']+)", re.IGNORECASE),
    # command-line flags
    (
        r"(?P<keep>(?:^|[\s\"'])--?(?:password|passwd|passphrase|pass|pwd|token|api-?key|apikey|secret|client-secret"
        r"|auth-token|access-token|refresh-token|id-token|private-key|secret-key|access-key|secret-access-key"
        r"|http-password|proxy-password|db-password|admin-password|root-password|master-password|auth)"
        r"(?:=|\s+))(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"']+)",
        re.IGNORECASE,
    ),
    (
        rf"(?P<keep>\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlcheck|mysqlsh|mariadb(?:-dump|-admin)?)\b{_CMD}"
        r"\s-p)(?P<secret>'[^']*'|\"[^\"]*\"|[^\s;|&'\"]+)",
        0,
    ),
    (r"(?P<keep>\bsshpass\s+-p\s*)(?P<secret>'[^']*'|\"[^\"]*\"|\S+)", 0),
    (rf"(?P<keep>\bredis-cli\b{_CMD}\s-a\s*)(?P<secret>'[^']*'|\"[^\"]*\"|[^\s;|&]+)", 0),
    (
        rf"(?P<keep>\b(?:docker|podman|helm|oras|buildah|skopeo|nerdctl|az|mongo|mongosh|mongodump|mongorestore)\b{_CMD}"
        r"\s-p\s+)(?P<secret>'[^']*'|\"[^\"]*\"|[^\s;|&]+)",
        0,
    ),
    (rf"(?P<keep>\bldap\w*\b{_CMD}\s-w\s+)(?P<secret>'[^']*'|\"[^\"]*\"|[^\s;|&]+)", 0),
    (rf"(?P<keep>\bsmbclient\b{_CMD}\s-U\s*[^\s%]+%)(?P<secret>[^\s;|&]+)", 0),
    (r"(?P<keep>(?:^|\s)(?:-u|--user|--proxy-user|--username)(?:\s+|=)?[\"']?[^\s:\"'@/]*:)(?P<secret>[^\s\"'@]+)", 0),
    (r"(?P<keep>-pass(?:in|out)?\s+pass:)(?P<secret>\S+)", 0),
    (r"(?P<keep>-(?:store|key|src|dest|new)?(?:store)?pass\s+)(?P<secret>\S+)", 0),
    # assignments (.env, shell, YAML, JSON, TOML, ini) to names that hold secrets
    (_ASSIGNED + r"(?::=|=>|=)\s*)" + r"(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"']+)", re.IGNORECASE),
    (_ASSIGNED + r":\s*)" + r"(?P<secret>\"[^\"]*\"|'[^']*'|[^\n\"',;}]+)", re.IGNORECASE),
    (
        r"(?P<keep>\b(?:password|passphrase|passcode|pin)\s+(?:is|was)\s+[\"']?)"
        r"(?P<secret>(?=\S*[\d!@#$%^&*])[^\s\"']{6,})",
        re.IGNORECASE,
    ),
    # Azure-style connection strings: Key=value;Key=value
    (
        r"(?P<keep>\b(?:AccountKey|SharedAccessKey|SharedAccessSignature|SharedSecret|ClientSecret|Password|Pwd"
        r"|AccessKey|Sig)=)(?P<secret>[^;\"'\s]+)",
        re.IGNORECASE,
    ),
    # credentials in URLs: user:password@, a token as the user name, secret query parameters
    (r"(?P<keep>\b[a-z][a-z0-9+.\-]*://[^\s:/@\"']*:)(?P<secret>[^\s@/\"']+)(?P<tail>@)", re.IGNORECASE),
    (r"(?P<keep>\bhttps?://)(?P<secret>[^\s:/@\"']{20,})(?P<tail>@)", re.IGNORECASE),
    (
        r"(?P<keep>[?&](?:access_token|refresh_token|id_token|token|api_key|apikey|key|sig|signature|secret"
        r"|client_secret|password|auth|code|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token)=)"
        r"(?P<secret>[^&\s#\"']+)",
        re.IGNORECASE,
    ),
]


@functools.cache
def _compiled() -> tuple[re.Pattern[str], list[tuple[re.Pattern[str], bool]]]:
    """The ``<private>`` tag, and each rule with whether it runs only on texts holding one of _NAMES."""
    return re.compile(_TAG, re.IGNORECASE), [(re.compile(p, f), p.startswith(_ASSIGNED)) for p, f in RULES]


def _replace(match: re.Match[str]) -> str:
    groups = match.re.groupindex
    if "secret" not in groups:
        return REDACTED
    if match.group("secret").startswith((REDACTED, PRIVATE)):
        return match.group(0)  # redacted already
    keep = match.group("keep") if "keep" in groups else ""
    tail = match.group("tail") if "tail" in groups else ""
    return (keep or "") + REDACTED + (tail or "")


def strip_private(text: str) -> str:
    """``text`` without what ``<private>`` tags enclose (nested, unbalanced: see the module)."""
    tag, _ = _compiled()
    if "private" not in text.lower():
        return text
    out: list[str] = []
    depth, position = 0, 0
    for match in tag.finditer(text):
        closing = bool(match.group(1))
        if depth == 0:
            out.append(text[position : match.start()])
        if not closing:
            if depth == 0:
                out.append(PRIVATE)
            depth += 1
        elif depth > 0:
            depth -= 1
        else:  # a closing tag with no opening one: what came before it was private
            out = [PRIVATE]
        position = match.end()
    if depth == 0:
        out.append(text[position:])
    return "".join(out)


def redact(text: str) -> str:
    """``text`` without ``<private>`` blocks and without anything that looks like a secret."""
    if not text:
        return text
    _, rules = _compiled()
    text = strip_private(text)
    folded = text.casefold()
    named = any(name in folded for name in _NAMES)
    for rule, needs_a_name in rules:
        if named or not needs_a_name:
            text = rule.sub(_replace, text)
    return text


def redact_deep(value: object) -> object:
    """:func:`redact` applied to every string in a JSON-like value (dict keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_deep(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_deep(v) for v in value]
    return value
