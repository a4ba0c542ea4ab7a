"""Kafka's JAAS login configuration, as the `sasl.jaas.config` keys hold it.

`<LoginModule class> <flag> key="value" key2=value2;` -- one module entry, as Kafka
accepts in a JAAS config key. Brook reads PlainLoginModule's `user_<name>="<password>"`
entries (the PLAIN users a listener accepts) and `username`/`password` (what the
inter-broker client logs in with), and ScramLoginModule's `username`/`password`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..config.broker_config import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:\\.|[^"\\])*")|(?P<word>[^\s=;"]+)|(?P<sym>[=;]))')


@dataclass(frozen=True, slots=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> dict[str, str]:
        """PlainLoginModule's users: user_<name>="<password>"."""
        return {
            key[len("user_") :]: value
            for key, value in self.options.items()
            if key.startswith("user_")
        }


def parse_jaas_config(text: str, key: str) -> JaasEntry:
    tokens: list[tuple[str, str]] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            if text[position:].strip() == "":
                break
            raise ConfigError(f"Invalid {key}: cannot read it from {text[position:]!r}")
        position = match.end()
        if match["quoted"] is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", match["quoted"][1:-1])))
        elif match["word"] is not None:
            tokens.append(("word", match["word"]))
        else:
            tokens.append(("sym", match["sym"]))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise ConfigError(f"Invalid {key}: expected '<LoginModule> <flag> key=value ...;'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in _FLAGS:
        raise ConfigError(
            f"Invalid {key}: login module control flag {tokens[1][1]!r} is not one of"
            f" {', '.join(_FLAGS)}"
        )
    options: dict[str, str] = {}
    index = 2
    while index < len(tokens) and tokens[index] != ("sym", ";"):
        if (
            index + 2 >= len(tokens)
            or tokens[index][0] != "word"
            or tokens[index + 1] != ("sym", "=")
            or tokens[index + 2][0] == "sym"
        ):
            raise ConfigError(f"Invalid {key}: expected key=value options after {module}")
        options[tokens[index][1]] = tokens[index + 2][1]
        index += 3
    if index >= len(tokens):
        raise ConfigError(f"Invalid {key}: the login module entry must end with ';'")
    if index + 1 != len(tokens):
        raise ConfigError(f"Invalid {key}: it must contain exactly one login module")
    return JaasEntry(module, flag, options)
