"""Planted instructions: the named rules that look for them in a (normalised) text.

Memory goes into an agent's system prompt at every session start, which makes it the place
to plant instructions. Each rule matches :mod:`filemem.rules.normalized` text (NFKC, hidden
characters left out) case-insensitively, and is narrow on purpose: a note that mentions
``~/.ssh``, ``curl``, ``AGENTS.md`` or a system prompt in prose is ordinary and passes; what
is caught is the instruction or the command. Each rule's level (off, warn, block) is the
owner's, in ``filemem.yaml`` (``checks.rules``; defaults in :data:`filemem.config.CHECK_RULES`).

* ``ignore-instructions``: an instruction to ignore, disregard or forget the previous (prior,
  above, system...) instructions, in English or Chinese.
* ``pipe-to-shell``: a download piped into a shell or interpreter (``curl ... | sh``,
  ``wget -O- ... | bash``, ``bash <(curl ...)``, ``iwr ... | iex``).
* ``exfiltration``: one command line that both reads a secret (``~/.ssh/id_*`` but not a
  ``.pub``, ``~/.aws/credentials``, ``.netrc``, ``@.env`` or ``cat .env``, ``printenv``...)
  and sends it over the network (``curl``, ``wget``, ``nc``, ``scp``...). A token variable
  in a request (``curl -H "Authorization: Bearer $GITHUB_TOKEN" https://api.github.com``) is
  how a token is used, not a leak, and passes.
* ``marker-imitation``: a text that imitates filemem's own lines in a snapshot (``[filemem:``)
  or the approval marker (``[dsh-memento``), so a planted entry cannot pose as a withheld one
  or as the snapshot's header.
* ``role-override``: a role or system-prompt override: ``you are now``, ``from now on you``,
  a ``[system]`` or ``<system>`` role line (a ``System:`` line only when it gives orders:
  ``System: Ubuntu 22.04`` passes), ``<|im_start|>``, a "new system prompt", developer mode.
* ``agent-config-edit``: an instruction to write to an agent's configuration or instruction
  files (AGENTS.md, CLAUDE.md, .cursorrules, copilot-instructions.md, .mcp.json...).
* ``hidden-comment``: an HTML comment (``<!-- ... -->``) or a markdown comment
  (``[//]: # (...)``) with words in it, outside code spans: text a rendered view hides.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from filemem.rules.lazyre import Lazy
from filemem.rules.wordset import WordSet

_I: Final = re.IGNORECASE
_ANY_WS: Final = r"[\s_*`'\"-]+"  # between words: spaces, markdown emphasis, quotes


def _words(*words: str) -> str:
    return _ANY_WS.join(words)


_NET: Final = (r"(?:curl|wget|fetch|http(?:ie)?|nc|ncat|netcat|socat|scp|rsync|sftp|ftp|"
               r"invoke-webrequest|invoke-restmethod|iwr|irm|telnet|openssl\s+s_client)")
# a shell, or an interpreter reading the program from its input (not `python3 -m json.tool`)
_SHELL: Final = (r"(?:sudo\s+(?:-\S+\s+)*)?(?:(?:ba|z|k|c|tc|da|fi|a)?sh|iex|invoke-expression|"
                 r"pwsh|powershell)\b|(?:python[0-9.]*|perl|ruby|node|php)(?:\s+-)?"
                 r"(?=\s*(?:$|[;&|)`'\"]))")
_SECRET_SOURCE: Final = (
    r"(?:~|\$home|\$\{home\}|/home/[^/\s]+|/root)/\.ssh/(?!\S*\.pub\b)\S*"
    r"|\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub)"
    r"|\.aws/credentials|\.netrc\b|\.npmrc\b|\.pypirc\b|\.docker/config\.json"
    r"|\.git-credentials|\.config/gh/hosts\.yml|\.kube/config"
    r"|@\S*\.env\b(?!\.)|\bcat\s+\S*\.env\b(?!\.)|<\s*\S*\.env\b(?!\.)|\bprintenv\b|\benv\s*\|"
    r"|/etc/shadow\b|keychain|security\s+find-generic-password")

RULES: Final[dict[str, tuple[Lazy, ...]]] = {
    "ignore-instructions": (
        Lazy(r"\b(?:ignore|disregard|forget|override|bypass)" + _ANY_WS
                   + r"(?:(?:all|any|every|of|the|your|my|these|those|its)" + _ANY_WS + r")*"
                   r"(?:previous|prior|preceding|above|earlier|former|original|initial|"
                   r"system|developer|safety)" + _ANY_WS +
                   r"(?:\w+" + _ANY_WS + r")?(?:instructions?|prompts?|rules|directives?|"
                   r"guidelines|guardrails|messages|context|constraints)(?![A-Za-z])",
                   _I),
        Lazy(r"\b(?:ignore|disregard|forget)" + _ANY_WS + r"(?:all|everything)" + _ANY_WS
                   + r"(?:(?:you|that)" + _ANY_WS + r"(?:were|was|have been)" + _ANY_WS
                   + r"(?:told|given|instructed)|(?:instructions|prompts))", _I),
        Lazy(r"(?:忽略|无视|忘记|忘掉|不要理会)\s*(?:掉)?\s*(?:之前|以前|先前|前面|上面|以上|"
                   r"上述|此前|所有|全部|一切)(?:的|所有|全部|一切|系统|\s)*"
                   r"(?:指令|指示|提示词?|规则|命令|要求|设定)"),
    ),
    "pipe-to-shell": (
        # one pipeline segment (tried only where a segment starts, so a long line costs one
        # pass): a download command, then a pipe into a shell. No rule uses a possessive
        # quantifier or an atomic group: Python 3.10 has neither, and early 3.11 releases
        # (Debian 12's 3.11.2) get a possessive group with a lookahead wrong (the hidden
        # comment below went unfound); none is needed, as backing off finds no other match
        Lazy(r"(?:^|(?<=[|;&]))(?=[^\n|;&]*\b" + _NET + r"\b)[^\n|;]*\|\s*(?:"
                   + _SHELL + r")", _I | re.MULTILINE),
        Lazy(r"(?:\b(?:ba|z|k)?sh|\bsource|\.)\s+<\s*\(\s*" + _NET + r"\b", _I),
        Lazy(r"\b(?:ba|z|k)?sh\s+-c\s+[\"']?\$\(\s*" + _NET + r"\b", _I),
        Lazy(r"\b(?:iex|invoke-expression)\s*\(?\s*\(?\s*(?:new-object\s+net\.webclient\)"
                   r"\.downloadstring|iwr|irm|invoke-webrequest|invoke-restmethod)\b", _I),
    ),
    "exfiltration": (
        Lazy(r"^(?=[^\n]*\b" + _NET + r"\b)(?=[^\n]*(?:" + _SECRET_SOURCE + r"))[^\n]+",
                   _I | re.MULTILINE),
    ),
    "marker-imitation": (
        Lazy(r"\[\s*filemem\s*[:\uff1a]", _I),
        Lazy(r"\[\s*dsh-memento\b", _I),
    ),
    "role-override": (
        Lazy(r"\byou" + _ANY_WS + r"are" + _ANY_WS + r"now" + _ANY_WS
                   + r"(?:a|an|the|in|no longer|my|dan|jailbroken|unrestricted|free)\b", _I),
        Lazy(r"\bfrom" + _ANY_WS + r"now" + _ANY_WS + r"on,?" + _ANY_WS
                   + r"(?:you|the assistant|the agent|claude|chatgpt)" + _ANY_WS
                   + r"(?:are|will|must|shall|should)\b", _I),
        Lazy(r"^\s*(?:\[|<|#{1,6}\s*)(?:system|assistant|developer)\s*(?:\]|>|:)",
                   _I | re.MULTILINE),
        Lazy(r"^\s*(?:system|assistant|developer)\s*:\s*(?:you|ignore|from now|the user|"
                   r"new|override|always|never|do not|don't|obey)\b", _I | re.MULTILINE),
        Lazy(r"<\|?\s*(?:im_start|im_end|system|endoftext)\s*\|?>|\[/?INST\]|<</?SYS>>",
                   _I),
        Lazy(r"\b(?:new|updated|real|actual|true|secret|hidden|override)" + _ANY_WS
                   + r"system" + _ANY_WS + r"prompts?\b", _I),
        Lazy(r"\b(?:enable|enter|activate|switch to)" + _ANY_WS
                   + r"(?:developer|god|jailbreak|dan|debug|sudo)" + _ANY_WS + r"mode\b", _I),
        Lazy(r"\b(?:reveal|print|output|repeat|leak|show me)" + _ANY_WS
                   + r"(?:your|the)" + _ANY_WS + r"(?:system|initial|hidden)" + _ANY_WS
                   + r"(?:prompt|instructions)\b", _I),
    ),
    "agent-config-edit": (
        Lazy(r"\b(?:add|append|write|edit|modify|update|change|insert|put|overwrite|"
                   r"replace|prepend|create|rewrite|inject|amend)\b[^\n.!?]{0,80}?"
                   r"(?:\bagents\.md|\bclaude(?:\.local)?\.md|\bgemini\.md|\.cursorrules|"
                   r"\.cursor/rules|\.windsurfrules|\.clinerules|copilot-instructions\.md|"
                   r"\.claude/settings(?:\.local)?\.json|\.mcp\.json|\bmcp\.json|"
                   r"\.codex/config\.toml|\.aider\.conf\.yml|\.continuerc)", _I),
        Lazy(r"(?:>>?|\btee\s+(?:-a\s+)?)\s*[^\s>|;&]{0,200}?(?:agents\.md|claude\.md|gemini\.md|"
                   r"\.cursorrules|\.windsurfrules|\.clinerules|copilot-instructions\.md|"
                   r"mcp\.json|settings\.json)\b", _I),
    ),
    "hidden-comment": (
        Lazy(r"<!--(?:(?!-->)[\s\S])*(?:-->|\Z)"),  # with words in it: see _WORDS
        Lazy(r"^\s*\[(?://|comment|#)\]:\s*(?:#|<>)\s*[(\"'][^\n]*\w[^\n]*$",
                   _I | re.MULTILINE),
    ),
}
# Words each rule's patterns need (in the lower-cased text): a rule none of whose words is
# in the text is not tried, so most notes cost one search for all the words (:data:`WORDS`).
# Each tuple lists alternatives; a rule with two tuples needs one word of each.
_NET_WORDS: Final = ("curl", "wget", "fetch", "http", "nc", "netcat", "socat", "scp", "rsync",
                     "ftp", "invoke-", "iwr", "irm", "telnet", "openssl")
TRIGGERS: Final[dict[str, tuple[tuple[str, ...], ...]]] = {
    "ignore-instructions": (("ignore", "disregard", "forget", "override", "bypass", "忽略",
                             "无视", "忘记", "忘掉", "不要理会"),),
    "pipe-to-shell": ((*_NET_WORDS, "iex", "invoke-expression"), ("|", "<(", "$(", "iex",
                                                                   "invoke-expression")),
    "exfiltration": (_NET_WORDS, (".ssh", "id_", ".aws", ".netrc", ".npmrc", ".pypirc",
                                  ".docker", "credentials", "gh/hosts", ".kube", "env",
                                  "/etc/shadow", "keychain", "find-generic-password")),
    "marker-imitation": (("filemem", "dsh-memento"),),
    "role-override": (("now", "system", "assistant", "developer", "<|", "im_start", "im_end",
                       "endoftext", "inst]", "<<sys", "<</sys", "prompt", "mode"),),
    "agent-config-edit": (("agents.md", "claude", "gemini.md", "cursor", "windsurf", "cline",
                           "copilot", "mcp.json", "codex", "aider", "continuerc",
                           "settings"),),
    "hidden-comment": (("<!--", "]:"),),
}


WORDS: Final = WordSet(w for words in TRIGGERS.values() for alts in words for w in alts)
_NEEDS: Final = {rule: tuple(frozenset(alts) for alts in words)
                 for rule, words in TRIGGERS.items()}


def _triggered(rule: str, found: frozenset[str]) -> bool:
    return all(not found.isdisjoint(alts) for alts in _NEEDS[rule])


_RULES_OF: Final = {w: frozenset(r for r, words in TRIGGERS.items() if w in words[0])
                    for w in WORDS.words}  # a word -> the rules it may trigger


def triggered(found: frozenset[str]) -> list[str]:
    """The rules (in :data:`RULES`' order) whose trigger words are all in ``found``."""
    maybe: set[str] = set()
    for word in found:
        maybe |= _RULES_OF.get(word, frozenset())
    return [rule for rule in RULES if rule in maybe and _triggered(rule, found)]


_WORDS: Final = Lazy(r"[A-Za-z\u3040-\u9fff]{2}")  # a comment that says something
_CODE: Final = Lazy(r"```[\s\S]*?(?:```|\Z)|~~~[\s\S]*?(?:~~~|\Z)|`[^`\n]+`")
IN_PROSE_ONLY: Final = frozenset({"hidden-comment"})  # code spans may show such syntax


def _code_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in _CODE.finditer(text)]


def matches(text: str, words: frozenset[str] | None = None
            ) -> Iterator[tuple[str, int, int]]:
    """``(rule, start, end)`` for every match in the normalised ``text``, by position.
    ``words``: the trigger words in ``text.lower()``, if the caller has found them."""
    code: list[tuple[int, int]] | None = None
    found: list[tuple[int, str, int]] = []
    if words is None:
        words = WORDS.found_in(text.lower())
    for name in triggered(words):
        for pattern in RULES[name]:
            for m in pattern.finditer(text):
                if name == "hidden-comment" and not _WORDS.search(m.group()):
                    continue
                if name in IN_PROSE_ONLY:
                    code = _code_spans(text) if code is None else code
                    if any(a <= m.start() < b for a, b in code):
                        continue
                found.append((m.start(), name, m.end()))
    for start, name, end in sorted(found):
        yield name, start, end
