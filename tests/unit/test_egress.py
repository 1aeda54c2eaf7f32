"""The egress policy's rules (cabrain/egress.py): which addresses are refused unless listed, in
every form an address can be written, what CABRAIN_EGRESS_ALLOW and CABRAIN_SECRET_ENV_ALLOW
accept, and secrets read from a folder without following links."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cabrain.egress import Egress, EgressDenied
from cabrain.errors import AccessDenied, ConfigError, InputError
from cabrain.settings import load_settings

REFUSED = [
    "http://127.0.0.1/",
    "http://127.1/",  # short form
    "http://2130706433/",  # decimal
    "http://0x7f.0.0.1/",  # hex
    "http://0.0.0.0/",
    "http://[::]/",
    "http://[::1]/",
    "http://[::ffff:127.0.0.1]/",  # IPv4-mapped
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of the metadata service
    "http://[2002:a00:1::]/",  # 6to4 of 10.0.0.1
    "http://169.254.169.254/latest/meta-data/",  # cloud metadata
    "http://[fe80::1]/",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # CGNAT
    "http://[fd00:ec2::254]/",  # ULA (AWS's IPv6 metadata)
    "http://224.0.0.1/",  # multicast
    "http://240.0.0.1/",  # reserved
]


@pytest.mark.parametrize("url", REFUSED)
def test_non_public_addresses_are_refused_unless_listed(url: str) -> None:
    with pytest.raises(EgressDenied, match="CABRAIN_EGRESS_ALLOW"):
        Egress().check_url(url, "a url")
    listed = Egress(["0.0.0.0/0", "::/0"])
    assert listed.check_url(url, "a url") == url


def test_public_addresses_and_names_pass_when_set() -> None:
    egress = Egress()
    for url in ("https://93.184.215.14/", "https://[2606:4700::1111]/", "https://hooks.example.com/x?y=1"):
        assert egress.check_url(url, "a url") == url


def test_a_listed_network_or_host_allows_just_that() -> None:
    egress = Egress(["10.20.0.0/16", "gitlab.internal", "127.0.0.1"])
    egress.check_url("http://10.20.3.4/", "u")
    egress.check_url("http://127.0.0.1:8080/", "u")
    with pytest.raises(EgressDenied):
        egress.check_url("http://10.21.0.1/", "u")
    with pytest.raises(EgressDenied):
        egress.check_url("http://127.0.0.2/", "u")
    assert egress.check_resolved("gitlab.internal", ["10.99.0.5"]) == ["10.99.0.5"]  # the name is listed
    with pytest.raises(EgressDenied):  # one refused address refuses the name
        egress.check_resolved("mixed.example.com", ["93.184.215.14", "10.99.0.5"])


def test_a_listed_port_allows_that_port_only() -> None:
    """``host:port`` entries: the address (in any form it is written) or the name on that port,
    when the URL is set and when it is resolved, and nothing else there."""
    egress = Egress(["127.0.0.1:11434", "[::1]:8080", "Models.Internal:9000"])
    assert egress.ports == {("127.0.0.1", 11434), ("::1", 8080), ("models.internal", 9000)}
    for url in (
        "http://127.0.0.1:11434/v1",
        "http://127.1:11434/",
        "http://[::ffff:127.0.0.1]:11434/",
        "http://[::1]:8080/",
    ):
        assert egress.check_url(url, "u") == url
    for url in ("http://127.0.0.1/", "http://127.0.0.1:6379/", "https://127.0.0.1:11435/", "http://[::1]:8081/"):
        with pytest.raises(EgressDenied):
            egress.check_url(url, "u")
    assert egress.addresses("127.0.0.1", 11434) == ["127.0.0.1"]
    with pytest.raises(EgressDenied):
        egress.addresses("127.0.0.1", 5432)
    assert egress.check_resolved("models.internal", ["10.0.0.7"], 9000) == ["10.0.0.7"]
    with pytest.raises(EgressDenied):  # the name on another port: its addresses judged as any
        egress.check_resolved("models.internal", ["10.0.0.7"], 9001)
    with pytest.raises(EgressDenied):  # a port is known only where the caller says it
        egress.check_resolved("models.internal", ["10.0.0.7"])
    assert Egress(["localhost:80"]).check_url("http://localhost/", "u") == "http://localhost/"  # http's own port
    for bad in ("127.0.0.1:0", "127.0.0.1:65536", "[::1]", "[nothost]:80", "a b:80", "10.0.0.0/8:80"):
        with pytest.raises(ValueError):
            Egress([bad])


def test_malformed_urls_are_input_errors() -> None:
    for url in ("ftp://example.com/", "http://", "example.com", "http://user:pw@example.com/", "http://h:99999/", 7):
        with pytest.raises(InputError):
            Egress().check_url(url, "a url")


def test_the_settings_take_comma_lists_and_refuse_what_they_cannot_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CABRAIN_EGRESS_ALLOW", "gitlab.internal, 10.0.0.0/8,::1")
    monkeypatch.setenv("CABRAIN_SECRET_ENV_ALLOW", "GITLAB_TOKEN,SLACK_BOT_TOKEN")
    settings = load_settings()
    assert settings.egress_allow == ["gitlab.internal", "10.0.0.0/8", "::1"]
    assert settings.secret_env_allow == ["GITLAB_TOKEN", "SLACK_BOT_TOKEN"]
    monkeypatch.setenv("CABRAIN_SECRET_ENV_ALLOW", "GITLAB_TOKEN,CABRAIN_DATABASE_URL")
    with pytest.raises(ConfigError, match=r"CABRAIN_SECRET_ENV_ALLOW: .*CABRAIN_DATABASE_URL"):
        load_settings()
    monkeypatch.setenv("CABRAIN_SECRET_ENV_ALLOW", "")
    monkeypatch.setenv("CABRAIN_EGRESS_ALLOW", "10.0.0.0/33")
    with pytest.raises(ConfigError, match="CABRAIN_EGRESS_ALLOW"):
        load_settings()


def test_a_secret_is_read_only_from_a_listed_variable() -> None:
    environ = {"GITLAB_TOKEN": "glpat-1", "AWS_SECRET_ACCESS_KEY": "aws-1", "CABRAIN_DATABASE_URL": "postgresql://x"}
    egress = Egress(secret_names=["GITLAB_TOKEN"], environ=environ)
    assert egress.secret("GITLAB_TOKEN") == "glpat-1"
    assert egress.secret(None) is None
    with pytest.raises(AccessDenied, match="CABRAIN_SECRET_ENV_ALLOW"):
        egress.check_secret("AWS_SECRET_ACCESS_KEY", "a connector's token_env")
    with pytest.raises(InputError, match="CaBrain setting"):
        egress.check_secret("CABRAIN_DATABASE_URL", "a connector's token_env")
    for name in ("AWS_SECRET_ACCESS_KEY", "CABRAIN_DATABASE_URL", "not a name"):
        with pytest.raises(ConfigError) as refused:
            egress.secret(name)
        assert environ.get(name, "\0") not in str(refused.value)
    with pytest.raises(ConfigError, match="not set"):
        Egress(secret_names=["SLACK_BOT_TOKEN"]).secret("SLACK_BOT_TOKEN")


def test_a_secret_file_is_read_without_following_links(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    folder.mkdir(mode=0o700)
    (folder / "HOOK_SECRET").write_text("whsec-from-file\n")
    (tmp_path / "elsewhere").write_text("the host's own secret")
    (folder / "LINKED").symlink_to(tmp_path / "elsewhere")
    os.mkfifo(folder / "PIPE")
    egress = Egress(secrets_dir=folder)
    assert egress.check_secret("HOOK_SECRET", "s") == "HOOK_SECRET"
    assert egress.secret("HOOK_SECRET") == "whsec-from-file"
    for name in ("LINKED", "PIPE", "MISSING"):
        with pytest.raises(AccessDenied, match="CABRAIN_SECRETS_DIR"):
            egress.check_secret(name, "s")
        with pytest.raises(ConfigError):
            egress.secret(name)
    (tmp_path / "via-link").symlink_to(folder)  # the folder itself given through a link
    with pytest.raises(ConfigError):
        Egress(secrets_dir=tmp_path / "via-link").secret("HOOK_SECRET")
