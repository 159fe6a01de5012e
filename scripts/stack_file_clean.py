"""git's clean filter for Pulumi.<stack>.yaml: what git stores of a stack file (stdin to stdout).

.gitattributes names the filter pulumi-encryptionsalt; the Makefile defines it. A file holding any
`secure:` value passes whole: its ciphertexts decrypt only with its encryptionsalt, and Pulumi mints a
new salt where the line is missing (pulumi/pulumi pkg/cmd/pulumi/stack/secrets.go GetSecretsManager
@1b5949891b), so a commit, clone, stash or checkout without it would orphan them. A file without
secrets loses only its `encryptionsalt:` line, which belongs to one user's passphrase.
Standard library only: git runs it with the host's python3, before any venv exists.
"""

from __future__ import annotations

import re
import sys

# `secure:` as a YAML key, in block (`  secure: v1:…`) or flow style (`{secure: v1:…}`).
_SECRET = re.compile(r"(^|[\s{,-])secure:(\s|$)", re.MULTILINE)


def cleaned(text: str) -> str:
    if _SECRET.search(text):
        return text
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("encryptionsalt: "))


if __name__ == "__main__":
    sys.stdout.buffer.write(cleaned(sys.stdin.buffer.read().decode()).encode())
