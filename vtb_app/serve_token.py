"""``vtb serve``'s token: where it comes from, how strong it must be, and a generated one (no server imports).

Whoever holds the token runs code in the sandbox pool, so it must be neither guessable nor shown:

- Sources, strongest first: ``--token-file PATH`` (read; when the file does not exist a new token is
  generated into it, mode 0600, and its path printed, as Jupyter does), ``$VTB_SERVE_TOKEN``, and last
  ``--token T``, which every local user reads in ``/proc/<pid>/cmdline`` and ``ps`` (kept for scripts on a
  single-user machine; the help says so). Two of them at once is a usage error: no silent choice.
- Strength: a token must carry ``MIN_TOKEN_BITS`` (128 bits, 16 random bytes) by ``token_bits``' estimate
  and not be a pattern (``pattern_bits``), else ``WeakTokenError``. Issue 41 guessed a one-character token
  in 23 requests; at the 1,154 guesses a second it measured, 2**128 guesses take longer than anyone waits.
- A token file others may read is refused (``chmod 600``): a token on a shared disk is shown.
"""

from __future__ import annotations

import math
import os
import secrets
import stat
import zlib
from pathlib import Path

TOKEN_VARIABLE = "VTB_SERVE_TOKEN"
MIN_TOKEN_BITS = 128
GENERATED = "a new token was generated into"
MAX_TOKEN_CHARS = 4096  # a header line, not a file's worth
_POOLS = (  # character classes and how many characters each holds
    (str.islower, 26),
    (str.isupper, 26),
    (str.isdigit, 10),
)
_OTHER_POOL = 33  # printable ASCII punctuation and space
_EMPTY_DEFLATE = len(zlib.compress(b"", 9))  # deflate's own header and trailer


class TokenError(ValueError):
    """The token given cannot be used (weak, unreadable, shown to others, or given twice)."""


class WeakTokenError(TokenError):
    """A token with less than ``MIN_TOKEN_BITS`` of estimated entropy."""


def token_bits(token: str) -> float:
    """An upper estimate of the bits of entropy in ``token``: its length times the bits of the character classes
    it draws from (lower, upper, digits, punctuation), as if each character were drawn at random from them.

    A user's string cannot be measured, only bounded: this bound is what ``MIN_TOKEN_BITS`` is held against,
    and ``pattern_bits`` keeps a long repeated string (``aaaa...``) from passing on its length alone.
    """
    pool = sum(size for member, size in _POOLS if any(member(char) for char in token))
    pool += _OTHER_POOL if any(not char.isalnum() for char in token) else 0
    return len(token) * math.log2(pool) if pool >= 2 else 0.0


def pattern_bits(token: str) -> float:
    """What is left of ``token`` after deflate removes its repetition, in bits: ``aaaa...`` and ``abab...`` shrink
    to a few bytes whatever their length, 32 random hex digits keep over 200 bits."""
    return 8.0 * (len(zlib.compress(token.encode(), 9)) - _EMPTY_DEFLATE)


def check_token(token: str, source: str) -> str:
    """``token`` (stripped of surrounding whitespace) if it is strong enough, else ``WeakTokenError``."""
    token = token.strip()
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenError(f"the token from {source} is {len(token)} characters long; at most {MAX_TOKEN_CHARS}")
    if any(ord(char) < 0x21 or ord(char) > 0x7E for char in token):
        raise TokenError(f"the token from {source} must be printable ASCII without spaces (it travels in a header)")
    bits = min(token_bits(token), pattern_bits(token))
    if bits < MIN_TOKEN_BITS:
        raise WeakTokenError(
            f"the token from {source} carries about {bits:.0f} bits, fewer than {MIN_TOKEN_BITS} (16 random bytes): "
            "it can be guessed. Use --token-file PATH with a PATH that does not exist to have one generated, or "
            "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    return token


def read_token_file(path: Path) -> str:
    """The token stored in ``path``: refused when others can read it or when it is weak."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenError(f"cannot read the token file {path}: {exc}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"the token file {path} can be read by other users (mode {stat.S_IMODE(mode):o}): chmod 600")
    return check_token(text, str(path))


def generate_token_file(path: Path) -> str:
    """Write a new random token (32 bytes, URL-safe) to ``path`` with mode 0600, created exclusively."""
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(token + "\n")
    return token


def resolve_token(
    token_file: str | None, flag: str | None, environ: dict[str, str] | os._Environ[str]
) -> tuple[str | None, str]:
    """The token and a line saying where it came from (no token: None and ``""``); see the module docstring."""
    variable = environ.get(TOKEN_VARIABLE) or None
    given = [name for name, value in (("--token-file", token_file), (f"${TOKEN_VARIABLE}", variable)) if value]
    given += ["--token"] if flag else []
    if len(given) > 1:
        raise TokenError(f"give the token one way, not {' and '.join(given)}")
    if token_file:
        path = Path(token_file).expanduser()
        if not path.exists():
            token = generate_token_file(path)
            return token, f"{GENERATED} {path} (mode 600): clients send its contents as the Bearer token"
        return read_token_file(path), f"token from {path}"
    if variable:
        return check_token(variable, f"${TOKEN_VARIABLE}"), f"token from ${TOKEN_VARIABLE}"
    if flag:
        return check_token(flag, "--token"), "token from --token (visible to every local user in the process list)"
    return None, ""
