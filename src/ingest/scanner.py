"""Heuristic prompt-injection scanner for chunks at ingestion time.

Retrieved chunks end up in another model's context, so a chunk that talks *to* that model is marked
``injection_suspect`` together with the rule that matched. The rules are deliberately conservative:
compliance text is full of "ignore", "override", "system prompt", "agent" and "token", so every rule
needs an attack-shaped construction (an imperative addressed to an AI, an override verb aimed at the
model's instructions, a fake chat-template marker, ...), never a single alarming word. Gaps between
the parts of a construction are bounded and never cross a sentence, a line or a table cell.

Pure standard library; compiling the patterns at import is the only work done then.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["RULES", "InjectionFinding", "normalise", "scan_for_injection"]

EXCERPT_LIMIT = 120


@dataclass(frozen=True)
class InjectionFinding:
    rule: str  # stable rule id, see RULES
    excerpt: str  # the matched (normalised) text, at most EXCERPT_LIMIT characters


class Rule(NamedTuple):
    id: str
    why: str
    pattern: re.Pattern[str]


def _gap(n: int) -> str:
    """Up to n characters that stay within one sentence, line and table cell."""
    return rf"[^.!?\n|]{{0,{n}}}?"


# --- building blocks -------------------------------------------------------------------------------
_NOT = r"(?<!not\s)(?<!n't\s)(?<!never\s)"  # "do not ignore your training" is advice, not an attack
_LEAD = r"(?:^|(?<=[\n|>\[(\"'`:#_-]))[ \t]*"  # start of text, line, table cell, comment, quote
_AI_ONE = (
    r"(?:(?:AI|A\.I\.|LLM|GPT|gen-?AI|automated|autonomous)[\s-]+"
    r"(?:assistant|agent|model|system|bot|reader|crawler|summari[sz]er)s?"
    r"|(?:large\s+)?language\s+models?|LLMs?|chat\s?bots?|claude|chatgpt|gpt-?\d\w*|AI)"
)
_AI = rf"\b{_AI_ONE}(?:\s+(?:and|or|&)\s+(?:other\s+)?{_AI_ONE})?(?![\w-])"
_PREFIX = (
    r"(?:(?:note|message|memo|instructions?|notice|reminder|important|urgent)\b(?:\s+\w+){0,2}?\s+(?:to|for)\s+"
    r"|(?:dear|hey|hi|hello|attention|attn)\s+)(?:(?:any|all|every|the)\s+)?"
)
_PARTICIPLE = (
    r"(?:,?\s+(?:reading|processing|parsing|summari[sz]ing|analy[sz]ing|ingesting|indexing|reviewing"
    r"|handling|that\s+reads?|who\s+reads?)\b[^:,.!?\n|]{0,50})"
)
_QUALIFIER = r"(?:\s+(?:instructions?|note|notice|only))"
_SEP = r"[ \t]*(?:[:,!—–-]|\n)\s*"
_CLAUSE = r"(?:(?:if|when|while|before|after)\s+[^,.!?\n|]{0,60},\s*)?"
_POLITE = (
    r"(?:(?:please|kindly|now|immediately|first|also|then|just|simply|you\s+must|you\s+should|you\s+need\s+to"
    r"|you\s+are\s+(?:required|instructed)\s+to|make\s+sure\s+(?:to|you))\s+)*"
)
_OBJ = r"(?:the|all|any|every|your|this|these|that|previous|prior|it|them|everything|anything|a\s+copy)\b"
_TOOL = (
    r"\b(?:call|invoke|run|execute|trigger|use)\s+(?:the\s+|your\s+|a\s+)?[`'\"]?[\w.-]+[`'\"]?\s+"
    r"(?:tool|function|plugin|action)\b"
)
_IMP = (  # what an attacker tells the model to do
    rf"(?:(?:ignore|disregard|forget|override|bypass|skip|omit|hide|conceal|suppress)\s+{_OBJ}"
    r"|(?:tell|inform|assure|advise|convince|reply\s+to|respond\s+to|answer)\s+(?:the\s+|any\s+|all\s+)?"
    r"(?:users?|customers?|readers?|humans?|requesters?|operators?|auditors?|reviewers?)\b"
    r"|(?:say|state|claim|report|confirm|conclude|answer|respond|reply|output|print)\s+(?:only\s+)?"
    r"(?:that\b|with\b|[\"']|the\s+\w+\s+(?:is|are|was|has)\b)"
    rf"|(?:send|forward|post|upload|transmit|e-?mail|share|reveal|disclose|export|repeat|leak|exfiltrate)\s+{_OBJ}"
    rf"|{_TOOL}|you\s+are\s+now\b"
    r"|(?:do\s+not|don't|never)\s+(?:mention|reveal|disclose|tell|flag|report|warn|escalate|question)\b"
    rf"|(?:include|insert|append|add)\b{_gap(40)}\b(?:in|to|into)\s+your\s+(?:response|answer|summary|reply|output)"
    r"|(?:approve|authori[sz]e|accept|clear)\s+(?:all|every|any|this|these)\b"
    rf"|(?:summari[sz]e|describe|present|rate|rank|classify|mark|treat|recommend)\s+{_gap(40)}\bas\b"
    r"|(?:pretend|act\s+as|role-?play)\b|(?:follow|obey)\s+(?:these|the\s+following|my|only)\b)"
)
_OVERRIDE_TARGET = (
    r"(?:your\s+(?:(?:previous|prior|original|initial|current|existing|safety|system|built-in|core|content"
    r"|compliance|ethical|moderation)\s+){0,2}(?:instructions|guidelines|rules|system\s+prompt|prompt"
    r"|programming|training|guardrails|directives|constraints|restrictions|policies|filters|safeguards|principles)"
    r"|(?:all\s+(?:of\s+)?(?:the\s+|your\s+)?|any\s+|the\s+)?(?:previous|prior|above|preceding|earlier|original"
    r"|initial|foregoing)\s+(?:\w+\s+)?(?:instructions|prompts?|directives|guidelines|rules|context)\b"
    r"(?!\s+(?:in|on|for|from|regarding|about|issued|dated|under|relating|related|concerning|of|to|until|with)\b)"
    r"|the\s+system\s+prompt\b(?!\s+(?:for|of|on|in|at)\b)"
    r"|(?:everything|anything|all)\s+(?:above|before\s+this|(?:you\s+(?:were|have\s+been)\s+)?(?:told|said)"
    r"\s+(?:before|previously|earlier|so\s+far)))"
)
_URL = r"https?://[^\s<>\"'`)\]|]*?"
_SECRET_PARAM = (
    r"[?&#;](?:api[_-]?key|apikey|access[_-]?key|access[_-]?token|auth[_-]?token|id[_-]?token|refresh[_-]?token"
    r"|client[_-]?secret|secret|token|password|passwd|pwd|sig|signature|private[_-]?key)="
    r"(?![<{\[%*]|your|xxx|redacted|example|placeholder|\.\.\.)(?=[^&#\s]*\d)[\w\-+/=.%~]{16,}"
)
_SECRET_SHAPE = r"(?:sk_live_|rk_live_|gh[pousr]_|github_pat_|xox[abposr]-|AIza)[\w-]{12,}|(?-i:AKIA[0-9A-Z]{16})"
_SYSTEM_FOLLOW = (
    r"(?:as\s+an?\s+(?:AI|assistant|language\s+model|LLM)\b|you\s+are\s+(?:now|an?\s+(?:AI|assistant"
    r"|language\s+model|helpful))\b|(?:ignore|disregard|forget|override)\s+(?:all|any|previous|prior|your"
    r"|the\s+above|earlier|everything)\b|new\s+instructions\b|from\s+now\s+on\b"
    r"|the\s+(?:assistant|AI|model|chatbot)\s+(?:must|should|will|is|shall)\b)"
)

# --- the rules ---------------------------------------------------------------------------------------
_RULE_SOURCES: tuple[tuple[str, str, str], ...] = (
    (
        "override-instructions",
        "an override verb aimed at the model's own instructions or prompt",
        rf"{_NOT}\b(?:ignore|disregard|forget|override|bypass|set\s+aside|discard|abandon|stop\s+following)\b"
        rf"{_gap(40)}{_OVERRIDE_TARGET}"
        r"|\b(?:ignora|ignore[zr]?|ignoriere|olvida|oublie[zr]?|vergiss)\b[^.!?\n|]{0,30}?\b(?:instrucciones"
        r"|instructions|consignes|indicaciones)\s+(?:anteriores|pr[ée]c[ée]dentes|previas)"
        r"|\b(?:ignoriere|vergiss)\s+(?:alle\s+)?(?:vorherigen|bisherigen)\s+(?:anweisungen|instruktionen)",
    ),
    (
        "addressed-to-ai",
        "an imperative addressed to an AI, assistant, language model or AI agent",
        rf"(?:{_LEAD}{_PREFIX}|\b{_PREFIX}){_AI}{_QUALIFIER}?{_PARTICIPLE}?{_SEP}{_CLAUSE}{_POLITE}{_IMP}"
        rf"|{_LEAD}{_AI}(?:(?<=s)|{_QUALIFIER}|{_PARTICIPLE}){_QUALIFIER}?{_PARTICIPLE}?{_SEP}{_CLAUSE}{_POLITE}{_IMP}"
        rf"|{_AI}\s+(?:reading|processing|parsing|summari[sz]ing|analy[sz]ing|ingesting|indexing|reviewing)\s+"
        rf"(?:this|these)\b{_gap(50)}\b(?:must|should|shall|need\s+to|are\s+(?:required|instructed|expected)\s+to"
        rf"|will\s+now)\s+(?:now\s+|immediately\s+|also\s+|always\s+)?{_IMP}"
        r"|\bas\s+an?\s+(?:AI|LLM|(?:large\s+)?language\s+model|AI\s+(?:model|assistant|agent|system))\b,?\s+you\s+"
        rf"(?:must|should|shall|will|are\s+(?:required|instructed)\s+to|need\s+to)\s+(?:now\s+|always\s+)?{_IMP}"
        rf"|\bif\s+you(?:\s+are|'re)\s+an?\s+{_AI}(?!\s+(?:vendor|provider|developer|company|firm|startup|team"
        rf"|user|validator|governance|risk|owner))[^.!?\n|]{{0,60}}?[,:;]\s*{_POLITE}{_IMP}",
    ),
    (
        "role-reassignment",
        "tries to give the model a new identity, mode or freedom from its rules",
        r"\byou(?:\s+are|'re)\s+now\s+(?:in\s+)?(?:an?\s+)?(?:DAN\b|jailbr(?:oken|eak)|unrestricted|unfiltered"
        r"|uncensored|(?:developer|god|DAN|jailbreak)\s+mode|(?:new|different)\s+(?:AI|assistant|model|chatbot)"
        r"|no\s+longer\s+an?\s+(?:AI|assistant))"
        r"|\byou(?:\s+are|'re)\s+no\s+longer\s+(?:bound|restricted|constrained|limited|governed)\s+by\s+(?:your|any)"
        r"\s+(?:\w+\s+)?(?:rules|guidelines|safety|programming|restrictions|polic(?:y|ies)|instructions|training"
        r"|guardrails)"
        r"|\bfrom\s+now\s+on,?\s+you\s+(?:will|are|must|shall|should)\s+(?:only\s+|always\s+)?(?:respond|answer"
        r"|reply|act|behave|pretend|ignore|disregard|refer\s+to\s+yourself|be\s+(?:an?\s+)?(?:\w+\s+)?"
        r"(?:AI|assistant|bot|chatbot|model))"
        r"|\b(?:pretend|imagine)\s+(?:to\s+be|you\s+are|you're|that\s+you\s+are)\s+(?:an?\s+|the\s+)?"
        r"(?:\w+\s+){0,3}?(?:AI|assistant|chatbot|language\s+model|LLM|DAN)\b"
        r"|\bact\s+as\s+(?:an?\s+)?(?:DAN\b|unrestricted|unfiltered|uncensored|jailbroken"
        r"|(?:AI|assistant|model|chatbot)\s+(?:with\s+no|without))"
        rf"|\b(?:role-?\s?play|let's\s+play\s+a\s+game)\b{_gap(80)}\b(?:with\s+no|without|free\s+of|ignores?)\s+"
        r"(?:any\s+)?(?:rules|restrictions|limits|filters|guidelines|ethics|guardrails)"
        r"|\byour\s+new\s+(?:persona|identity|system\s+prompt)\s+(?:is|will\s+be)\b"
        r"|\b(?:enter|switch\s+to|activate|enable)\s+(?:DAN|jailbreak|god|unrestricted|unfiltered|uncensored)\s+mode"
        r"|\byou\s+are\s+an?\s+(?:\w+\s+){0,2}?(?:AI|assistant|chatbot|model)\s+(?:with\s+no|without(?:\s+any)?)\s+"
        r"(?:\w+\s+)?(?:rules|restrictions|limits|filters|guidelines|ethics|guardrails)",
    ),
    (
        "system-prompt-extraction",
        "asks the model to reveal its system prompt, hidden instructions or context",
        r"\b(?:reveal|print|output|repeat|show|display|disclose|share|dump|leak|recite|write\s+out|spell\s+out"
        r"|tell\s+(?:me|us)|give\s+(?:me|us)|paste|what\s+(?:is|are|was|were))\b[^.!?\n|]{0,30}?"
        r"(?:\byour\s+(?:(?:full|entire|complete|exact|verbatim|current|original|initial|hidden|secret|internal"
        r"|underlying|developer|system)\s+){0,3}(?:system\s+prompt|system\s+message|prompt|pre-?prompt"
        r"|context\s+window|conversation\s+history)\b(?!\s+(?:card|sheet|script|library))"
        r"|\byour\s+(?:(?:full|entire|complete|exact|verbatim)\s+)?(?:original|initial|hidden|secret|internal"
        r"|system|developer)\s+(?:instructions|rules|directives|configuration)"
        r"|\bthe\s+(?:(?:full|entire|complete|exact)\s+)?(?:hidden|secret)\s+(?:system\s+prompt|prompt|instructions)"
        r"|\bthe\s+(?:(?:full|entire|complete|exact)\s+)?(?:initial|original)\s+(?:system\s+)?prompt)"
        r"|\b(?:repeat|print|output|recite|copy|reproduce)\s+(?:everything|all(?:\s+the)?\s+(?:text|words|content)"
        rf"|the\s+(?:text|words|content))\s+(?:above|before\s+this|preceding)\b{_gap(40)}\b(?:verbatim"
        r"|word\s+for\s+word|starting\s+with|in\s+full|in\s+a\s+code\s?block|exactly)",
    ),
    (
        "exfiltration-request",
        "asks for the conversation, context, credentials or answer to be sent somewhere",
        rf"{_NOT}\b(?:send|forward|post|upload|transmit|e-?mail|exfiltrate|leak|copy|paste|append|encode|submit)\b"
        r"[^.!?\n|]{0,30}?\b(?:your|this|the\s+(?:full|entire|whole|complete|hidden|current|above)"
        r"|all\s+(?:of\s+)?(?:the|this|your))\s+(?:(?:full|entire|whole|complete|current|hidden|original|previous"
        r"|raw|prior)\s+)*(?:conversations?|chat(?:\s+(?:history|log))?|context(?:\s+window)?|system\s+prompt|prompt"
        r"|memory|credentials|secrets|api\s+keys|session\s+(?:tokens?|cookies)|previous\s+messages)\b"
        r"[^.!?\n|]{0,60}?\b(?:to|into|at|via|in)\s+(?:this\s+(?:url|link|endpoint|webhook|address|server)"
        r"|the\s+following\s+(?:url|link|endpoint|webhook|address)|https?://|[\w.+-]+@[\w-]+\.\w)"
        r"|\b(?:send|forward|post|upload|transmit|copy|submit|append)\b[^.!?\n|]{0,30}?\b(?:your|the|this)\s+"
        r"(?:(?:full|entire|complete|whole)\s+)?(?:response|answer|output|reply|summary|results?)\b"
        r"[^.!?\n|]{0,30}?\b(?:to|at|into)\s+(?:this\s+(?:url|link|endpoint|webhook)"
        r"|the\s+following\s+(?:url|link|endpoint|webhook)|https?://)"
        rf"|{_URL}[?&][\w-]+=\s*(?:\{{\{{?|<|\[|%7B)\s*(?:conversation|context|chat_history|history|system_prompt"
        r"|prompt|secrets?|credentials|memory)",
    ),
    (
        "tool-invocation",
        "tells the model to call a tool or function covertly or with its context",
        rf"{_TOOL}[^.!?\n|]{{0,60}}?\b(?:your\s+(?:context|conversation|system\s+prompt|prompt|instructions|memory"
        r"|chat\s+history|session|credentials)|this\s+conversation|the\s+(?:conversation|chat\s+history"
        r"|system\s+prompt)|without\s+(?:asking|telling|confirming|confirmation|notifying|informing|the\s+user|user)"
        r"|(?:do\s+not|don't)\s+(?:tell|inform|ask|notify))"
        rf"|\b(?:silently|secretly|quietly|covertly)\s+{_TOOL}"
        r"|\b(?:call|invoke|run|execute|trigger|use)\s+(?:the\s+)?[`'\"]?\w*(?:export|dump|leak|send|upload|exfil)\w*"
        r"(?:credential|secret|password|prompt|context|conversation|memory)"
        r"|<\s*/?\s*(?:tool_call|tool_use|function_calls?|invoke)\b|[\"'](?:function_call|tool_calls?)[\"']\s*:"
        r"|\buse\s+your\s+(?:browsing|browser|web|search|email|e-mail|code(?:[\s-]execution)?|shell|python|file"
        r"|http|fetch|terminal)\s+(?:tool|function|plugin|capability|access)",
    ),
    (
        "secret-in-url",
        "a URL whose query carries a secret-like parameter or a value shaped like a live secret",
        rf"{_URL}(?:{_SECRET_PARAM}|[^\s<>\"'`)\]|]*?(?:{_SECRET_SHAPE}))",
    ),
    (
        "fake-system-marker",
        "a chat-template token or a fake SYSTEM/ADMIN turn speaking to the model",
        r"<\|\s*(?:im_start|im_end|im_sep|system|endoftext|begin_of_text|start_header_id|end_header_id|eot_id)\s*\|>"
        r"|\[\s*/?\s*INST\s*\]|<<\s*/?\s*SYS\s*>>"
        rf"|{_LEAD}(?:\[\s*)?(?-i:SYSTEM|System|ADMIN|Admin|DEVELOPER|Developer)(?:\s+(?-i:[A-Z]+|[a-z]+))?"
        rf"\s*(?:\]\s*:?|:)\s*(?:[^.!?\n|]{{0,20}}?\b)?{_SYSTEM_FOLLOW}",
    ),
)

RULES: tuple[Rule, ...] = tuple(
    Rule(rule_id, why, re.compile(source, re.IGNORECASE)) for rule_id, why, source in _RULE_SOURCES
)

# --- normalisation -----------------------------------------------------------------------------------
_INVISIBLE = dict.fromkeys(
    map(
        ord,
        "\u00ad\u034f\u180e\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
        "\u2060\u2061\u2062\u2063\u2064\ufeff*",
    ),
    None,
)  # zero-width, bidi controls, soft hyphen, and markdown emphasis ("**ignore** all ...")
_QUOTES = str.maketrans({"‘": "'", "’": "'", "‛": "'", "“": '"', "”": '"', "„": '"'})
_BASE64 = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/]{20,}={0,2}(?![\w+/=-])")


def _reveal_base64(text: str) -> str:
    """Put the decoded text of base64 blobs that hold readable prose on its own line after the blob."""

    def expand(match: re.Match[str]) -> str:
        blob = match.group().rstrip("=")
        try:
            decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return match.group()
        readable = " " in decoded and decoded.isprintable()
        return f"{match.group()}\n{decoded}\n" if readable else match.group()

    return _BASE64.sub(expand, text)


def normalise(text: str) -> str:
    """NFKC, drop invisible characters, straighten quotes, collapse whitespace, decode base64 prose."""
    text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_QUOTES)
    text = _reveal_base64(text)
    text = re.sub(r"[^\S\n]+", " ", text)
    return re.sub(r" ?\n\s*", "\n", text).strip()


def _excerpt(matched: str) -> str:
    matched = " ".join(matched.split())
    return matched if len(matched) <= EXCERPT_LIMIT else matched[: EXCERPT_LIMIT - 1].rstrip() + "…"


def scan_for_injection(text: str) -> list[InjectionFinding]:
    """The rules that match ``text``, one finding per rule, in the order they occur; [] when clean."""
    normalised = normalise(text)
    hits = []
    for rule in RULES:
        match = rule.pattern.search(normalised)
        if match:
            hits.append((match.start(), InjectionFinding(rule.id, _excerpt(match.group()))))
    return [finding for _, finding in sorted(hits, key=lambda hit: hit[0])]
